// Allreduce for latency-bound (small) messages: every rank sends its whole
// input to every other rank (one allgather over the links), then reduces all
// blocks in rank order itself, so every rank computes the same bits. One
// round of messages instead of the ring's 2(n-1).
//
//   GatherAllreduce gather;
//   Status s = gather.Run(links, in, out, count, DataType::FLOAT32, ReduceOp::SUM);
#ifndef TFHVD_COMMON_ALGORITHMS_GATHER_ALLREDUCE_H_
#define TFHVD_COMMON_ALGORITHMS_GATHER_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "cc/common/transport/links.h"

namespace tfhvd {

class GatherAllreduce {
 public:
  // input may equal output. Needs links.size() >= 2.
  Status Run(Links& links, const void* input, void* output, int64_t count, DataType dtype,
             ReduceOp op);

 private:
  std::vector<char> blocks_;  // every rank's input, reused across calls
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_GATHER_ALLREDUCE_H_
