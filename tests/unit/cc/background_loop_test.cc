// The background loop (core/background_loop.h) with threads as ranks over
// in-memory links: start, cycles that negotiate and perform an allreduce, a
// shutdown asked for by one rank that stops every rank with the error and
// fault report naming it; an op's thread running a round itself; and the
// idle backoff's waits.
// GoogleTest: bazel test //:background_loop_test
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/negotiation/controller.h"
#include "cc/common/core/background_loop.h"
#include "cc/common/host/thread_affinity.h"
#include "tests/unit/cc/thread_links.h"
#include "tests/unit/cc/thread_transport.h"

using namespace tfhvd;
using tfhvd::testing::OnThreadRanks;
using tfhvd::testing::ThreadTransport;
using Micros = std::chrono::microseconds;

namespace {

class RecordingChannel : public FaultChannel {
 public:
  explicit RecordingChannel(std::vector<std::string>* published) : published_(published) {}
  void Publish(const std::string& text) override { published_->push_back(text); }

 private:
  std::vector<std::string>* published_;
};

// Runs cycles until done() or the loop stops; false if it stopped or 2000 cycles passed.
bool CycleUntil(BackgroundLoop& loop, const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    if (!loop.RunCycle()) return false;
  }
  return false;
}

TEST(BackgroundLoop, RunsCollectivesAndStopsEveryRankWhenOneShutsDown) {
  OnThreadRanks(2, [](Links& links) {
    const int r = links.rank();
    ThreadTransport transport(&links);
    TensorQueue queue;
    ProcessSetTable sets;
    std::atomic<int> leaving{0};
    std::vector<std::string> published;
    LoopParts parts;
    parts.transport = &transport;
    parts.queue = &queue;
    parts.sets = &sets;
    parts.params.slot_hostname = r == 0 ? "node-a" : "node-b";
    parts.fault_channels = [&published](const Topology&) {
      std::vector<std::unique_ptr<FaultChannel>> channels;
      channels.emplace_back(new RecordingChannel(&published));
      return channels;
    };
    parts.leaving = &leaving;
    BackgroundLoop loop(std::move(parts));
    Status s = loop.Start();
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(loop.topology().rank, r);
    EXPECT_EQ(loop.topology().size, 2);
    ASSERT_NE(sets.Find(0), nullptr);

    std::vector<float> in = {1.0f * (r + 1), 10.0f * (r + 1)}, out(2, 0.0f);
    std::atomic<bool> done{false};
    Status result = Status::Unknown("not run");
    TensorTableEntry e;
    e.request.name = "grad";
    e.request.shape = {2};
    e.input = in.data();
    e.output = out.data();
    e.callback = [&](const Status& st) { result = st; done = true; };
    ASSERT_TRUE(queue.Add(std::move(e)).ok());
    ASSERT_TRUE(CycleUntil(loop, [&] { return done.load(); }));
    EXPECT_TRUE(result.ok()) << result.message();
    EXPECT_EQ(out, (std::vector<float>{3.0f, 30.0f}));

    // Rank 1 calls hvd.shutdown(): both loops end in the same round.
    if (r == 1) leaving = static_cast<int>(Controller::Leaving::SHUTDOWN_CALLED);
    EXPECT_FALSE(CycleUntil(loop, [] { return false; }));
    loop.Stop();
    if (r == 0) {
      EXPECT_EQ(loop.final_status().code(), Status::ABORTED);
      EXPECT_EQ(loop.final_status().message(),
                "rank 1 (on node-b) called hvd.shutdown(); this collective did not run");
      ASSERT_EQ(published.size(), 1u);
      EXPECT_EQ(published[0], "culprit=1\nkind=shutdown\n" + loop.final_status().message());
    } else {
      EXPECT_EQ(loop.final_status().message(),
                "Horovod has been shut down in this process (hvd.shutdown(), or the process is "
                "exiting); this collective did not run");
      EXPECT_TRUE(published.empty());
    }
    // The queue refuses work after the loop stopped, with the loop's error.
    TensorTableEntry late;
    late.request.name = "late";
    EXPECT_EQ(queue.Add(std::move(late)).message(), loop.final_status().message());
  });
}

// One rank's loop over a ThreadTransport in one-host mode (threads as ranks
// sharing memory), not started.
struct OneHostRank {
  explicit OneHostRank(Links& links)
      : transport(&links, /*one_host=*/true), loop(Parts(&transport, &queue, &sets, &leaving)) {}
  static LoopParts Parts(Transport* transport, TensorQueue* queue, ProcessSetTable* sets,
                         std::atomic<int>* leaving) {
    LoopParts parts;
    parts.transport = transport;
    parts.queue = queue;
    parts.sets = sets;
    parts.leaving = leaving;
    return parts;
  }
  // Starts the loop, whose ops must run rounds (two CPUs or more).
  ::testing::AssertionResult Started() {
    Status s = loop.Start();
    if (!s.ok()) return ::testing::AssertionFailure() << s.message();
    if (!loop.rounds_in_op_threads()) return ::testing::AssertionFailure() << "no op rounds";
    return ::testing::AssertionSuccess();
  }
  ThreadTransport transport;
  TensorQueue queue;
  ProcessSetTable sets;
  std::atomic<int> leaving{0};
  BackgroundLoop loop;
};

// An int32 allreduce of `in` into `out` (same length), named `name`.
TensorTableEntry Int32Entry(const std::string& name, std::vector<int32_t>& in,
                            std::vector<int32_t>& out,
                            std::function<void(const Status&)> callback) {
  TensorTableEntry e;
  e.request.name = name;
  e.request.dtype = DataType::INT32;
  e.request.shape = {static_cast<int64_t>(in.size())};
  e.input = in.data();
  e.output = out.data();
  e.callback = std::move(callback);
  return e;
}

// One op on each of two ranks (threads as ranks on one host, shared memory).
// Rank 0's op thread starts the round before rank 1 runs any: it waits no
// longer than a spin and returns with the round paused. Then either rank 0's
// op thread continues the round (op_thread_finishes) or rank 0's background
// thread does; both give the exact sum on both ranks.
void OpThreadRound(bool op_thread_finishes) {
  // Two ranks on one host: ops run rounds only where it has a CPU for each.
  if (UsableCpus() < 2) GTEST_SKIP() << "one CPU: ops do not run rounds there";
  std::atomic<bool> first_tried{false};
  OnThreadRanks(2, [&](Links& links) {
    const int r = links.rank();
    OneHostRank one(links);
    ASSERT_TRUE(one.Started());
    ASSERT_NE(one.sets.Find(0)->allreduce->shared_memory(), nullptr);

    std::vector<int32_t> in = {r + 1, 10 * (r + 1), 100 * (r + 1)}, out(3, 0);
    std::atomic<bool> done{false};
    std::thread::id ran_on;
    Status result = Status::Unknown("not run");
    TensorTableEntry e = Int32Entry("grad", in, out, [&](const Status& st) {
      ran_on = std::this_thread::get_id();
      result = st;
      done = true;
    });
    if (r == 0) {
      // Rank 1 runs no round yet: the op's thread may not wait for it long.
      ASSERT_TRUE(one.queue.Add(std::move(e), /*wake=*/false).ok());
      const auto start = std::chrono::steady_clock::now();
      one.loop.RunRoundsHereOrWake();
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
      EXPECT_FALSE(done.load());
      first_tried = true;
      if (op_thread_finishes) {
        // Rank 1's background thread reaches the paused round.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!done && std::chrono::steady_clock::now() < deadline) {
          one.loop.RunRoundsHereOrWake();
          if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        ASSERT_TRUE(done.load());
        EXPECT_EQ(ran_on, std::this_thread::get_id());  // no other thread ran rank 0's round
      } else {
        bool finished = false;
        std::thread background(
            [&] { finished = CycleUntil(one.loop, [&] { return done.load(); }); });
        background.join();
        ASSERT_TRUE(finished);
        EXPECT_NE(ran_on, std::this_thread::get_id());
      }
      one.leaving = static_cast<int>(Controller::Leaving::SHUTDOWN_CALLED);
      EXPECT_FALSE(CycleUntil(one.loop, [] { return false; }));
    } else {
      while (!first_tried) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_TRUE(one.queue.Add(std::move(e)).ok());
      std::thread background([&] { while (one.loop.RunCycle()) {} });
      background.join();  // until rank 0's shutdown
      ASSERT_TRUE(done.load());
      EXPECT_NE(ran_on, std::this_thread::get_id());
    }
    EXPECT_TRUE(result.ok()) << result.message();
    EXPECT_EQ(out, (std::vector<int32_t>{3, 30, 300}));
    one.loop.Stop();
  });
}

TEST(BackgroundLoop, AnOpThreadPausesTheRoundForALatePeerAndContinuesIt) {
  OpThreadRound(/*op_thread_finishes=*/true);
}

TEST(BackgroundLoop, AnOpThreadPausesTheRoundForALatePeerAndTheLoopContinuesIt) {
  OpThreadRound(/*op_thread_finishes=*/false);
}

// A job of one rank: the op's thread runs the round and the collective itself
// (nobody to wait for), no hand-off to the background thread and back.
TEST(BackgroundLoop, ASingleRankRunsTheRoundOnTheOpThread) {
  OnThreadRanks(1, [&](Links& links) {
    OneHostRank one(links);
    ASSERT_TRUE(one.Started());
    for (int call = 0; call < 3; ++call) {
      std::vector<int32_t> in = {7 + call, -3}, out = {0, 0};
      std::atomic<bool> done{false};
      std::thread::id ran_on;
      TensorTableEntry e = Int32Entry("grad", in, out, [&](const Status& st) {
        EXPECT_TRUE(st.ok()) << st.message();
        ran_on = std::this_thread::get_id();
        done = true;
      });
      ASSERT_TRUE(one.queue.Add(std::move(e), /*wake=*/false).ok());
      one.loop.RunRoundsHereOrWake();
      ASSERT_TRUE(done.load()) << "call " << call;
      EXPECT_EQ(ran_on, std::this_thread::get_id()) << "call " << call;
      EXPECT_EQ(out, in) << "call " << call;
    }
    one.leaving = static_cast<int>(Controller::Leaving::SHUTDOWN_CALLED);
    EXPECT_FALSE(CycleUntil(one.loop, [] { return false; }));
    one.loop.Stop();
  });
}

// Two tensors queued together (ops of one step): the op's thread leaves them
// to the background thread's round, fused, even with the peer waiting there.
TEST(BackgroundLoop, AnOpThreadLeavesTensorsQueuedTogetherToTheLoop) {
  if (UsableCpus() < 2) GTEST_SKIP() << "one CPU: ops do not run rounds there";
  std::atomic<bool> peer_looping{false};
  OnThreadRanks(2, [&](Links& links) {
    const int r = links.rank();
    OneHostRank one(links);
    ASSERT_TRUE(one.Started());
    std::vector<std::vector<int32_t>> in = {{r + 1, 2 * (r + 1)}, {10 * (r + 1)}};
    std::vector<std::vector<int32_t>> out = {{0, 0}, {0}};
    std::atomic<int> done{0};
    std::vector<std::thread::id> ran_on(2);
    for (int i = 0; i < 2; ++i) {
      auto callback = [&, i](const Status& st) {
        EXPECT_TRUE(st.ok()) << st.message();
        ran_on[i] = std::this_thread::get_id();
        ++done;
      };
      TensorTableEntry e = Int32Entry("grad" + std::to_string(i), in[i], out[i], callback);
      ASSERT_TRUE(one.queue.Add(std::move(e), /*wake=*/false).ok());
    }
    const std::thread::id op_thread = std::this_thread::get_id();
    std::thread background;
    if (r == 0) {
      // Rank 1's loop waits in the round by now: a round here would not wait.
      while (!peer_looping) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      one.loop.RunRoundsHereOrWake(1);
      background = std::thread([&] { CycleUntil(one.loop, [&] { return done.load() == 2; }); });
    } else {
      background = std::thread([&] { CycleUntil(one.loop, [&] { return done.load() == 2; }); });
      peer_looping = true;
    }
    background.join();
    ASSERT_EQ(done.load(), 2);
    EXPECT_NE(ran_on[0], op_thread);
    EXPECT_NE(ran_on[1], op_thread);
    EXPECT_EQ(out[0], (std::vector<int32_t>{3, 6}));
    EXPECT_EQ(out[1], (std::vector<int32_t>{30}));
    one.leaving = static_cast<int>(Controller::Leaving::SHUTDOWN_CALLED);
    EXPECT_FALSE(CycleUntil(one.loop, [] { return false; }));
    one.loop.Stop();
  });
}

TEST(IdleBackoff, AnIdleRankPollsLessAndLessOftenUpTo20ms) {
  IdleBackoff wait(Micros(5000));
  EXPECT_EQ(wait.Next(false, false), Micros(10000));
  EXPECT_EQ(wait.Next(false, false), Micros(20000));
  EXPECT_EQ(wait.Next(false, false), Micros(20000));
  // Process sets: every cycle time.
  EXPECT_EQ(wait.Next(false, true), Micros(5000));
}

TEST(IdleBackoff, ABusyRankBacksOffOnlyWhileRoundsMakeNoProgress) {
  IdleBackoff wait(Micros(1000));
  EXPECT_EQ(wait.Next(true, false), Micros(0));
  wait.AfterRound(false);
  EXPECT_EQ(wait.Next(true, false), Micros(20));
  wait.AfterRound(false);
  EXPECT_EQ(wait.Next(true, false), Micros(40));
  for (int i = 0; i < 10; ++i) wait.AfterRound(false);
  EXPECT_EQ(wait.Next(true, false), Micros(1000));  // capped at the cycle time
  wait.AfterRound(true);
  EXPECT_EQ(wait.Next(true, false), Micros(0));
}

TEST(IdleBackoff, ANewCycleTimeCapsTheWaits) {
  IdleBackoff wait(Micros(50000));
  EXPECT_EQ(wait.Next(false, false), Micros(50000));
  wait.SetCycle(Micros(1000));
  EXPECT_EQ(wait.Next(false, true), Micros(1000));
  EXPECT_EQ(wait.Next(false, false), Micros(2000));
}

}  // namespace
