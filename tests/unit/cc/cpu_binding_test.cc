// HOROVOD_CPU_BIND's release policy (BindingPolicy), the /proc parsers, the meter,
// and binding this process's threads for real (cc/common/host/cpu_binding.h).
#include "cc/common/host/cpu_binding.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <string>
#include <thread>

namespace tfhvd {
namespace {

using Action = BindingPolicy::Action;

std::vector<int> Allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(BindingPolicy, ReleasesAfterTwoBusyWindowsInARowOnly) {
  BindingPolicy p(30);
  EXPECT_EQ(p.Observe(1, 0.9), Action::KEEP);   // one busy window
  EXPECT_EQ(p.Observe(2, 0.1), Action::KEEP);   // quiet: the count starts again
  EXPECT_EQ(p.Observe(3, 0.3), Action::KEEP);
  EXPECT_EQ(p.Observe(4, 0.24), Action::KEEP);  // under a quarter is quiet
  EXPECT_EQ(p.Observe(5, 0.25), Action::KEEP);
  EXPECT_EQ(p.Observe(6, 0.6), Action::RELEASE);
  EXPECT_FALSE(p.bound());
  EXPECT_EQ(p.releases(), 1);
}

TEST(BindingPolicy, RebindsAfterTheRetryAndDoublesItWhileTheContentionLasts) {
  BindingPolicy p(10);
  p.Observe(0, 1);
  ASSERT_EQ(p.Observe(1, 1), Action::RELEASE);
  // Unbound, the share is not measured: only the time counts.
  EXPECT_EQ(p.Observe(10.9, 1), Action::KEEP);
  EXPECT_EQ(p.Observe(11, 0), Action::REBIND);
  EXPECT_TRUE(p.bound());
  // Still busy: released again, for twice as long.
  EXPECT_EQ(p.Observe(12, 1), Action::KEEP);
  EXPECT_EQ(p.Observe(13, 1), Action::RELEASE);
  EXPECT_DOUBLE_EQ(p.retry_s(), 20);
  EXPECT_EQ(p.Observe(32.9, 0), Action::KEEP);
  EXPECT_EQ(p.Observe(33, 0), Action::REBIND);
  // Doubling stops at 8x.
  double now = 33;
  for (int i = 0; i < 6; ++i) {
    p.Observe(++now, 1);
    ASSERT_EQ(p.Observe(++now, 1), Action::RELEASE);
    now += p.retry_s();
    ASSERT_EQ(p.Observe(now, 0), Action::REBIND);
  }
  EXPECT_DOUBLE_EQ(p.retry_s(), 80);
  // A quiet window after rebinding ends the contention: the next release waits 10 s.
  EXPECT_EQ(p.Observe(++now, 0.1), Action::KEEP);
  p.Observe(++now, 1);
  EXPECT_EQ(p.Observe(++now, 1), Action::RELEASE);
  EXPECT_DOUBLE_EQ(p.retry_s(), 10);
  EXPECT_EQ(p.releases(), 9);
}

TEST(BindingPolicy, RetryZeroNeverReleases) {
  BindingPolicy p(0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.Observe(i, 1), Action::KEEP);
  EXPECT_TRUE(p.bound());
}

const char kStat[] =
    "cpu  100 2 30 4000 5 1 2 7 0 0\n"
    "cpu0 10 1 20 500 5 1 1 2 0 0\n"
    "cpu1 40 0 5 300 0 0 1 4 9 0\n"
    "cpu10 7 0 0 1 0 0 0 0 0 0\n"
    "intr 12345\n";

TEST(CpuTicks, SumsBusyAndAllTicksOfTheNamedCpus) {
  uint64_t busy, total;
  ASSERT_TRUE(ParseCpuTicks(kStat, {0}, &busy, &total));
  EXPECT_EQ(busy, 31u);
  EXPECT_EQ(total, 540u);
  ASSERT_TRUE(ParseCpuTicks(kStat, {1, 10}, &busy, &total));
  EXPECT_EQ(busy, 45u + 7u);  // cpu1 is not mistaken for cpu10, nor the other way
  EXPECT_EQ(total, 350u + 8u);
  EXPECT_FALSE(ParseCpuTicks(kStat, {2}, &busy, &total));
  EXPECT_FALSE(ParseCpuTicks("cpu  1 2\ncpu0 1 2 3\n", {0}, &busy, &total));
}

TEST(ProcessTicks, AddsUtimeAndStimeAfterTheCommandName) {
  uint64_t ticks;
  ASSERT_TRUE(ParseProcessTicks(
      "4242 (py (x) 1) S 1 2 3 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0 99 0 0\n", &ticks));
  EXPECT_EQ(ticks, 281u);
  EXPECT_FALSE(ParseProcessTicks("4242 (py) S 1 2", &ticks));
  EXPECT_FALSE(ParseProcessTicks("4242 (py) S 1 2 3 0 -1 4194560 100 0 0 0 x 31", &ticks));
}

TEST(ForeignShareMeter, CountsTheCpusBusyTimeLessThisProcesssOverAllTheirTime) {
  // /proc/stat with cpu0's and cpu1's user and idle ticks (the other fields fixed), and
  // /proc/self/stat with this process's utime (stime 30 once it runs).
  auto stat = [](int user0, int idle0, int user1, int idle1) {
    return "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 " + std::to_string(user0) + " 1 20 " +
           std::to_string(idle0) + " 5 1 1 2 0 0\ncpu1 " + std::to_string(user1) + " 0 5 " +
           std::to_string(idle1) + " 0 0 1 4 9 0\n";
  };
  auto self = [](int utime, int stime = 30) {
    return "7 (x) S 1 2 3 0 -1 0 0 0 0 0 " + std::to_string(utime) + " " +
           std::to_string(stime) + " 0";
  };
  ForeignShareMeter meter;
  double share = -1;
  EXPECT_FALSE(meter.Update(kStat, self(100, 20), {0, 1}, &share));  // the first starts the window
  // 130 more ticks, 60 of them busy, all 60 this process's.
  ASSERT_TRUE(meter.Update(stat(30, 530, 80, 340), self(150), {0, 1}, &share));
  EXPECT_DOUBLE_EQ(share, 0.0);  // 60 busy, all this process's
  ASSERT_TRUE(meter.Update(stat(90, 570, 140, 380), self(160), {0, 1}, &share));
  EXPECT_DOUBLE_EQ(share, (120.0 - 10.0) / 200.0);
  // A process's time is precise, a CPU's sampled per tick: never below 0.
  const std::string kStat3 = stat(100, 660, 150, 470), kSelf3 = self(400);
  ASSERT_TRUE(meter.Update(kStat3, kSelf3, {0, 1}, &share));
  EXPECT_DOUBLE_EQ(share, 0.0);
  EXPECT_FALSE(meter.Update("garbage", kSelf3, {0, 1}, &share));
  EXPECT_FALSE(meter.Update(kStat3, kSelf3, {0, 1}, &share));  // a failure restarts the window
  // The real files.
  meter.Reset();
  EXPECT_FALSE(meter.Sample(Allowed(), &share));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(meter.Sample(Allowed(), &share));
  EXPECT_GE(share, 0.0);
  EXPECT_LE(share, 1.0);
}

TEST(CpuBinding, BindsEveryThreadAndReportsItsState) {
  const std::vector<int> cpus = Allowed();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU";
  std::atomic<bool> stop{false};
  std::atomic<int> seen{-1};
  std::thread other([&] {
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    seen = sched_getcpu();
  });
  CpuBinding binding;
  ASSERT_TRUE((binding.Bind({cpus[1]}, cpus, 30)).ok());
  stop = true;
  other.join();
  EXPECT_EQ(seen.load(), cpus[1]);  // a thread that existed before Bind() moved too
  CpuBinding::State st = binding.state();
  EXPECT_TRUE(st.active);
  EXPECT_TRUE(st.bound);
  EXPECT_EQ(st.releases, 0);
  EXPECT_EQ(st.cpus, std::vector<int>{cpus[1]});
  // wide == bound: nothing to release to.
  ASSERT_TRUE((binding.Bind({cpus[0]}, {cpus[0]}, 30)).ok());
  EXPECT_FALSE(binding.state().active);
  Status s = binding.Bind({CPU_SETSIZE - 1}, cpus, 30);
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("cannot bind thread"), std::string::npos) << s.message();
  ASSERT_TRUE((SetProcessAffinity(cpus)).ok());
}

}  // namespace
}  // namespace tfhvd
