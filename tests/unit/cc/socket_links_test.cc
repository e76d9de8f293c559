// The pipelined exchange (StartExchange / FinishExchange) of the real socket
// backends: the own TCP mesh (cc/common/gloo/tcp_mesh.h), with and without its
// spin, and Gloo's TCP pairs (cc/common/gloo/gloo_pair_links.h), sleeping in
// read and busy-polling. Ranks are threads of this process,
// connected over 127.0.0.1 by the backends' own set-up through an in-memory
// Gloo store, so the real sockets, buffers and framing carry the bytes.
// Checks, at 2 and 3 ranks: pipelined rings deliver exactly the bytes plain
// Exchange calls do, the two styles interoperate, the Precondition errors,
// a peer that closes mid-exchange gives an error naming it (not a hang), and
// the ring allreduce gives exact sums over these links.
//   bazel test //:socket_links_test
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/gloo/gloo_pair_links.h"
#include "cc/common/gloo/tcp_mesh.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "tests/unit/cc/exchange_script.h"

using namespace tfhvd;
using namespace tfhvd::testing;

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The links' variants: the mesh, and the mesh retrying a moment before it
// polls (HOROVOD_SPIN_US); Gloo's pairs sleeping in read, and busy-polling.
enum class Backend { kMesh, kMeshSpin, kPairs, kPairsBusyPoll };

// One rank's connected links of either backend.
class RankLinks {
 public:
  Status Connect(Backend backend, int rank, int size, gloo::rendezvous::Store& store,
                 milliseconds op_timeout) {
    if (backend == Backend::kMesh || backend == Backend::kMeshSpin) {
      links_ = &mesh_;
      if (backend == Backend::kMeshSpin) mesh_.set_spin(std::chrono::microseconds(200));
      return mesh_.Connect(rank, size, "127.0.0.1", store, "test secret", seconds(30),
                           op_timeout);
    }
    links_ = &pairs_;
    gloo::transport::tcp::attr attr("127.0.0.1");
    return pairs_.Connect(rank, size, store, gloo::transport::tcp::CreateDevice(attr),
                          op_timeout, backend == Backend::kPairsBusyPoll);
  }
  Links& links() { return *links_; }
  // This rank leaves: its sockets close (as when its process exits).
  void Close() {
    mesh_.Close();
    pairs_.Close();
  }

 private:
  TcpMesh mesh_;
  GlooPairLinks pairs_;
  Links* links_ = nullptr;
};

// Runs body on n threads, one rank each, connected by backend. Every
// transfer is bounded by op_timeout; the whole run by a watchdog that ends
// the test binary, so a hang fails the test instead of stalling it.
void OnSocketRanks(Backend backend, int n, const std::function<void(RankLinks&)>& body,
                   milliseconds op_timeout = seconds(20)) {
  gloo::rendezvous::HashStore store;
  std::vector<std::future<void>> done;
  for (int r = 0; r < n; ++r) {
    done.push_back(std::async(std::launch::async, [&, r] {
      RankLinks rank;
      Status s = rank.Connect(backend, r, n, store, op_timeout);
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.message();
      body(rank);
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + seconds(90);
  for (auto& d : done) {
    if (d.wait_until(deadline) != std::future_status::ready) {
      std::fprintf(stderr, "socket_links_test: ranks still running after 90 s (a hang)\n");
      std::abort();
    }
  }
}

const char* Name(Backend b) {
  const char* names[] = {"mesh", "mesh_spin", "pairs", "pairs_busy_poll"};
  return names[static_cast<int>(b)];
}

class SocketLinks : public ::testing::TestWithParam<std::tuple<Backend, int>> {
 protected:
  Backend backend() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

// (a) Pipelined rounds deliver what plain rounds do, byte for byte, and
// (b) a rank that pipelines and one that calls Exchange agree on the bytes
// (RingRounds: every style against every other, on the same connections).
TEST_P(SocketLinks, PipelinedAndPlainExchangesMoveTheSameBytes) {
  OnSocketRanks(backend(), ranks(), [&](RankLinks& rank) {
    Links& links = rank.links();
    Status s = RingRounds(links);
    EXPECT_TRUE(s.ok()) << Name(backend()) << " rank " << links.rank() << ": " << s.message();
  });
}

// (c) The third StartExchange and a FinishExchange with nothing started are
// refused with Links' messages; the started exchanges still complete.
TEST_P(SocketLinks, PreconditionErrors) {
  OnSocketRanks(backend(), ranks(), [&](RankLinks& rank) {
    PreconditionScript(rank.links());
    // The links still carry a whole round afterwards.
    Status s = RingScript(rank.links(), Style::kPipelined);
    EXPECT_TRUE(s.ok()) << s.message();
  });
}

// The ring allreduce (it pipelines its pieces) over the real links, exact sums.
TEST_P(SocketLinks, RingAllreduceExactSums) {
  OnSocketRanks(backend(), ranks(), [&](RankLinks& rank) {
    CheckRingSumsEveryDtype(rank.links());
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, SocketLinks,
                         ::testing::Combine(::testing::Values(Backend::kMesh, Backend::kMeshSpin,
                                                              Backend::kPairs,
                                                              Backend::kPairsBusyPoll),
                                            ::testing::Values(2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
                           return std::string(Name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_ranks";
                         });

// (d) Rank 1 leaves while rank 0 has two exchanges started: rank 0 gets an
// error naming rank 1 well before its op timeout (the closed socket is seen,
// not waited out), and the error drops every started exchange.
class PeerLeaves : public ::testing::TestWithParam<Backend> {};

TEST_P(PeerLeaves, ErrorNamesThePeerAndDropsTheStartedExchanges) {
  const auto op_timeout = seconds(20);
  std::promise<void> a_done, closed;
  std::future<void> a_done_seen = a_done.get_future(), closed_seen = closed.get_future();
  OnSocketRanks(GetParam(), 2, [&](RankLinks& rank) {
    Links& links = rank.links();
    const size_t pieces = 3 << 20;  // B: more than the socket buffers hold
    std::string a_out(1000, 'a'), a_in(1000, '\0'), b_out(pieces, 'b'), b_in(pieces, '\0');
    if (links.rank() == 1) {
      // Answers A, then leaves without reading B.
      Status s = links.Exchange(0, a_out.data(), a_out.size(), 0, &a_in[0], a_in.size());
      EXPECT_TRUE(s.ok()) << s.message();
      ASSERT_EQ(a_done_seen.wait_for(seconds(40)), std::future_status::ready);
      rank.Close();
      closed.set_value();
      return;
    }
    ASSERT_TRUE(links.StartExchange(1, a_out.data(), a_out.size(), 1, &a_in[0], a_in.size()).ok());
    ASSERT_TRUE(links.StartExchange(1, b_out.data(), b_out.size(), 1, &b_in[0], b_in.size()).ok());
    Status s = links.FinishExchange();
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(a_in, std::string(1000, 'a'));
    a_done.set_value();
    ASSERT_EQ(closed_seen.wait_for(seconds(40)), std::future_status::ready);
    const auto t0 = std::chrono::steady_clock::now();
    // C is started behind B; the loss may show already here.
    char c_out = 'c', c_in = 0;
    s = links.StartExchange(1, &c_out, 1, 1, &c_in, 1);
    if (s.ok()) s = links.FinishExchange();  // B
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(s.code(), Status::UNAVAILABLE) << s.message();
    EXPECT_EQ(s.peer(), 1) << s.message();
    EXPECT_NE(s.message().find("rank 1 "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("a rank may have exited or crashed"), std::string::npos)
        << s.message();
    EXPECT_LT(took, op_timeout / 2) << "the loss was waited out, not seen: " << s.message();
    // Every started exchange (C, or B and C) was dropped with the error.
    s = links.FinishExchange();
    EXPECT_EQ(s.code(), Status::PRECONDITION);
    EXPECT_EQ(s.message(), "FinishExchange without a started exchange");
  }, op_timeout);
}

// A rank that stops answering (alive, connections open) fails its peer's
// exchange after the op timeout, with an error naming it.
TEST_P(PeerLeaves, AStalledPeerTimesOutNamingIt) {
  const auto op_timeout = seconds(1);
  std::promise<void> gave_up;
  std::future<void> gave_up_seen = gave_up.get_future();
  OnSocketRanks(GetParam(), 2, [&](RankLinks& rank) {
    Links& links = rank.links();
    if (links.rank() == 1) {  // stalls until rank 0 has given up on it
      EXPECT_EQ(gave_up_seen.wait_for(seconds(40)), std::future_status::ready);
      return;
    }
    const size_t bytes = 3 << 20;
    std::string out(bytes, 'o'), in(bytes, '\0'), out2(bytes, 'p'), in2(bytes, '\0');
    const auto t0 = std::chrono::steady_clock::now();
    Status s = links.StartExchange(1, out.data(), bytes, 1, &in[0], bytes);
    if (s.ok()) s = links.StartExchange(1, out2.data(), bytes, 1, &in2[0], bytes);
    if (s.ok()) s = links.FinishExchange();
    const auto took = std::chrono::steady_clock::now() - t0;
    gave_up.set_value();
    EXPECT_EQ(s.code(), Status::UNAVAILABLE) << s.message();
    EXPECT_EQ(s.peer(), 1) << s.message();
    EXPECT_NE(s.message().find("rank 1 "), std::string::npos) << s.message();
    EXPECT_GE(took, op_timeout) << s.message();
    EXPECT_LT(took, 10 * op_timeout) << s.message();
    s = links.FinishExchange();  // the second was dropped with the error
    EXPECT_EQ(s.code(), Status::PRECONDITION);
  }, op_timeout);
}

// A peer that reads slowly but steadily is not stalled: an exchange that
// takes twice the op timeout in all, with bytes moving every 25th of it,
// completes (the timeout bounds a wait without progress, as documented for
// HOROVOD_GLOO_OP_TIMEOUT_SECONDS, not a whole transfer).
TEST_P(PeerLeaves, ASlowButSteadyPeerIsNotTimedOut) {
  const milliseconds op_timeout(1000);
  // 64 MiB: the socket buffers (up to 8 MiB a side) take a quarter of it, so
  // the rest moves only as the reader goes, for about twice the op timeout.
  const size_t piece = 1 << 20, pieces = 64;
  OnSocketRanks(GetParam(), 2, [&](RankLinks& rank) {
    Links& links = rank.links();
    std::string data(piece * pieces, '\0');
    if (links.rank() == 1) {
      for (size_t k = 0; k < pieces; ++k) {
        std::this_thread::sleep_for(op_timeout / 25);
        Status s = links.Recv(0, &data[k * piece], piece);
        ASSERT_TRUE(s.ok()) << "piece " << k << ": " << s.message();
      }
      EXPECT_EQ(FirstDifference(data, std::string(piece * pieces, 'd')), "equal");
      return;
    }
    data.assign(piece * pieces, 'd');
    Status s = links.StartExchange(1, data.data(), data.size(), 1, nullptr, 0);
    if (s.ok()) s = links.FinishExchange();
    EXPECT_TRUE(s.ok()) << s.message();
  }, op_timeout);
}

INSTANTIATE_TEST_SUITE_P(Backends, PeerLeaves,
                         ::testing::Values(Backend::kMesh, Backend::kPairs),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(Name(info.param));
                         });

}  // namespace
