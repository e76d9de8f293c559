// The transport of a process set over the global links (subset_transport.h),
// with threads as ranks: every collective exact among the members, members
// numbered by position, two sets sharing a rank run one after the other on it
// without mixing their messages, and ValidateProcessSetRanks / labels.
// GoogleTest: bazel test //:subset_transport_test
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/core/process_set.h"
#include "cc/common/transport/subset_transport.h"
#include "tests/unit/cc/thread_links.h"

using namespace tfhvd;
using tfhvd::testing::OnThreadRanks;

namespace {

// The global transport as a process set sees it: only its links.
class LinksOnly : public Transport {
 public:
  explicit LinksOnly(Links* links) : links_(links) {}
  const char* name() const override { return "test"; }
  Status Init(Topology*) override { return Status(); }
  Status GatherBytes(const std::string&, std::vector<std::string>*) override { return No(); }
  Status BroadcastBytes(std::string*, int) override { return No(); }
  Status BitwiseOr(uint64_t*, size_t) override { return No(); }
  Links* links() override { return links_; }
  Status Allgatherv(const void*, void*, const std::vector<int64_t>&) override { return No(); }
  Status Broadcast(void*, int64_t, int) override { return No(); }
  Status Alltoallv(const void*, const std::vector<int64_t>&, void*,
                   const std::vector<int64_t>&) override {
    return No();
  }
  Status Barrier() override { return No(); }

 private:
  static Status No() { return Status::Unknown("a set must use the links only"); }
  Links* links_;
};

// Runs every collective of one set on this rank; returns what differed ("" if none).
std::string RunSet(Links& global, const std::vector<int>& ranks) {
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == global.rank()) me = static_cast<int>(i);
  LinksOnly base(&global);
  std::unique_ptr<LinkSet> links;
  if (!base.OpenLinkSet(ranks, &links).ok()) return "OpenLinkSet failed";
  SubsetTransport set(&base, std::move(links));
  const int n = static_cast<int>(ranks.size());
  std::string bad;
  auto expect = [&bad, &ranks](bool ok, const std::string& what) {
    if (!ok) bad += "set of " + std::to_string(ranks.size()) + ": " + what + "; ";
  };
  expect(set.links()->rank() == me && set.links()->size() == n, "rank/size");
  // Allgatherv: member i sends i+1 bytes of value 10*global+i.
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (int i = 0; i < n; ++i) counts.push_back(i + 1), total += i + 1;
  std::vector<char> mine(static_cast<size_t>(me + 1), static_cast<char>(10 * global.rank() + me));
  std::vector<char> all(static_cast<size_t>(total));
  expect(set.Allgatherv(mine.data(), all.data(), counts).ok(), "allgatherv status");
  size_t at = 0;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k <= i; ++k) expect(all[at++] == static_cast<char>(10 * ranks[i] + i), "allgatherv data");
  // Alltoallv: member me sends (me + j) % 3 bytes of value 16*me+j to member j.
  std::vector<int64_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<char> out_data, in_data;
  for (int j = 0; j < n; ++j) {
    send[j] = (me + j) % 3;
    recv[j] = (j + me) % 3;
    out_data.insert(out_data.end(), static_cast<size_t>(send[j]), static_cast<char>(16 * me + j));
  }
  int64_t recv_total = 0;
  for (int64_t v : recv) recv_total += v;
  in_data.assign(static_cast<size_t>(recv_total) + 1, 0);
  expect(set.Alltoallv(out_data.data(), send, in_data.data(), recv).ok(), "alltoallv status");
  at = 0;
  for (int j = 0; j < n; ++j)
    for (int64_t k = 0; k < recv[j]; ++k) expect(in_data[at++] == static_cast<char>(16 * j + me), "alltoallv data");
  // Broadcast from the last member.
  std::vector<int> buffer(5, me == n - 1 ? 77 : -1);
  expect(set.Broadcast(buffer.data(), 5 * sizeof(int), n - 1).ok(), "broadcast status");
  expect(buffer == std::vector<int>(5, 77), "broadcast data");
  // Negotiation primitives.
  std::vector<std::string> gathered;
  expect(set.GatherBytes("m" + std::to_string(me), &gathered).ok(), "gather status");
  if (me == 0) expect(gathered.size() == static_cast<size_t>(n) && gathered.back() == "m" + std::to_string(n - 1), "gather data");
  std::string text = me == 0 ? "plan" : "";
  expect(set.BroadcastBytes(&text, 0).ok() && text == "plan", "broadcast bytes");
  uint64_t words[2] = {uint64_t{1} << me, 0};
  expect(set.BitwiseOr(words, 2).ok() && words[0] == (uint64_t{1} << n) - 1, "bitwise or");
  expect(set.Barrier().ok(), "barrier");
  return bad;
}

TEST(SubsetTransport, CollectivesOverlappingSetsInIdOrder) {
  // Sets {0, 2, 3} and {1, 3}; rank 3 runs the first, then the second (id order).
  std::mutex m;
  std::string failures;
  OnThreadRanks(4, [&](Links& links) {
    std::string bad;
    const int r = links.rank();
    if (r != 1) bad += RunSet(links, {0, 2, 3});
    if (r == 1 || r == 3) bad += RunSet(links, {1, 3});
    std::lock_guard<std::mutex> lock(m);
    if (!bad.empty()) failures += "rank " + std::to_string(r) + ": " + bad + "\n";
  });
  EXPECT_EQ(failures, "");
}

TEST(SubsetTransport, PeersOutsideTheSetAreRefused) {
  OnThreadRanks(2, [](Links& links) {
    if (links.rank() != 0) return;
    LinksOnly base(&links);
    std::unique_ptr<LinkSet> one;
    ASSERT_TRUE(base.OpenLinkSet({0}, &one).ok());
    SubsetTransport set(&base, std::move(one));
    char c = 0;
    Status s = set.links()->Send(1, &c, 1);
    EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  });
}

TEST(ProcessSetRanks, ValidationAndLabels) {
  std::vector<int> sorted;
  EXPECT_TRUE(ValidateProcessSetRanks({2, 0}, 3, &sorted).ok());
  EXPECT_EQ(sorted, (std::vector<int>{0, 2}));
  Status s = ValidateProcessSetRanks({0, 3}, 3, &sorted);
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_EQ(s.message(), "process set [0, 3] names rank 3, but the job has ranks 0..2");
  s = ValidateProcessSetRanks({1, 1}, 3, &sorted);
  EXPECT_EQ(s.message(), "process set [1, 1] names rank 1 twice");
  EXPECT_FALSE(ValidateProcessSetRanks({}, 3, &sorted).ok());
  EXPECT_EQ(ProcessSetLabel(2, {0, 2}), "process set 2 (ranks 0, 2)");
  EXPECT_EQ(ProcessSetLabel(0, {0, 1}), "the global process set");
}

}  // namespace
