// Allreduce for bandwidth-bound (large) messages: a ring reduce-scatter, then
// a ring allgather. Each rank sends and receives 2(n-1)/n of the message, in
// segments through a bounded scratch buffer (never a second copy of the
// message). Chunk c is reduced along one path around the ring, so every rank
// ends with the same bits.
//
//   RingAllreduce ring;
//   Status s = ring.Run(links, in, out, count, DataType::FLOAT32, ReduceOp::SUM);
#ifndef TFHVD_COMMON_ALGORITHMS_RING_ALLREDUCE_H_
#define TFHVD_COMMON_ALGORITHMS_RING_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "cc/common/transport/links.h"

namespace tfhvd {

class RingAllreduce {
 public:
  // Bytes received per step of the reduce-scatter (the scratch buffer's size).
  static constexpr size_t kSegmentBytes = 4 << 20;

  // input may equal output. Needs links.size() >= 2.
  Status Run(Links& links, const void* input, void* output, int64_t count, DataType dtype,
             ReduceOp op);

  // The two halves of Run. After ReduceScatter, chunk OwnedChunk(rank) of
  // output holds the reduction over all ranks (chunk c: elements
  // [count*c/n, count*(c+1)/n)); Allgather then copies every rank's owned
  // chunk to every rank (the other chunks of output are overwritten).
  Status ReduceScatter(Links& links, const void* input, void* output, int64_t count,
                       DataType dtype, ReduceOp op);
  Status Allgather(Links& links, void* output, int64_t count, DataType dtype);
  static int OwnedChunk(int rank, int size) { return (rank + 1) % size; }

 private:
  std::vector<char> scratch_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_RING_ALLREDUCE_H_
