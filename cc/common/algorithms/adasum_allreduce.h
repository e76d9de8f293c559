// Adasum (op=hvd.Adasum): combines the ranks' gradients pairwise with
//   Adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a coefficient is 1 where its vector is all zeros), by recursive vector
// halving and distance doubling, as Horovod does on CPU:
//   level d = 1, 2, 4, ... < n: rank r pairs with r^d; the lower one keeps the
//   first half of its current range and sends the second, the upper one the
//   reverse; the 2d ranks of an aligned block sum their partial (a.b, |a|^2,
//   |b|^2) per tensor (recursive doubling, so each gets the same bits) and
//   combine their half with the pair's coefficients (in double precision);
//   then the halves travel back in reverse order. Every element is combined
//   on one rank per level: all ranks end with the same bits.
// A fused response is combined tensor by tensor (its own coefficients each).
// Needs a power-of-two number of ranks; float16, float32 and float64.
//
//   AdasumAllreduce adasum;
//   Status s = adasum.Run(links, in, out, count, DataType::FLOAT32, {count});
#ifndef TFHVD_COMMON_ALGORITHMS_ADASUM_ALLREDUCE_H_
#define TFHVD_COMMON_ALGORITHMS_ADASUM_ALLREDUCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/common/transport/links.h"

namespace tfhvd {

class AdasumAllreduce {
 public:
  // Why Adasum cannot run on `ranks` ranks with dtype, or "" if it can.
  static std::string Unsupported(int ranks, DataType dtype);

  // tensor_counts: element counts of the tensors packed in the buffer (they
  // sum to count); empty means one tensor. input may equal output.
  Status Run(Links& links, const void* input, void* output, int64_t count, DataType dtype,
             const std::vector<int64_t>& tensor_counts);

 private:
  std::vector<char> recv_;
  std::vector<double> sums_, peer_sums_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_ADASUM_ALLREDUCE_H_
