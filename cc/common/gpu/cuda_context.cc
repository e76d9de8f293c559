#include "cc/common/gpu/cuda_context.h"

#include "cc/common/gpu/gpu_libraries.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace tfhvd {

Status CudaStatus(cudaError_t e, const std::string& what, int device) {
  if (e == cudaSuccess) return Status();
  return Status::Unknown("CUDA error in " + what + " on device " + std::to_string(device) +
                         ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
}

Status DeviceBuffer::Get(int device, size_t bytes, void** out) {
  if (data_ != nullptr && device == device_ && bytes <= bytes_) {
    *out = data_;
    return Status();
  }
  if (data_ != nullptr) {
    cudaSetDevice(device_);
    cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  device_ = device;
  Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice", device);
  if (s.ok()) s = CudaStatus(cudaMalloc(&data_, bytes), "cudaMalloc(" + std::to_string(bytes) +
                                                            " bytes of fusion buffer)", device);
  if (!s.ok()) {
    cudaGetLastError();  // an allocation failure is not sticky; clear it
    data_ = nullptr;
    return s;
  }
  bytes_ = bytes;
  *out = data_;
  return Status();
}

Status CudaContext::ForDevice(int device, CudaContext** out) {
  static std::mutex mutex;
  static auto* contexts = new std::map<int, std::unique_ptr<CudaContext>>();  // never freed
  std::lock_guard<std::mutex> lock(mutex);
  auto it = contexts->find(device);
  if (it == contexts->end()) {
    std::unique_ptr<CudaContext> ctx(new CudaContext(device));
    Status s = ctx->Start();
    if (!s.ok()) return s;
    it = contexts->emplace(device, std::move(ctx)).first;
  }
  *out = it->second.get();
  return Status();
}

Status CudaContext::Start() {
  Status s = Activate();
  // A stream of its own that never waits for the legacy default stream.
  if (s.ok()) {
    s = CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags", device_);
  }
  return s;
}

Status CudaContext::Activate() const {
  return CudaStatus(cudaSetDevice(device_), "cudaSetDevice", device_);
}

Status CudaContext::NewEvent(cudaEvent_t* out) const {
  return CudaStatus(cudaEventCreateWithFlags(out, cudaEventDisableTiming), "cudaEventCreate",
                    device_);
}

Status CudaContext::WaitReady(const GpuPlacement& placement) {
  auto* event = dynamic_cast<CudaEvent*>(placement.ready.get());
  if (event == nullptr) return Status();  // nothing to wait for
  return CudaStatus(cudaStreamWaitEvent(stream_, event->get(), 0), "cudaStreamWaitEvent",
                    device_);
}

Status CudaContext::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return Status();
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
                    "cudaMemcpyAsync", device_);
}

Status CudaContext::Finish(double timeout_s, const std::function<Status()>& poll,
                           const std::string& what) {
  cudaEvent_t event;
  Status s = NewEvent(&event);
  if (!s.ok()) return s;
  CudaEvent owner(device_, event);
  s = CudaStatus(cudaEventRecord(event, stream_), "cudaEventRecord", device_);
  if (!s.ok()) return s;
  const auto start = std::chrono::steady_clock::now();
  auto nap = std::chrono::microseconds(10);
  for (;;) {
    cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return Status();
    if (e != cudaErrorNotReady) return CudaStatus(e, what, device_);
    if (poll) {
      s = poll();
      if (!s.ok()) return s;
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      return Status::DeadlineExceeded(what + " on device " + std::to_string(device_) +
                                      " did not finish within " + std::to_string(timeout_s) +
                                      " s (HOROVOD_NCCL_TIMEOUT_SECONDS)");
    }
    // Spin for the first millisecond (most collectives end sooner; a GPU host has cores
    // to spare, and cudaEventSynchronize spins too), then nap, at most 100 us at a time:
    // a doubling nap without a cap (256 us after eight yields) added up to 256 us to
    // every op longer than a few microseconds (4.7x at 64 MiB on an H100, docs/gpu.md).
    if (waited < 1e-3) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(100));
    }
  }
}

Status RecordReadyEvent(int device, void* stream, std::shared_ptr<GpuEvent>* out) {
  // Every GPU tensor passes here first: the CUDA runtime and NCCL are loaded now, and a
  // machine without them gets the error on the tensor's op, naming what to install.
  Status s = GpuLibraries::Load();
  if (!s.ok()) return s;
  s = CudaStatus(cudaSetDevice(device), "cudaSetDevice", device);
  cudaEvent_t event = nullptr;
  if (s.ok()) {
    s = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate",
                   device);
  }
  if (!s.ok()) return s;
  auto owned = std::make_shared<CudaEvent>(device, event);
  s = CudaStatus(cudaEventRecord(event, static_cast<cudaStream_t>(stream)),
                 "cudaEventRecord (framework stream)", device);
  if (s.ok()) *out = std::move(owned);
  return s;
}

bool CudaBuilt() { return true; }

void SetGpuLibraryDirs(std::vector<std::string> dirs) {
  GpuLibraries::SetSearchDirs(std::move(dirs));
}

Status LoadGpuLibraries() { return GpuLibraries::Load(); }

}  // namespace tfhvd
