#include "cc/common/gpu/cuda_context.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cc/common/logging.h"

namespace tfhvd {

Status CudaStatus(cudaError_t e, const std::string& what, int device) {
  if (e == cudaSuccess) return Status();
  return Status::Unknown("CUDA error in " + what + " on device " + std::to_string(device) +
                         ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

namespace {

// Free events per device; never freed (events outlive static destructors).
struct EventPool {
  std::mutex mutex;
  std::map<int, std::vector<cudaEvent_t>> free;
};

EventPool& Events() {
  static auto* pool = new EventPool();
  return *pool;
}

}  // namespace

Status CudaEvent::Acquire(int device, std::unique_ptr<CudaEvent>* out) {
  cudaEvent_t event = nullptr;
  {
    EventPool& pool = Events();
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto& free = pool.free[device];
    if (!free.empty()) {
      event = free.back();
      free.pop_back();
    }
  }
  if (event == nullptr) {
    Status s = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                          "cudaEventCreate", device);
    if (!s.ok()) return s;
  }
  out->reset(new CudaEvent(device, event));
  return Status();
}

CudaEvent::~CudaEvent() {
  EventPool& pool = Events();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.free[device_].push_back(event_);
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

Status CudaContext::CopyBatch(std::vector<void*> dsts, std::vector<void*> srcs,
                              std::vector<size_t> sizes) {
  for (size_t i = dsts.size(); i-- > 0;) {  // nothing to copy: leave it out of the batch
    if (sizes[i] == 0 || dsts[i] == srcs[i]) {
      dsts.erase(dsts.begin() + i);
      srcs.erase(srcs.begin() + i);
      sizes.erase(sizes.begin() + i);
    }
  }
#if CUDART_VERSION >= 12080
  // Unsupported by the driver (older than the runtime): copy one by one from then on.
  static std::atomic<bool> batch_works{true};
  if (dsts.size() > 1 && batch_works.load(std::memory_order_relaxed)) {
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.srcLocHint.type = cudaMemLocationTypeDevice;
    attr.srcLocHint.id = device_;
    attr.dstLocHint = attr.srcLocHint;
    size_t first = 0;
#if CUDART_VERSION >= 13000
    cudaError_t e = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(),
                                         &attr, &first, 1, stream_);
#else
    size_t failed = 0;
    cudaError_t e = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(),
                                         &attr, &first, 1, &failed, stream_);
#endif
    if (e == cudaSuccess) return Status();
    if (e != cudaErrorNotSupported && e != cudaErrorInvalidValue &&
        e != cudaErrorCallRequiresNewerDriver) {
      return CudaStatus(e, "cudaMemcpyBatchAsync", device_);
    }
    cudaGetLastError();
    batch_works.store(false, std::memory_order_relaxed);
    TFHVD_LOG(WARNING) << "cudaMemcpyBatchAsync failed (" << cudaGetErrorName(e)
                       << "); fusion-buffer copies run one by one";
  }
#endif
  Status s;
  for (size_t i = 0; i < dsts.size() && s.ok(); ++i) s = Copy(dsts[i], srcs[i], sizes[i]);
  return s;
}

Status CudaContext::Finish(double timeout_s, const std::function<Status()>& poll,
                           const std::string& what) {
  std::unique_ptr<CudaEvent> owner;
  Status s = CudaEvent::Acquire(device_, &owner);
  if (!s.ok()) return s;
  cudaEvent_t event = owner->get();
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
    // every op longer than a few microseconds (tests/gpu/README.md).
    if (waited < 1e-3) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(100));
    }
  }
}

Status RecordReadyEvent(int device, void* stream, std::shared_ptr<GpuEvent>* out) {
  Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice", device);
  std::unique_ptr<CudaEvent> event;
  if (s.ok()) s = CudaEvent::Acquire(device, &event);
  if (s.ok()) {
    s = CudaStatus(cudaEventRecord(event->get(), static_cast<cudaStream_t>(stream)),
                   "cudaEventRecord (framework stream)", device);
  }
  if (s.ok()) *out = std::move(event);
  return s;
}

bool CudaBuilt() { return true; }

}  // namespace tfhvd
