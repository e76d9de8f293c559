// Transport over Gloo's TCP device. Ranks find each other through the
// launcher's HTTP rendezvous server (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT).
// Negotiation and the allreduce algorithms (cc/common/algorithms/) go over
// the links: the own socket mesh (tcp_mesh.h, HOROVOD_GLOO_LINKS=mesh, the
// default) or Gloo's own TCP pairs in synchronous mode (gloo_pair_links.h,
// HOROVOD_GLOO_LINKS=pairs); allgather, broadcast and alltoall run Gloo's
// algorithms on a separate set of pairs.
#ifndef TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_
#define TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_

#include <memory>
#include <vector>

#include "cc/common/gloo/gloo_pair_links.h"
#include "cc/common/gloo/tcp_mesh.h"
#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace gloo { class Context; }

namespace tfhvd {

class GlooTransport : public Transport {
 public:
  explicit GlooTransport(const Parameters& params) : params_(params) {}
  const char* name() const override { return "gloo"; }
  Status Init(Topology* topology) override;
  void Finalize() override;
  Links* links() override { return links_; }
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;

 private:
  std::shared_ptr<gloo::Context> context_;  // Gloo's collectives
  TcpMesh mesh_;                            // links when params_.gloo_links == "mesh"
  GlooPairLinks pairs_;                     // links when it is "pairs" or "pairs_busy_poll"
  Links* links_ = nullptr;
  Parameters params_;
  int rank_ = 0, size_ = 1;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_
