// A Transport over thread links (thread_links.h), for tests of the core's
// parts that run on a transport: negotiation bytes and data collectives are
// built from the links (link_collectives.h). Every rank counts as its own
// host (no shared memory between the threads), unless one_host: then the
// ranks are one host's, and the core maps shared memory between them.
//
//   OnThreadRanks(2, [](Links& links) { ThreadTransport t(&links); ... });
#ifndef TFHVD_TESTS_UNIT_CC_THREAD_TRANSPORT_H_
#define TFHVD_TESTS_UNIT_CC_THREAD_TRANSPORT_H_

#include <cstring>
#include <string>
#include <vector>

#include "cc/common/transport/link_collectives.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {
namespace testing {

class ThreadTransport : public Transport {
 public:
  explicit ThreadTransport(Links* links, bool one_host = false)
      : links_(links), one_host_(one_host) {}
  const char* name() const override { return "threads"; }
  Status Init(Topology* t) override {
    t->rank = links_->rank();
    t->size = links_->size();
    t->local_rank = one_host_ ? t->rank : 0;
    t->local_size = one_host_ ? t->size : 1;
    t->cross_rank = one_host_ ? 0 : t->rank;
    t->cross_size = one_host_ ? 1 : t->size;
    return Status();
  }
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all) override {
    return GatherStrings(*links_, mine, all);
  }
  Status BroadcastBytes(std::string* data, int root) override {
    return BroadcastString(*links_, data, root);
  }
  Status BitwiseOr(uint64_t* words, size_t n) override {
    return BitwiseOrWords(*links_, words, n, &scratch_);
  }
  Links* links() override { return links_; }
  Status Allgatherv(const void* in, void* out, const std::vector<int64_t>& bytes) override {
    std::vector<std::string> all;
    const size_t mine = static_cast<size_t>(bytes[static_cast<size_t>(links_->rank())]);
    Status s = AllgatherStrings(*links_, std::string(static_cast<const char*>(in), mine), &all);
    char* at = static_cast<char*>(out);
    for (const auto& block : all) {
      if (!block.empty()) std::memcpy(at, block.data(), block.size());
      at += block.size();
    }
    return s;
  }
  Status Broadcast(void* buffer, int64_t bytes, int root) override {
    std::string data(static_cast<const char*>(buffer), static_cast<size_t>(bytes));
    Status s = BroadcastString(*links_, &data, root);
    if (s.ok() && bytes > 0) std::memcpy(buffer, data.data(), static_cast<size_t>(bytes));
    return s;
  }
  Status Alltoallv(const void*, const std::vector<int64_t>&, void*,
                   const std::vector<int64_t>&) override {
    return Status::Unknown("not used by these tests");
  }
  Status Barrier() override { return LinksBarrier(*links_); }

 private:
  Links* links_;
  bool one_host_;
  std::vector<char> scratch_;
};

}  // namespace testing
}  // namespace tfhvd

#endif  // TFHVD_TESTS_UNIT_CC_THREAD_TRANSPORT_H_
