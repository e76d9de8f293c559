// Transport over Gloo's TCP device. Ranks find each other through the
// launcher's HTTP rendezvous server (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT).
#ifndef TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_
#define TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_

#include <memory>

#include "cc/common/transport.h"

namespace gloo { class Context; }

namespace tfhvd {

class GlooTransport : public Transport {
 public:
  const char* name() const override { return "gloo"; }
  Status Init(Topology* topology) override;
  void Finalize() override;
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastBytes(std::string* data, int root) override;
  Status BitwiseOr(uint64_t* words, size_t n) override;
  Status Allreduce(void* buffer, int64_t count, DataType dtype, ReduceOp op) override;
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;

 private:
  std::shared_ptr<gloo::Context> context_;
  int rank_ = 0, size_ = 1;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_GLOO_TRANSPORT_H_
