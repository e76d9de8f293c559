// What the core needs from a communication library, in four roles: lifecycle
// (name, Init, Finalize), a handful of small negotiation primitives, the links
// between ranks the allreduce algorithms run over (links.h, algorithms/), and
// the data collectives the core does not build itself. Telling the launcher
// why a rank stopped is not a transport's job (fault_channel.h). A transport never decides which allreduce algorithm runs
// (algorithms/selection.h does). Only the background thread calls a
// Transport. Implementations: local (one process), gloo/, mpi/.
#ifndef TFHVD_COMMON_TRANSPORT_TRANSPORT_H_
#define TFHVD_COMMON_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/transport/link_set.h"
#include "cc/common/transport/links.h"

namespace tfhvd {

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

  // Negotiation. Every rank calls each of these in the same order. Default:
  // over links() (link_collectives.h); a backend with its own (MPI) overrides.
  // Gathers every rank's bytes on rank 0 (*all is filled on rank 0 only).
  virtual Status GatherBytes(const std::string& mine, std::vector<std::string>* all);
  virtual Status BroadcastBytes(std::string* data, int root);
  // Bitwise OR of n 64-bit words across ranks, in place.
  virtual Status BitwiseOr(uint64_t* words, size_t n);

  // Point-to-point links to every other rank; valid between Init and Finalize.
  virtual Links* links() = 0;

  // Links among `members` (global ranks; member i is rank i in the set; this
  // rank must be one of them), e.g. the ranks of one host or of a process
  // set. Collective over the members only: each calls it with the same list.
  // Default: a view of links(). Valid until Finalize; destroy it before.
  virtual Status OpenLinkSet(const std::vector<int>& members, std::unique_ptr<LinkSet>* out) {
    return MakeSubsetLinks(links(), members, out);
  }

  // A backend with a tuned allreduce of its own (MPI) says so here, and the
  // selection table may pick it. Reduces count elements of input across ranks
  // into output; input may equal output.
  virtual bool has_backend_allreduce() const { return false; }
  virtual Status BackendAllreduce(const void*, void*, int64_t, DataType, ReduceOp) {
    return Status::Precondition(std::string(name()) + " has no allreduce of its own");
  }

  // Data collectives, into caller-provided buffers.
  // Every rank contributes bytes_per_rank[rank] bytes; out receives all of
  // them concatenated in rank order.
  virtual Status Allgatherv(const void* in, void* out,
                            const std::vector<int64_t>& bytes_per_rank) = 0;
  virtual Status Broadcast(void* buffer, int64_t bytes, int root) = 0;
  virtual Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes,
                           void* out, const std::vector<int64_t>& recv_bytes) = 0;
  virtual Status Barrier() = 0;

 private:
  std::vector<char> or_scratch_;  // the default BitwiseOr's gathered words, reused
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_TRANSPORT_H_
