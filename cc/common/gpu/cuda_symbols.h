// The CUDA runtime functions tf_hvd calls, each defined in cuda_symbols.cc to call the
// same function of the libcudart.so.12 that GpuLibraries loaded (gpu_libraries.h): the
// GPU code calls cudaSetDevice(...) as written, and the library has no link-time
// dependency on CUDA. A new CUDA call needs its row here (tools/release/check_wheels.py's
// --library check finds an unbound one).
#ifndef TFHVD_COMMON_GPU_CUDA_SYMBOLS_H_
#define TFHVD_COMMON_GPU_CUDA_SYMBOLS_H_

#include <cuda_runtime.h>

#include <vector>

// X(return type, name, (parameters), (arguments))
#define TFHVD_CUDA_FUNCTIONS(X) \
  X(cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t* event, unsigned int flags), (event, \
      flags)) \
  X(cudaError_t, cudaEventDestroy, (cudaEvent_t event), (event)) \
  X(cudaError_t, cudaEventQuery, (cudaEvent_t event), (event)) \
  X(cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream), (event, stream)) \
  X(cudaError_t, cudaFree, (void* devPtr), (devPtr)) \
  X(cudaError_t, cudaFreeHost, (void* ptr), (ptr)) \
  X(cudaError_t, cudaGetDriverEntryPointByVersion, (const char* symbol, void** funcPtr, unsigned \
      int cudaVersion, unsigned long long flags, enum cudaDriverEntryPointQueryResult* \
      driverStatus), (symbol, funcPtr, cudaVersion, flags, driverStatus)) \
  X(const char*, cudaGetErrorName, (cudaError_t error), (error)) \
  X(const char*, cudaGetErrorString, (cudaError_t error), (error)) \
  X(cudaError_t, cudaGetLastError, (void), ()) \
  X(cudaError_t, cudaHostAlloc, (void** pHost, size_t size, unsigned int flags), (pHost, size, \
      flags)) \
  X(cudaError_t, cudaMalloc, (void** devPtr, size_t size), (devPtr, size)) \
  X(cudaError_t, cudaMemcpyAsync, (void* dst, const void* src, size_t count, enum cudaMemcpyKind \
      kind, cudaStream_t stream), (dst, src, count, kind, stream)) \
  X(cudaError_t, cudaRuntimeGetVersion, (int* runtimeVersion), (runtimeVersion)) \
  X(cudaError_t, cudaSetDevice, (int device), (device)) \
  X(cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t* pStream, unsigned int flags), \
      (pStream, flags)) \
  X(cudaError_t, cudaStreamWaitEvent, (cudaStream_t stream, cudaEvent_t event, unsigned int \
      flags), (stream, event, flags))

namespace tfhvd {

// The names above, which a libcudart must all have to be accepted.
const std::vector<const char*>& CudaFunctionNames();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_CUDA_SYMBOLS_H_
