// Allreduce for bandwidth-bound (large) messages: a ring reduce-scatter, then
// a ring allgather. Each rank sends and receives 2(n-1)/n of the message.
// Chunk c is reduced along one path around the ring, so every rank ends with
// the same bits.
//
// Pipelined: every step's chunk moves in pieces (at most kPieceBytes), with up
// to Links::kMaxStarted pieces in flight (StartExchange / FinishExchange), so a
// link keeps carrying the next pieces while this rank reduces the one that
// came, and a rank that is late for a moment does not stop its neighbours'
// links. A piece of step s+1 goes out as soon as the same piece of step s has
// been reduced (or, in the allgather, received), not after the whole chunk.
// Passes over memory per byte of the message: the reduce-scatter receives
// into a scratch piece and reduces it into the output (read input + scratch,
// write output); the allgather receives straight into the output.
//
//   RingAllreduce ring;
//   Status s = ring.Run(links, in, out, count, DataType::FLOAT32, ReduceOp::SUM);
#ifndef TFHVD_COMMON_ALGORITHMS_RING_ALLREDUCE_H_
#define TFHVD_COMMON_ALGORITHMS_RING_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "cc/common/transport/links.h"

namespace tfhvd {

struct RingPieces;  // where a step's pieces lie (ring_allreduce.cc)

class RingAllreduce {
 public:
  // Largest piece of a chunk that one exchange moves.
  static constexpr size_t kPieceBytes = 1 << 20;
  // Chunks of at least 3 such pieces' worth are cut into 3 or more pieces, so
  // that one can be reduced while two are in flight.
  static constexpr size_t kMinPieceBytes = 64 << 10;

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

  // A reduce-scatter whose slices are chosen by the caller (a reducescatter's
  // rows): afterwards elements [first[q], first[q] + counts[q]) of output
  // hold the reduction over all ranks on rank q; the rest of output is
  // scratch (every element of it may be written). Each rank sends and
  // receives (n-1)/n of the message: half an allreduce.
  Status ReduceScatter(Links& links, const void* input, void* output,
                       const std::vector<int64_t>& first, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op);
  // The allgather over such slices: rank q's slice, already in place in its
  // output, reaches every rank's output at the same place.
  Status Allgather(Links& links, void* output, const std::vector<int64_t>& first,
                   const std::vector<int64_t>& counts, DataType dtype);

  // Pieces per chunk (the same for every chunk of a message): piece k of
  // chunk c is elements [begin + len*k/P, begin + len*(k+1)/P) of it.
  static size_t PiecesPerChunk(int64_t count, int size, size_t elem);
  // The same for chunks of at most `largest` elements.
  static size_t PiecesFor(size_t largest, size_t elem);

 private:
  Status ReduceScatterPieces(Links& links, const void* input, void* output,
                             const RingPieces& at, DataType dtype, ReduceOp op);
  Status AllgatherPieces(Links& links, void* output, const RingPieces& at, size_t elem);

  std::vector<char> scratch_;  // Links::kMaxStarted + 1 pieces
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_RING_ALLREDUCE_H_
