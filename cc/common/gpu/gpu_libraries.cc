#include "cc/common/gpu/gpu_libraries.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cc/common/gpu/cuda_symbols.h"
#include "cc/common/runtime_library.h"

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

// One library by any of its sonames: a copy already in the process (TensorFlow's, or a
// test program's), else the search dirs, else the loader's path. *tried lists each failure.
void* OpenOne(const std::vector<std::string>& sonames, const std::vector<std::string>& dirs,
              std::string* tried) {
  std::string not_loaded;  // RTLD_NOLOAD failing only says it is not in the process yet
  void* h = OpenRuntimeLibrary(sonames, RTLD_NOW | RTLD_NOLOAD, nullptr, &not_loaded);
  if (h != nullptr) return h;
  return OpenRuntimeLibrary(RuntimeLibraryCandidates(sonames, dirs), RTLD_NOW | RTLD_LOCAL,
                            nullptr, tried);
}

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
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
    s.status = Open(s.dirs, &s.cudart, &s.nccl);
  }
  return s.status;
}

Status GpuLibraries::Open(const std::vector<std::string>& dirs, void** cudart, void** nccl) {
  const std::string fix =
      "\nGPU tensors need the CUDA runtime and NCCL, which tf_hvd loads when the first one "
      "arrives: install them with `pip install \"tensorflow[and-cuda]\"` (the "
      "nvidia-cuda-runtime-cu12 and nvidia-nccl-cu12 wheels), or put the folders holding "
      "libcudart.so.12 and libnccl.so.2 on LD_LIBRARY_PATH. CPU tensors need neither.";
  *cudart = *nccl = nullptr;
  std::string tried;
  void* runtime = OpenOne({"libcudart.so.12", "libcudart.so.13"}, dirs, &tried);
  if (runtime == nullptr) {
    return Status::Precondition("the CUDA runtime (libcudart.so.12) could not be loaded. "
                                "Tried:" + tried + fix);
  }
  // The version first: a runtime older than 12.5 is named as such, not by a missing call.
  auto get_runtime_version = Lookup<cudaError_t (*)(int*)>(runtime, "cudaRuntimeGetVersion");
  const std::string where = LibraryPath(runtime);
  int version = 0;
  if (get_runtime_version != nullptr) get_runtime_version(&version);
  const char* missing = FirstMissingSymbol(runtime, CudaFunctionNames());
  if (get_runtime_version != nullptr && version < kMinCudaRuntime) {
    return Status::Precondition("the CUDA runtime that was loaded (" + where + ") is version " +
                                std::to_string(version) + "; tf_hvd needs 12.5 or later" + fix);
  }
  if (missing != nullptr) {
    return Status::Precondition("the CUDA runtime that was loaded (" + where + ") has no " +
                                missing + " (tf_hvd needs CUDA >= 12.5)" + fix);
  }
  tried.clear();
  void* collectives = OpenOne({"libnccl.so.2"}, dirs, &tried);
  if (collectives == nullptr) {
    return Status::Precondition("NCCL (libnccl.so.2) could not be loaded. Tried:" + tried + fix);
  }
  auto get_version = Lookup<int (*)(int*)>(collectives, "ncclGetVersion");
  int nccl_version = 0;
  if (get_version == nullptr || get_version(&nccl_version) != 0 || nccl_version < kMinNccl) {
    return Status::Precondition("the NCCL that was loaded is version " +
                                std::to_string(nccl_version) + "; tf_hvd needs 2.18 or later" +
                                fix);
  }
  *cudart = runtime;
  *nccl = collectives;
  return Status();
}

void* GpuLibraries::CudaSymbol(const char* name) { return SymbolOrAbort(&State::cudart, name); }

void* GpuLibraries::NcclSymbol(const char* name) { return SymbolOrAbort(&State::nccl, name); }

}  // namespace tfhvd
