// The run-time half of the Horovod ops inside XLA: the typed-FFI handler of
// the custom call the XLA op kernels emit (xla_kernels.cc). It turns the call's
// buffers into TensorTableEntry values, hands them to the core's background
// thread through the same Enqueue/EnqueueGroup as the TensorFlow kernels, and
// blocks until their callbacks have run (XLA has no asynchronous custom calls
// on the host). The "Host" registration lives in xla_custom_call.cc, the
// "CUDA" one in cc/tensorflow/gpu/xla_gpu_custom_call.cc.
#ifndef TFHVD_TENSORFLOW_XLA_XLA_CUSTOM_CALL_H_
#define TFHVD_TENSORFLOW_XLA_XLA_CUSTOM_CALL_H_

#include <functional>
#include <string_view>
#include <vector>

#include "cc/common/negotiation/tensor_queue.h"
#include "cc/tensorflow/xla/xla_call_config.h"
#include "xla/ffi/api/ffi.h"

namespace tfhvd {
namespace tf {

// Marks the entries' buffers as device memory (the CUDA handler); null on the host.
using XlaPlacement = std::function<Status(std::vector<TensorTableEntry>*)>;

// Runs one Horovod collective on the call's buffers; returns once it is done.
xla::ffi::Error RunXlaCollective(xla::ffi::RemainingArgs args, xla::ffi::RemainingRets rets,
                                 const XlaCallConfig& config, const XlaPlacement& place);

// The config from the handler's named attributes.
XlaCallConfig XlaConfigFromAttrs(int64_t kind, std::string_view tensor_name, int64_t reduce_op,
                                 float prescale, float postscale, int64_t root_rank,
                                 int64_t process_set_id);

// The attributes every platform's handler binds, in XlaConfigFromAttrs' order.
#define TFHVD_XLA_CALL_ATTRS(BINDING)                \
  (BINDING)                                          \
      .Attr<int64_t>("kind")                         \
      .Attr<std::string_view>("tensor_name")         \
      .Attr<int64_t>("reduce_op")                    \
      .Attr<float>("prescale")                       \
      .Attr<float>("postscale")                      \
      .Attr<int64_t>("root_rank")                    \
      .Attr<int64_t>("process_set_id")

// libtensorflow_framework's FFI API table (exported there, declared in XLA's
// internal ffi_api.h, which pulls in half of XLA).
const XLA_FFI_Api* XlaFfiApi();

}  // namespace tf
}  // namespace tfhvd

#endif  // TFHVD_TENSORFLOW_XLA_XLA_CUSTOM_CALL_H_
