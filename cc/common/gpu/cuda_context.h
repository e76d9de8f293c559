// The core's small CUDA runtime layer: events recorded on a framework's
// stream, one collective stream per device, device and host buffers that
// grow, async copies, and a bounded wait for an event that also polls the
// caller's error source (NCCL's async error). Only cc/common/gpu/ and
// cc/common/nccl/ include it (the CUDA variant).
//
//   CudaContext* ctx;
//   Status s = CudaContext::ForDevice(entry.gpu.device, &ctx);
//   s = ctx->WaitReady(entry.gpu);                 // our stream waits, not the host
//   s = ctx->Copy(dst, src, bytes);                // on our stream
//   s = ctx->Finish(timeout_s, poll, "allreduce of 'x'");   // host polls our event
#ifndef TFHVD_COMMON_GPU_CUDA_CONTEXT_H_
#define TFHVD_COMMON_GPU_CUDA_CONTEXT_H_

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>

#include "cc/common/common.h"
#include "cc/common/gpu_backend.h"

namespace tfhvd {

// OK, or an error quoting CUDA's message, what failed and on which device.
Status CudaStatus(cudaError_t e, const std::string& what, int device);

// A cudaEvent_t (timing disabled), destroyed with its owner.
class CudaEvent : public GpuEvent {
 public:
  CudaEvent(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~CudaEvent() override;
  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaEvent_t event_;
};

// A device buffer that only grows (the device fusion buffer).
class DeviceBuffer {
 public:
  ~DeviceBuffer();
  // nullptr with an error when the device has no room (the framework's
  // allocator may hold most of the memory).
  Status Get(int device, size_t bytes, void** out);

 private:
  int device_ = -1;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class CudaContext {
 public:
  // The context of one device (created at first use, kept for the process).
  static Status ForDevice(int device, CudaContext** out);

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Makes this thread's current device ours (cudaSetDevice).
  Status Activate() const;
  // Our stream waits (on the device) for the tensor's ready event.
  Status WaitReady(const GpuPlacement& placement);
  // cudaMemcpyAsync on our stream (any direction; cudaMemcpyDefault).
  Status Copy(void* dst, const void* src, size_t bytes);
  // Records an event on our stream and waits until it completes, calling
  // poll (e.g. ncclCommGetAsyncError) while it waits; past timeout_s the
  // result is DEADLINE_EXCEEDED. The host waits for this event only, never
  // for the whole device.
  Status Finish(double timeout_s, const std::function<Status()>& poll, const std::string& what);

 private:
  explicit CudaContext(int device) : device_(device) {}
  Status Start();
  Status NewEvent(cudaEvent_t* out) const;

  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_CUDA_CONTEXT_H_
