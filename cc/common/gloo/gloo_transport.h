// Transport over Gloo's TCP device. Ranks find each other through the
// launcher's HTTP rendezvous server (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT).
// Negotiation and allreduce go over a direct socket mesh (tcp_mesh.h): small
// allreduces as one gather, larger ones through shared memory when all ranks
// share a host (shm_allreduce.h), else as a ring; allgather, broadcast and
// alltoall run Gloo's algorithms.
#ifndef TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_
#define TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_

#include <memory>
#include <vector>

#include "cc/common/gloo/tcp_mesh.h"
#include "cc/common/parameters.h"
#include "cc/common/shm_allreduce.h"
#include "cc/common/transport.h"

namespace gloo { class Context; }

namespace tfhvd {

class GlooTransport : public Transport {
 public:
  explicit GlooTransport(const Parameters& params) : params_(params) {}
  const char* name() const override { return "gloo"; }
  Status Init(Topology* topology) override;
  void Finalize() override;
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastBytes(std::string* data, int root) override;
  Status BitwiseOr(uint64_t* words, size_t n) override;
  Status Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                   ReduceOp op) override;
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;
  ShmAllreduce* SharedMemoryFor(int64_t bytes) override {
    return shm_.active() && bytes > direct_max_bytes_ && bytes >= params_.shm_min_bytes
               ? &shm_
               : nullptr;
  }

 private:
  // Small allreduce: gather every rank's block, reduce in rank order (the
  // same bits on every rank).
  Status DirectAllreduce(const void* input, void* output, int64_t count, DataType dtype,
                         ReduceOp op);

  // Larger allreduce: ring reduce-scatter + allgather over the mesh, in
  // segments through a bounded scratch buffer.
  Status RingAllreduce(const void* input, void* output, int64_t count, DataType dtype,
                       ReduceOp op);

  // Every rank's string on every rank, over the mesh.
  Status AllgatherStrings(const std::string& mine, std::vector<std::string>* all);

  std::shared_ptr<gloo::Context> context_;
  TcpMesh mesh_;
  Parameters params_;
  ShmAllreduce shm_;  // larger allreduces when every rank is on this host
  std::vector<char> scratch_;  // DirectAllreduce's gathered blocks, reused
  int64_t direct_max_bytes_ = 0;
  int rank_ = 0, size_ = 1;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_
