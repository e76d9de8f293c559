#include "cc/common/gpu/runtime_compiler.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tfhvd {

namespace {

// NVRTC's C API, declared here because the library is opened with dlopen (its
// header is not among the build's CUDA headers). The ABI is stable across
// CUDA 11-13: nvrtcResult is an int-sized enum, NVRTC_SUCCESS is 0.
using NvrtcResult = int;
using NvrtcProgram = void*;
struct Nvrtc {
  NvrtcResult (*create)(NvrtcProgram*, const char*, const char*, int, const char* const*,
                        const char* const*);
  NvrtcResult (*compile)(NvrtcProgram, int, const char* const*);
  NvrtcResult (*ptx_size)(NvrtcProgram, size_t*);
  NvrtcResult (*ptx)(NvrtcProgram, char*);
  NvrtcResult (*log_size)(NvrtcProgram, size_t*);
  NvrtcResult (*log)(NvrtcProgram, char*);
  NvrtcResult (*destroy)(NvrtcProgram*);
  const char* (*error)(NvrtcResult);
  NvrtcResult (*num_archs)(int*);
  NvrtcResult (*archs)(int*);
  std::string path;
  std::string why;  // set when it could not be loaded
};

// The directory of the libcudart this process loaded ("" if none is found).
std::string CudartDir() {
  std::string dir;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name && std::strstr(name, "libcudart")) {
          std::string path(name);
          *static_cast<std::string*>(data) = path.substr(0, path.rfind('/'));
          return 1;
        }
        return 0;
      },
      &dir);
  return dir;
}

template <typename F>
bool Bind(void* lib, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, symbol));
  return *out != nullptr;
}

Nvrtc Load() {
  Nvrtc n{};
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  const std::string so = "libnvrtc.so." + std::to_string(runtime / 1000);
  const std::string cudart = CudartDir();
  std::vector<std::string> tries = {so};
  if (!cudart.empty()) {
    tries.push_back(cudart + "/" + so);                       // a system CUDA, CUDA 13 wheels
    tries.push_back(cudart + "/../../cuda_nvrtc/lib/" + so);  // CUDA 12 wheels
  }
  tries.push_back("libnvrtc.so");
  void* lib = nullptr;
  for (const std::string& t : tries) {
    lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      n.path = t;
      break;
    }
  }
  if (!lib) {
    n.why = "NVRTC (" + so + ") was not found: install nvidia-cuda-nvrtc-cu12, or add CUDA's "
            "lib64 to LD_LIBRARY_PATH";
    return n;
  }
  bool ok = Bind(lib, "nvrtcCreateProgram", &n.create) &&
            Bind(lib, "nvrtcCompileProgram", &n.compile) &&
            Bind(lib, "nvrtcGetPTXSize", &n.ptx_size) && Bind(lib, "nvrtcGetPTX", &n.ptx) &&
            Bind(lib, "nvrtcGetProgramLogSize", &n.log_size) &&
            Bind(lib, "nvrtcGetProgramLog", &n.log) &&
            Bind(lib, "nvrtcDestroyProgram", &n.destroy) &&
            Bind(lib, "nvrtcGetErrorString", &n.error) &&
            Bind(lib, "nvrtcGetNumSupportedArchs", &n.num_archs) &&
            Bind(lib, "nvrtcGetSupportedArchs", &n.archs);
  if (!ok) n.why = n.path + " lacks NVRTC's API (CUDA 11.2 or newer is needed)";
  return n;
}

const Nvrtc& Compiler() {
  static const Nvrtc* nvrtc = new Nvrtc(Load());  // once per process, never unloaded
  return *nvrtc;
}

}  // namespace

std::string RuntimeCompilerPath() { return Compiler().why.empty() ? Compiler().path : ""; }

Status CompileToPtx(const std::string& source, const std::string& name, std::string* ptx) {
  const Nvrtc& n = Compiler();
  if (!n.why.empty()) return Status::Precondition(n.why);
  auto failed = [&](const char* call, NvrtcResult r) {
    return Status::Unknown(std::string(call) + " of " + name + " failed: " + n.error(r) +
                           " (" + n.path + ")");
  };
  int count = 0;
  NvrtcResult r = n.num_archs(&count);
  if (r != 0 || count <= 0) return failed("nvrtcGetNumSupportedArchs", r);
  std::vector<int> archs(static_cast<size_t>(count));
  r = n.archs(archs.data());
  if (r != 0) return failed("nvrtcGetSupportedArchs", r);
  const std::string arch =
      "--gpu-architecture=compute_" + std::to_string(*std::min_element(archs.begin(), archs.end()));
  NvrtcProgram prog = nullptr;
  r = n.create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != 0) return failed("nvrtcCreateProgram", r);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  r = n.compile(prog, 2, options);
  Status s;
  if (r != 0) {
    size_t size = 0;
    std::string log;
    if (n.log_size(prog, &size) == 0 && size > 1) {
      log.resize(size);
      n.log(prog, &log[0]);
      log.resize(size - 1);
    }
    s = Status::Unknown("NVRTC could not compile " + name + " (" + arch + "): " + log);
  } else {
    size_t size = 0;
    r = n.ptx_size(prog, &size);
    if (r == 0) {
      ptx->resize(size);
      r = n.ptx(prog, &(*ptx)[0]);  // size counts the terminating NUL, which stays
    }
    if (r != 0) s = failed("nvrtcGetPTX", r);
  }
  n.destroy(&prog);
  return s;
}

}  // namespace tfhvd
