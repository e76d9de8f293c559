// What the core needs from a communication library: a handful of small
// negotiation primitives and the data collectives. Only the background thread
// calls a Transport. Implementations: local (one process), gloo/, mpi/.
#ifndef TFHVD_COMMON_TRANSPORT_H_
#define TFHVD_COMMON_TRANSPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/common/common.h"

namespace tfhvd {

class ShmAllreduce;

struct Topology {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
  bool homogeneous = true;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Connects to the other ranks; fills the topology.
  virtual Status Init(Topology* topology) = 0;
  virtual void Finalize() {}

  // Negotiation. Every rank calls each of these in the same order.
  // Gathers every rank's bytes on rank 0 (*all is filled on rank 0 only).
  virtual Status GatherBytes(const std::string& mine, std::vector<std::string>* all) = 0;
  virtual Status BroadcastBytes(std::string* data, int root) = 0;
  // Bitwise OR of n 64-bit words across ranks, in place.
  virtual Status BitwiseOr(uint64_t* words, size_t n) = 0;

  // Data collectives, all in place or into caller-provided buffers.
  // Reduces count elements of input across ranks into output. input may equal
  // output (in place); when it does not, the transport reads the input directly
  // (no staging copy of a large tensor).
  virtual Status Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                           ReduceOp op) = 0;
  // Every rank contributes bytes_per_rank[rank] bytes; out receives all of
  // them concatenated in rank order.
  virtual Status Allgatherv(const void* in, void* out,
                            const std::vector<int64_t>& bytes_per_rank) = 0;
  virtual Status Broadcast(void* buffer, int64_t bytes, int root) = 0;
  virtual Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes,
                           void* out, const std::vector<int64_t>& recv_bytes) = 0;
  virtual Status Barrier() = 0;
  // The shared-memory allreduce when this transport would reduce `bytes`
  // through it, else null: a fused response then goes straight from the
  // tensors to the outputs, without the fusion buffer.
  virtual ShmAllreduce* SharedMemoryFor(int64_t bytes) { return nullptr; }
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_H_
