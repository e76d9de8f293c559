// The liveness monitor (core/liveness_monitor.h) with threads as ranks, over
// real UDP sockets on loopback: a rank that falls silent is declared lost by
// every other rank within the bound, named with its host; a rank that leaves
// (or only idles) is not; the process-wide record (transport/peer_loss.h)
// keeps the first declaration until cleared.
// GoogleTest: bazel test //:liveness_monitor_test
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/core/liveness_monitor.h"
#include "cc/common/transport/peer_loss.h"
#include "tests/unit/cc/thread_links.h"
#include "tests/unit/cc/thread_transport.h"

using namespace tfhvd;
using namespace tfhvd::testing;

namespace {

struct Declared {
  int by = -1, rank = -1;
  double after_s = 0;
  std::string message;
};

// n ranks start monitors (bound 1 s, proofs every 0.1 s, one "host" each);
// `silent` stops without a word after `quiet_after_s`, the others stop (announcing
// it) after `run_s`. Returns what each rank declared.
std::vector<Declared> RunRanks(int n, int silent, double quiet_after_s, double run_s,
                               bool announce_silent = false) {
  std::mutex mutex;
  std::vector<Declared> declared(static_cast<size_t>(n));
  const auto start = std::chrono::steady_clock::now();
  OnThreadRanks(n, [&](Links& links) {
    ThreadTransport transport(&links);
    const int me = links.rank();
    LivenessMonitor::Config config;
    config.rank = me;
    config.size = n;
    for (int r = 0; r < n; ++r) config.hosts.push_back("node" + std::to_string(r));
    config.timeout_s = 1.0;
    config.period_s = 0.1;
    std::unique_ptr<LivenessMonitor> monitor;
    Status s = LivenessMonitor::Start(
        &transport, config,
        [&, me](int rank, const std::string& message) {
          std::lock_guard<std::mutex> lock(mutex);
          const double after = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start).count();
          declared[static_cast<size_t>(me)] = Declared{me, rank, after, message};
        },
        &monitor);
    ASSERT_TRUE(s.ok()) << s.message();
    const double mine = me == silent ? quiet_after_s : run_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(mine));
    monitor->Stop(/*announce=*/me != silent || announce_silent);
  });
  return declared;
}

TEST(LivenessMonitor, ASilentRankIsDeclaredLostByEveryOtherRankNamed) {
  // The others run long enough that a loaded machine's late wake-ups (the suite runs
  // tests side by side) still see the declaration; the lower bound is the point.
  const std::vector<Declared> d = RunRanks(3, /*silent=*/1, /*quiet_after_s=*/0.5,
                                           /*run_s=*/5.0);
  for (int r : {0, 2}) {
    EXPECT_EQ(d[static_cast<size_t>(r)].rank, 1) << d[static_cast<size_t>(r)].message;
    EXPECT_EQ(d[static_cast<size_t>(r)].message.rfind(
                  "rank 1 (on node1) stopped answering: its core sent no liveness proof for ",
                  0),
              0u)
        << d[static_cast<size_t>(r)].message;
    EXPECT_NE(d[static_cast<size_t>(r)].message.find("HOROVOD_PEER_TIMEOUT_SECONDS=1"),
              std::string::npos);
    // silent from 0.5 s: never before the bound; soon after it (two proof periods on
    // an idle machine, with room here for a loaded one's scheduling)
    EXPECT_GT(d[static_cast<size_t>(r)].after_s, 1.4);
    EXPECT_LT(d[static_cast<size_t>(r)].after_s, 4.0);
  }
  EXPECT_EQ(d[1].rank, -1);  // the silent one saw everybody answer until it stopped
}

TEST(LivenessMonitor, ARankThatLeavesOrIdlesIsNotDeclaredLost) {
  // rank 1 leaves (announcing it) after 0.5 s; everybody else idles 2.5 s, 2.5 bounds
  const std::vector<Declared> d = RunRanks(3, 1, 0.5, 2.5, /*announce_silent=*/true);
  for (const Declared& x : d) EXPECT_EQ(x.rank, -1) << x.message;
}

TEST(LivenessMonitor, AllPeersSilentSaysThisHostMayBeTheOneCutOff) {
  // ranks 1 and 2 stop without a word: rank 0 hears nobody
  std::mutex mutex;
  std::string message;
  OnThreadRanks(3, [&](Links& links) {
    ThreadTransport transport(&links);
    LivenessMonitor::Config config;
    config.rank = links.rank();
    config.size = 3;
    config.hosts = {"a", "b", "c"};
    config.timeout_s = 1.0;
    config.period_s = 0.1;
    std::unique_ptr<LivenessMonitor> monitor;
    const int me = links.rank();
    ASSERT_TRUE(LivenessMonitor::Start(&transport, config,
                                       [&, me](int, const std::string& m) {
                                         std::lock_guard<std::mutex> lock(mutex);
                                         if (me == 0) message = m;
                                       },
                                       &monitor)
                    .ok());
    if (me == 0) {
      // until the declaration comes (after the 1 s bound), or long past it
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(8);
      while (std::chrono::steady_clock::now() < give_up) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!message.empty()) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    monitor->Stop(/*announce=*/me == 0);
  });
  EXPECT_NE(message.find("stopped answering"), std::string::npos) << message;
  EXPECT_NE(message.find("this rank's host may be the one cut off"), std::string::npos)
      << message;
}

TEST(PeerLoss, TheFirstDeclarationWinsUntilCleared) {
  ClearPeerLoss();
  EXPECT_FALSE(PeerLost());
  EXPECT_TRUE(PeerLostError().ok());
  DeclarePeerLost(2, "rank 2 (on b) stopped answering");
  DeclarePeerLost(3, "rank 3 (on c) stopped answering");
  ASSERT_TRUE(PeerLost());
  Status s = PeerLostError();
  EXPECT_EQ(s.code(), Status::UNAVAILABLE);
  EXPECT_EQ(s.peer(), 2);
  EXPECT_EQ(s.message(), "rank 2 (on b) stopped answering");
  ClearPeerLoss();
  EXPECT_FALSE(PeerLost());
}

}  // namespace
