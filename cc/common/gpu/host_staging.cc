#include "cc/common/gpu/host_staging.h"

#include <algorithm>
#include <memory>

#include "cc/common/gpu/cuda_context.h"
#include "cc/common/gpu/pinned_pool.h"

namespace tfhvd {

namespace {

// The host side of one staged tensor (pinned blocks from PinnedPool); lives
// until its callback has run.
struct Staged {
  std::shared_ptr<void> input;
  std::shared_ptr<void> output;  // null: the output is `input` (in place)
  void* device_output = nullptr;
  size_t output_bytes = 0;
  // Recorded on the framework's stream after an output allocated late (from
  // the background thread): memory the framework's later work may still use.
  std::shared_ptr<GpuEvent> allocated;
};

}  // namespace

Status StageThroughHost(TensorTableEntry* e, double timeout_s) {
  CudaContext* ctx = nullptr;
  Status s = CudaContext::ForDevice(e->gpu.device, &ctx);
  if (s.ok()) s = ctx->Activate();
  if (!s.ok()) return s;
  const std::string& name = e->request.name;
  const size_t elem = DataTypeSize(e->request.dtype);
  const size_t in_bytes = static_cast<size_t>(NumElements(e->request.shape)) * elem;
  auto staged = std::make_shared<Staged>();
  s = PinnedPool::Get(std::max<size_t>(in_bytes, 1), &staged->input);
  if (s.ok()) s = ctx->WaitReady(e->gpu);
  if (s.ok()) s = ctx->Copy(staged->input.get(), e->input, in_bytes);
  if (s.ok()) s = ctx->Finish(timeout_s, nullptr, "copying tensor '" + name + "' to the host");
  if (!s.ok()) return s;

  // Outputs shaped like the input (allreduce, broadcast) are known now;
  // the others are allocated by the CPU path through allocate_output.
  if (e->output != nullptr) {
    staged->device_output = e->output;
    staged->output_bytes = in_bytes;
    if (e->output != e->input) {
      s = PinnedPool::Get(std::max<size_t>(in_bytes, 1), &staged->output);
      if (!s.ok()) return s;
    }
  }
  e->input = staged->input.get();
  if (e->output != nullptr) {
    e->output = staged->output ? staged->output.get() : staged->input.get();
  }
  if (e->allocate_output) {
    auto allocate = std::move(e->allocate_output);
    const GpuPlacement where = e->gpu;
    e->allocate_output = [staged, allocate, elem, where](const Shape& shape,
                                                         void** data) -> Status {
      void* device = nullptr;
      Status st = allocate(shape, &device);  // the real output, in device memory
      if (st.ok()) st = RecordReadyEvent(where.device, where.stream, &staged->allocated);
      if (!st.ok()) return st;
      staged->device_output = device;
      staged->output_bytes = static_cast<size_t>(NumElements(shape)) * elem;
      st = PinnedPool::Get(std::max<size_t>(staged->output_bytes, 1), &staged->output);
      if (!st.ok()) return st;
      *data = staged->output.get();
      return Status();
    };
  }
  auto callback = std::move(e->callback);
  const GpuPlacement placement = e->gpu;
  e->callback = [staged, callback, ctx, placement, name, timeout_s](const Status& result) {
    Status st = result;
    if (st.ok() && staged->device_output != nullptr && staged->output_bytes > 0) {
      const void* host = staged->output ? staged->output.get() : staged->input.get();
      st = ctx->Activate();
      if (st.ok() && staged->allocated) {
        GpuPlacement after = placement;
        after.ready = staged->allocated;
        st = ctx->WaitReady(after);
      }
      if (st.ok()) st = ctx->Copy(staged->device_output, host, staged->output_bytes);
      if (st.ok()) {
        st = ctx->Finish(timeout_s, nullptr, "copying tensor '" + name + "' back to the device");
      }
    }
    if (callback) callback(st);
  };
  return Status();
}

}  // namespace tfhvd
