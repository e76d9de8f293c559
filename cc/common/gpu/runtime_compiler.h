// CUDA C++ compiled to PTX at run time by NVRTC. The library has no .cu files
// (the CUDA wheels it builds against ship no nvcc), so its few kernels are
// compiled on first use; NVRTC is opened with dlopen, so a machine without it
// still runs every GPU op, only without those kernels. TensorFlow's CUDA
// wheels bring it (nvidia-cuda-nvrtc-cu12); it is looked up by soname, next to
// the loaded libcudart, and in the wheels' nvidia/cuda_nvrtc/lib.
//
//   std::string ptx;
//   Status s = CompileToPtx(kSource, "batched_copy.cu", &ptx);
//   if (!s.ok()) ...   // no NVRTC, or the compiler's log
#ifndef TFHVD_COMMON_GPU_RUNTIME_COMPILER_H_
#define TFHVD_COMMON_GPU_RUNTIME_COMPILER_H_

#include <string>

#include "cc/common/common.h"

namespace tfhvd {

// PTX for the oldest virtual architecture this NVRTC supports, which the driver
// compiles for any newer GPU. No GPU is needed to compile.
Status CompileToPtx(const std::string& source, const std::string& name, std::string* ptx);

// Where NVRTC was loaded from ("" when it could not be).
std::string RuntimeCompilerPath();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_RUNTIME_COMPILER_H_
