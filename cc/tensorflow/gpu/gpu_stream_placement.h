// Marks a batch of entries as living on a GPU stream: one ready event recorded
// on the framework's (or XLA's) stream, shared by every entry, which the
// background thread waits for before it reads the tensors.
#ifndef TFHVD_TENSORFLOW_GPU_GPU_STREAM_PLACEMENT_H_
#define TFHVD_TENSORFLOW_GPU_GPU_STREAM_PLACEMENT_H_

#include <memory>
#include <vector>

#include "cc/common/gpu_backend.h"
#include "cc/common/negotiation/tensor_queue.h"

namespace tfhvd {

inline Status PlaceOnGpuStream(int device, void* stream, std::vector<TensorTableEntry>* entries) {
  std::shared_ptr<GpuEvent> ready;
  Status s = RecordReadyEvent(device, stream, &ready);
  if (!s.ok()) return s;
  for (auto& e : *entries) {
    e.gpu.device = device;
    e.gpu.stream = stream;
    e.gpu.ready = ready;
  }
  return Status();
}

}  // namespace tfhvd

#endif  // TFHVD_TENSORFLOW_GPU_GPU_STREAM_PLACEMENT_H_
