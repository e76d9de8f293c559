// The Horovod custom call for XLA on CUDA (the CUDA variant only): the same
// handler as on the host (cc/tensorflow/xla/xla_custom_call.h), with the
// buffers marked as device memory of XLA's stream. As for the TensorFlow GPU
// kernels, a ready event recorded on XLA's stream orders the collective after
// the operands' producers, and the call returns only after the collective has
// finished, so XLA's later kernels on that stream see the results.
// Built and linked here; it has not run on a GPU (none on the build machines).
#include "cc/common/gpu_backend.h"
#include "cc/tensorflow/gpu/gpu_stream_placement.h"
#include "cc/tensorflow/xla/xla_custom_call.h"

namespace tfhvd {
namespace tf {

namespace ffi = xla::ffi;

namespace {

ffi::Error CudaCollective(void* stream, int32_t device, ffi::RemainingArgs args,
                          ffi::RemainingRets rets, int64_t kind, std::string_view tensor_name,
                          int64_t reduce_op, float prescale, float postscale, int64_t root_rank,
                          int64_t process_set_id) {
  XlaPlacement place = [stream, device](std::vector<TensorTableEntry>* entries) -> Status {
    return PlaceOnGpuStream(device, stream, entries);
  };
  return RunXlaCollective(args, rets,
                          XlaConfigFromAttrs(kind, tensor_name, reduce_op, prescale, postscale,
                                             root_rank, process_set_id),
                          place);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER(kCudaCollectiveHandler, CudaCollective,
                       TFHVD_XLA_CALL_ATTRS(ffi::Ffi::Bind()
                                                .Ctx<ffi::PlatformStream<void*>>()
                                                .Ctx<ffi::DeviceOrdinal>()
                                                .RemainingArgs()
                                                .RemainingRets()));

XLA_FFI_REGISTER_HANDLER(XlaFfiApi(), kXlaCallTarget, "CUDA", kCudaCollectiveHandler);

}  // namespace tf
}  // namespace tfhvd
