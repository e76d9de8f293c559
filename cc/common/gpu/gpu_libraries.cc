#include "cc/common/gpu/gpu_libraries.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cc/common/gpu/cuda_symbols.h"

namespace tfhvd {
namespace {

constexpr int kMinCudaRuntime = 12050;  // cudaGetDriverEntryPointByVersion
constexpr int kMinNccl = 21800;         // ncclCommInitRankConfig, ncclCommFinalize

struct State {
  std::mutex mu;
  std::vector<std::string> dirs;
  bool tried = false;
  Status status;
  void* cudart = nullptr;
  void* nccl = nullptr;
};

State& state() {
  static State* s = new State();  // never destroyed: GPU work may end at exit
  return *s;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// One library by any of its sonames: a copy already in the process (TensorFlow's, or a
// test program's), else the search dirs, else the loader's path. *tried lists each failure.
void* Open(const std::vector<std::string>& sonames, const std::vector<std::string>& dirs,
           std::string* tried) {
  for (const std::string& so : sonames) {
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h != nullptr) return h;
  }
  std::vector<std::string> candidates;
  for (const std::string& so : sonames) {
    for (const std::string& d : dirs) {
      if (IsFile(d + "/" + so)) candidates.push_back(d + "/" + so);
    }
  }
  candidates.insert(candidates.end(), sonames.begin(), sonames.end());
  for (const std::string& c : candidates) {
    dlerror();
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) return h;
    const char* e = dlerror();
    *tried += "\n  " + c + ": " + (e != nullptr ? e : "dlopen failed");
  }
  return nullptr;
}

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

Status LoadLocked(State& s) {
  const std::string fix =
      "\nGPU tensors need the CUDA runtime and NCCL, which tf_hvd loads when the first one "
      "arrives: install them with `pip install \"tensorflow[and-cuda]\"` (the "
      "nvidia-cuda-runtime-cu12 and nvidia-nccl-cu12 wheels), or put the folders holding "
      "libcudart.so.12 and libnccl.so.2 on LD_LIBRARY_PATH. CPU tensors need neither.";
  std::string tried;
  s.cudart = Open({"libcudart.so.12", "libcudart.so.13"}, s.dirs, &tried);
  if (s.cudart == nullptr) {
    return Status::Precondition("the CUDA runtime (libcudart.so.12) could not be loaded. "
                                "Tried:" + tried + fix);
  }
  for (const char* name : CudaFunctionNames()) {
    if (dlsym(s.cudart, name) == nullptr) {
      return Status::Precondition(std::string("the CUDA runtime that was loaded has no ") +
                                  name + " (tf_hvd needs CUDA >= 12.5)" + fix);
    }
  }
  int version = 0;
  Lookup<cudaError_t (*)(int*)>(s.cudart, "cudaRuntimeGetVersion")(&version);
  if (version < kMinCudaRuntime) {
    return Status::Precondition("the CUDA runtime that was loaded is version " +
                                std::to_string(version) + "; tf_hvd needs 12.5 or later" + fix);
  }
  tried.clear();
  s.nccl = Open({"libnccl.so.2"}, s.dirs, &tried);
  if (s.nccl == nullptr) {
    return Status::Precondition("NCCL (libnccl.so.2) could not be loaded. Tried:" + tried + fix);
  }
  auto get_version = Lookup<int (*)(int*)>(s.nccl, "ncclGetVersion");
  int nccl = 0;
  if (get_version == nullptr || get_version(&nccl) != 0 || nccl < kMinNccl) {
    return Status::Precondition("the NCCL that was loaded is version " + std::to_string(nccl) +
                                "; tf_hvd needs 2.18 or later" + fix);
  }
  return Status();
}

void* SymbolOrAbort(void* State::*which, const char* name) {
  Status s = GpuLibraries::Load();
  void* fn = s.ok() ? dlsym(state().*which, name) : nullptr;
  if (fn == nullptr) {
    std::fprintf(stderr, "tf_hvd: %s is needed but %s\n", name,
                 s.ok() ? "the loaded library lacks it" : s.message().c_str());
    std::abort();
  }
  return fn;
}

}  // namespace

void GpuLibraries::SetSearchDirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().dirs = std::move(dirs);
}

Status GpuLibraries::Load() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.tried) {
    s.tried = true;
    s.status = LoadLocked(s);
  }
  return s.status;
}

void* GpuLibraries::CudaSymbol(const char* name) { return SymbolOrAbort(&State::cudart, name); }

void* GpuLibraries::NcclSymbol(const char* name) { return SymbolOrAbort(&State::nccl, name); }

}  // namespace tfhvd
