// Element-wise kernels the transports and the fusion code share: combine two
// buffers with a reduce op, scale a buffer, fill with the op's identity.
#ifndef TFHVD_COMMON_KERNELS_REDUCE_KERNELS_H_
#define TFHVD_COMMON_KERNELS_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "cc/common/common.h"

namespace tfhvd {

// dst[i] = a[i] (op) b[i] for n elements; dst may alias a or b. AVERAGE
// combines as SUM (the division happens once, after the collective).
void ReduceBuffers(DataType dtype, ReduceOp op, void* dst, const void* a,
                   const void* b, size_t n);

// buf[i] = factor * buf[i] as Horovod computes it: in double for every type
// but the 16-bit floats (in float32, the factor rounded to float32), then
// converted back; integers truncate toward zero.
void ScaleBuffer(DataType dtype, void* buf, size_t n, double factor);

// buf[i] /= divisor; integers truncate toward zero (C division).
void DivideBuffer(DataType dtype, void* buf, size_t n, int64_t divisor);

// Fills buf with the identity of op (0 for sum, 1 for product, max/min of the
// type for min/max), used by ranks that joined early.
void FillIdentity(DataType dtype, ReduceOp op, void* buf, size_t n);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_KERNELS_REDUCE_KERNELS_H_
