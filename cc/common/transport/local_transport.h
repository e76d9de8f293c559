// The transport of a process started without any launcher: size 1, no network.
#ifndef TFHVD_COMMON_TRANSPORT_LOCAL_TRANSPORT_H_
#define TFHVD_COMMON_TRANSPORT_LOCAL_TRANSPORT_H_

#include "cc/common/transport/transport.h"

namespace tfhvd {

class LocalTransport : public Transport {
 public:
  const char* name() const override { return "local"; }
  Status Init(Topology* topology) override;
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastBytes(std::string* data, int root) override;
  Status BitwiseOr(uint64_t* words, size_t n) override;
  Links* links() override { return &links_; }
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;

 private:
  SelfLinks links_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_LOCAL_TRANSPORT_H_
