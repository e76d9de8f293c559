// The last step of a reduction in one pass over memory: combine two buffers,
// scale the result and store it in two places. The shared-memory allreduce
// keeps the reduced chunk in its slot (its peers copy it from there) and hands
// it to its own output; done as ReduceBuffers, ScaleBuffer and a memcpy that
// is three passes over the piece, here it is one.
//
//   // acc[i] = out[i] = (a[i] + b[i]) * 0.5, bit for bit as the three calls
//   ReduceScaleStore(DataType::FLOAT32, ReduceOp::SUM, acc, out, a, b, n, 0.5);
#ifndef TFHVD_COMMON_KERNELS_REDUCE_LAST_STEP_H_
#define TFHVD_COMMON_KERNELS_REDUCE_LAST_STEP_H_

#include <cstddef>

#include "cc/common/common.h"

namespace tfhvd {

// dst[i] = factor * (a[i] op b[i]), rounded exactly as ReduceBuffers then
// ScaleBuffer round it; copy (when not null) receives the same values. dst and
// copy may each be a or b (element i is read before it is written), never a
// shifted overlap. float32 and float64 run
// vectorised (AVX2 where the CPU has it); every other type takes the
// three-call path.
void ReduceScaleStore(DataType dtype, ReduceOp op, void* dst, void* copy, const void* a,
                      const void* b, size_t n, double factor);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_KERNELS_REDUCE_LAST_STEP_H_
