// CPU registrations of the collective kernels (cc/tensorflow/collective_kernels.h).
#include "cc/tensorflow/collective_kernels.h"

namespace tfhvd {
namespace tf {

#define TFHVD_CPU_KERNEL(NAME, CLASS) \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tensorflow::DEVICE_CPU), CLASS)

TFHVD_CPU_KERNEL("HorovodAllreduce", AllreduceKernel);
TFHVD_CPU_KERNEL("HorovodGroupedAllreduce", GroupedAllreduceKernel);
TFHVD_CPU_KERNEL("HorovodAllgather", NegotiatedShapeKernel<OpType::ALLGATHER>);
TFHVD_CPU_KERNEL("HorovodBroadcast", BroadcastKernel);
TFHVD_CPU_KERNEL("HorovodAlltoall", AlltoallKernel);
TFHVD_CPU_KERNEL("HorovodReducescatter", NegotiatedShapeKernel<OpType::REDUCESCATTER>);
TFHVD_CPU_KERNEL("HorovodJoin", JoinKernel);
TFHVD_CPU_KERNEL("HorovodBarrier", BarrierKernel);

}  // namespace tf
}  // namespace tfhvd
