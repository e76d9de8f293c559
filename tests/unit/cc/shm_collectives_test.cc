// Unit test of the shared-memory collectives (cc/common/algorithms/shm_collectives.h): ranks
// are threads of this process, each with its own mapping of every region, so
// the real shm_open/mmap path runs. Checks exact sums and maxima for several
// dtypes, rank counts, sizes spanning many blocks, in place and not; identical
// bits on every rank for floats; no name left in /dev/shm; a failed barrier is
// returned, not swallowed; several tensors reduced as one without a fusion
// buffer.
// GoogleTest (its assertions are thread-safe, so rank threads use EXPECT_* directly):
//   bazel test //:shm_collectives_test
#include <dirent.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/half.h"
#include "cc/common/algorithms/huge_pages.h"
#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/host/thread_affinity.h"
#include "cc/common/kernels/reduce_kernels.h"

using namespace tfhvd;

namespace {

// What a transport provides: a barrier and a string allgather, here between threads.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(static_cast<size_t>(size)) {}

  Status Barrier() {
    std::unique_lock<std::mutex> l(mu_);
    uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return generation_ != gen; });
    }
    return Status();
  }

  Status Allgather(int rank, const std::string& mine, std::vector<std::string>* all) {
    {
      std::lock_guard<std::mutex> l(mu_);
      slots_[static_cast<size_t>(rank)] = mine;
    }
    Barrier();
    {
      std::lock_guard<std::mutex> l(mu_);
      *all = slots_;
    }
    return Barrier();
  }

 private:
  int size_;
  std::vector<std::string> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

int CountShmNames() {
  int count = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) count += std::strncmp(e->d_name, "tfhvd.", 6) == 0;
    closedir(d);
  }
  return count;
}

// The single-copy mode RunRanks gives every rank (off: the slots only); the
// ShmSingleCopy tests run the same checks with it on.
// With min_bytes 1, every call of the checks below takes it.
ShmTimedChoice::Mode g_single_copy = ShmTimedChoice::Mode::kNever;
size_t g_single_copy_min_bytes = 1;
struct SingleCopy {
  explicit SingleCopy(ShmTimedChoice::Mode mode, size_t min_bytes = 1) {
    g_single_copy = mode;
    g_single_copy_min_bytes = min_bytes;
  }
  ~SingleCopy() { g_single_copy = ShmTimedChoice::Mode::kNever; }
};
constexpr auto kOn = ShmTimedChoice::Mode::kAlways;

// Runs body(rank, shm) on `size` threads, each with an opened ShmCollectives.
template <typename Body>
void RunRanks(int size, size_t slot_bytes, Body body) {
  ThreadGroup group(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ShmCollectives shm;
      shm.SetSingleCopy(g_single_copy, g_single_copy_min_bytes);
      std::string reason;
      Status s = shm.Open(
          r, size, slot_bytes,
          [&](const std::string& mine, std::vector<std::string>* all) {
            return group.Allgather(r, mine, all);
          },
          &reason);
      EXPECT_TRUE(s.ok()) << "rank " << r << ": " << s.message();
      EXPECT_EQ(reason, "") << "rank " << r;
      EXPECT_TRUE(shm.active()) << "rank " << r;
      // Threads of one process may always read its memory.
      EXPECT_EQ(shm.single_copy_possible(), g_single_copy != ShmTimedChoice::Mode::kNever)
          << "rank " << r;
      if (!shm.active()) return;
      body(r, shm);
    });
  }
  for (auto& t : threads) t.join();
}

// Integers and exactly representable floats: every rank gets the exact sum
// and maximum, in place and out of place.
template <typename T, typename ToT>
void TestExact(DataType dtype, ToT to_t, double (*to_d)(T)) {
  for (int size : {2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{1000}, size_t{100003}}) {
      RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
        std::vector<T> in(count), out(count, to_t(-1));
        for (size_t i = 0; i < count; ++i) in[i] = to_t(static_cast<double>((i % 13) + r));
        const double rank_sum = size * (size - 1) / 2.0;
        Status s = shm.Allreduce(in.data(), out.data(), static_cast<int64_t>(count), dtype,
                                 ReduceOp::SUM);
        EXPECT_TRUE(s.ok()) << s.message();
        int bad = 0;
        for (size_t i = 0; i < count; ++i)
          bad += to_d(out[i]) != static_cast<double>(i % 13) * size + rank_sum;
        EXPECT_EQ(bad, 0) << "sum: " << size << " ranks, " << count << " elements, rank " << r;
        // In place, maximum.
        s = shm.Allreduce(in.data(), in.data(), static_cast<int64_t>(count), dtype,
                          ReduceOp::MAX);
        EXPECT_TRUE(s.ok()) << s.message();
        bad = 0;
        for (size_t i = 0; i < count; ++i)
          bad += to_d(in[i]) != static_cast<double>(i % 13) + size - 1;
        EXPECT_EQ(bad, 0) << "in-place max: " << size << " ranks, " << count << " elements, rank "
                          << r;
      });
    }
  }
}

double F32(float x) { return x; }
double F64(double x) { return x; }
double I32(int32_t x) { return x; }
double I64(int64_t x) { return static_cast<double>(x); }
double U8(uint8_t x) { return x; }
double F16(uint16_t x) { return HalfToFloat(x); }
double BF16(uint16_t x) { return BFloat16ToFloat(x); }

// Inexact float sums: every rank must end with the same bits.
void TestSameBits() {
  const int size = 3;
  const size_t count = 50001;
  std::vector<std::vector<float>> results(size);
  RunRanks(size, 8192, [&](int r, ShmCollectives& shm) {
    std::vector<float> in(count);
    uint32_t seed = 17u + static_cast<uint32_t>(r);
    for (float& x : in) {
      seed = seed * 1664525u + 1013904223u;
      x = static_cast<float>(seed % 100000) / 7777.0f;
    }
    EXPECT_TRUE(shm.Allreduce(in.data(), in.data(), count, DataType::FLOAT32, ReduceOp::SUM).ok());
    results[static_cast<size_t>(r)] = in;
  });
  for (size_t r = 1; r < results.size(); ++r) {
    ASSERT_EQ(results[r].size(), count) << "rank " << r;
    EXPECT_EQ(std::memcmp(results[0].data(), results[r].data(), count * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
}

TEST(ShmCollectives, InexactFloatSumsHaveTheSameBitsOnEveryRank) { TestSameBits(); }

// Several tensors reduced as one, straight from their inputs into their
// outputs (some in place, one empty, sizes that cut across blocks and
// chunks): each gets the exact sum, as the concatenation would.
void TestSeveralTensors() {
  const std::vector<size_t> sizes = {3, 0, 1000, 1, 4096, 777, 20000};
  for (int size : {2, 3}) {
    RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
      std::vector<std::vector<int32_t>> in(sizes.size()), out(sizes.size());
      std::vector<ShmCollectives::Segment> segments;
      for (size_t t = 0; t < sizes.size(); ++t) {
        in[t].resize(sizes[t]);
        out[t].assign(sizes[t], -1);
        for (size_t i = 0; i < sizes[t]; ++i) {
          in[t][i] = static_cast<int32_t>(t * 1000 + i % 97 + r);
        }
        const bool in_place = t % 2 == 1;
        segments.push_back({in[t].data(), in_place ? in[t].data() : out[t].data(),
                            static_cast<int64_t>(sizes[t])});
      }
      EXPECT_TRUE(shm.Allreduce(segments, DataType::INT32, ReduceOp::SUM).ok());
      int bad = 0;
      const int32_t rank_sum = size * (size - 1) / 2;
      for (size_t t = 0; t < sizes.size(); ++t) {
        const std::vector<int32_t>& got = t % 2 == 1 ? in[t] : out[t];
        for (size_t i = 0; i < sizes[t]; ++i) {
          bad += got[i] != static_cast<int32_t>((t * 1000 + i % 97) * size + rank_sum);
        }
      }
      EXPECT_EQ(bad, 0) << "rank " << r << " of " << size;
    });
  }
}

TEST(ShmCollectives, SeveralTensorsReducedAsOneWithoutAFusionBuffer) { TestSeveralTensors(); }

// A postscale applied inside the allreduce (Average's 1/size) gives the same
// bits as the sum followed by ScaleBuffer, on every rank: floats rounded once
// from the double product, integers truncated, float16 scaled in float32.
template <typename T>
void TestPostscale(DataType dtype, double factor) {
  const std::vector<size_t> sizes = {5, 0, 3000, 9001};
  for (int size : {2, 3}) {
    RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
      std::vector<std::vector<T>> in(sizes.size()), expect(sizes.size()), out(sizes.size());
      std::vector<ShmCollectives::Segment> plain, scaled;
      for (size_t t = 0; t < sizes.size(); ++t) {
        in[t].resize(sizes[t]);
        uint32_t seed = 101u * static_cast<uint32_t>(t) + 7u * static_cast<uint32_t>(r);
        for (T& x : in[t]) {
          seed = seed * 1664525u + 1013904223u;
          x = dtype == DataType::FLOAT16
                  ? static_cast<T>(FloatToHalf(static_cast<float>(seed % 2000) / 37.0f))
                  : static_cast<T>(static_cast<double>(seed % 20000) / 7.0);
        }
        expect[t].assign(sizes[t], T());
        out[t].assign(sizes[t], T());
        plain.push_back({in[t].data(), expect[t].data(), static_cast<int64_t>(sizes[t])});
        scaled.push_back({in[t].data(), out[t].data(), static_cast<int64_t>(sizes[t])});
      }
      ASSERT_TRUE(shm.Allreduce(plain, dtype, ReduceOp::SUM).ok());
      for (size_t t = 0; t < sizes.size(); ++t) ScaleBuffer(dtype, expect[t].data(), sizes[t], factor);
      ASSERT_TRUE(shm.Allreduce(scaled, dtype, ReduceOp::SUM, factor).ok());
      for (size_t t = 0; t < sizes.size(); ++t) {
        EXPECT_EQ(std::memcmp(expect[t].data(), out[t].data(), sizes[t] * sizeof(T)), 0)
            << "tensor " << t << ", rank " << r << " of " << size << ", factor " << factor;
      }
    });
  }
}

// Reduce-scatter over uneven slices (one rank's empty, slices spanning many
// blocks): each rank gets the exact sum of its slice, scaled, and nothing
// else is written; the allgather then puts every rank's part in every output.
TEST(ShmCollectives, ReduceScatterAndAllgatherOfUnevenSlices) {
  for (int size : {2, 3, 4}) {
    for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{1000}, int64_t{100003}}) {
      const RowSplit split{rows, size};
      std::vector<int64_t> first(static_cast<size_t>(size)), counts(static_cast<size_t>(size));
      std::vector<int64_t> bytes(static_cast<size_t>(size));
      for (int q = 0; q < size; ++q) {
        first[static_cast<size_t>(q)] = split.first(q);
        counts[static_cast<size_t>(q)] = split.rows(q);
        bytes[static_cast<size_t>(q)] = split.rows(q) * 4;
      }
      RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
        const size_t n = static_cast<size_t>(rows), q = static_cast<size_t>(r);
        std::vector<int32_t> in(n);
        for (size_t i = 0; i < n; ++i) in[i] = static_cast<int32_t>(i % 13) + r;
        const std::vector<int32_t> before = in;
        std::vector<int32_t> mine(static_cast<size_t>(counts[q]) + 1, -7);
        Status s = shm.ReduceScatter(in.data(), mine.data(), first, counts, DataType::INT32,
                                     ReduceOp::SUM, 2.0);
        EXPECT_TRUE(s.ok()) << s.message();
        EXPECT_TRUE(in == before) << "the input changed on rank " << r;
        int bad = 0;
        const int32_t rank_sum = size * (size - 1) / 2;
        for (int64_t i = 0; i < counts[q]; ++i) {
          const int64_t at = first[q] + i;
          bad += mine[static_cast<size_t>(i)] != 2 * (static_cast<int32_t>(at % 13) * size + rank_sum);
        }
        EXPECT_EQ(bad, 0) << size << " ranks, " << rows << " rows, rank " << r;
        EXPECT_EQ(mine.back(), -7) << "written past its slice on rank " << r;
        // Every rank's slice, gathered in rank order, is the whole reduction.
        std::vector<int32_t> all(n, -1);
        s = shm.Allgather(mine.data(), all.data(), bytes);
        EXPECT_TRUE(s.ok()) << s.message();
        bad = 0;
        for (size_t i = 0; i < n; ++i)
          bad += all[i] != 2 * (static_cast<int32_t>(i % 13) * size + rank_sum);
        EXPECT_EQ(bad, 0) << "allgather: " << size << " ranks, " << rows << " rows, rank " << r;
        // An allreduce after them still pairs its blocks with the peers'.
        std::vector<int32_t> sum(n);
        EXPECT_TRUE(shm.Allreduce(in.data(), sum.data(), static_cast<int64_t>(n), DataType::INT32,
                                  ReduceOp::SUM).ok());
        EXPECT_EQ(sum[n - 1], static_cast<int32_t>((n - 1) % 13) * size + rank_sum);
      });
    }
  }
}

// Calls of 1 to 9 blocks in a row, one rank late by turns: the blocks run as a
// pipeline over the slots (a rank stages ahead while its peers catch up), and
// calls start at whichever slot the last one left off.
void TestCallsInARow() {
  for (int size : {2, 3}) {
    RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
      const int32_t rank_sum = size * (size - 1) / 2;
      int call = 0;
      for (size_t blocks : {1, 2, 3, 0, 5, 9, 1, 0, 4, 7, 2, 8}) {
        // 4 KiB slots: 1024 int32 a block (0: an empty call between the others)
        const size_t n = blocks == 0 ? 0 : blocks * 1024 - (call % 3);
        if (call++ % size == r) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::vector<int32_t> in(n), out(n, -1);
        for (size_t i = 0; i < n; ++i) in[i] = static_cast<int32_t>((i + call) % 29) + r;
        Status s = shm.Allreduce(in.data(), out.data(), static_cast<int64_t>(n),
                                 DataType::INT32, ReduceOp::SUM);
        EXPECT_TRUE(s.ok()) << s.message();
        int bad = 0;
        for (size_t i = 0; i < n; ++i)
          bad += out[i] != static_cast<int32_t>((i + call) % 29) * size + rank_sum;
        EXPECT_EQ(bad, 0) << size << " ranks, call " << call << " of " << n
                          << " elements, rank " << r;
      }
    });
  }
}

TEST(ShmCollectives, CallsOfEveryLengthInARowWithARankLate) { TestCallsInARow(); }

void TestPostscales() {
  TestPostscale<float>(DataType::FLOAT32, 1.0 / 3.0);
  TestPostscale<float>(DataType::FLOAT32, 0.5);
  TestPostscale<double>(DataType::FLOAT64, 0.1);
  TestPostscale<int32_t>(DataType::INT32, 1.0 / 3.0);
  TestPostscale<uint16_t>(DataType::FLOAT16, 1.0 / 3.0);
}

TEST(ShmCollectives, PostscaleInsideEqualsSumThenScale) { TestPostscales(); }

// The negotiation's bit vector: every rank gets the OR of all ranks' words,
// round after round (both buffers reused many times), whether a peer is
// already there (spin) or arrives milliseconds later (futex sleep).
TEST(ShmCollectives, OrWordsIsTheOrOfEveryRanksWords) {
  for (int size : {2, 3}) {
    RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
      for (uint64_t round = 0; round < 300; ++round) {
        const size_t n = 1 + round % 7;
        std::vector<uint64_t> words(n);
        for (size_t i = 0; i < n; ++i) words[i] = (uint64_t{1} << ((r + i + round) % 64)) | i;
        // Every 50th round one rank is late: its peers sleep on the futex.
        if (round % 50 == 49 && r == static_cast<int>(round % size)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        Status s = shm.OrWords(words.data(), n);
        ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.message();
        for (size_t i = 0; i < n; ++i) {
          uint64_t want = i;
          for (int q = 0; q < size; ++q) want |= uint64_t{1} << ((q + i + round) % 64);
          ASSERT_EQ(words[i], want) << "rank " << r << " round " << round << " word " << i;
        }
      }
      // Interleaved with allreduces, the rounds still line up.
      std::vector<float> buf(1000, static_cast<float>(r + 1));
      ASSERT_TRUE(shm.Allreduce(buf.data(), buf.data(), 1000, DataType::FLOAT32,
                                ReduceOp::SUM).ok());
      uint64_t w = uint64_t{1} << r;
      ASSERT_TRUE(shm.OrWords(&w, 1).ok());
      EXPECT_EQ(w, (uint64_t{1} << size) - 1);
      EXPECT_EQ(buf[999], static_cast<float>(size * (size + 1) / 2));
    });
  }
}

// A bounded round whose peer is late returns with its words published and
// nothing ORed; the next call (another thread's here) finishes that round,
// not another: every rank ends with the OR of all, and the next round lines up.
TEST(ShmCollectives, ABoundedOrWordsPausesForALatePeerAndTheNextCallFinishesIt) {
  for (int size : {2, 3}) {
    std::atomic<int> paused{0};
    RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
      for (uint64_t round = 0; round < 20; ++round) {
        std::vector<uint64_t> words = {uint64_t{1} << r, uint64_t{1} << (r + round)};
        const uint64_t want0 = (uint64_t{1} << size) - 1;
        const uint64_t want1 = ((uint64_t{1} << size) - 1) << round;
        if (r == 0) {
          // Rank 0 comes first, the others only once it has paused.
          bool waiting = false;
          ASSERT_TRUE(shm.OrWords(words.data(), 2, std::chrono::microseconds(20), &waiting).ok());
          ASSERT_TRUE(waiting) << "round " << round;
          EXPECT_EQ(words, (std::vector<uint64_t>{1, uint64_t{1} << round}));
          paused = static_cast<int>(round) + 1;
          Status s;
          std::thread other([&] { s = shm.OrWords(words.data(), 2); });
          other.join();
          ASSERT_TRUE(s.ok()) << s.message();
        } else {
          while (paused.load() <= static_cast<int>(round)) std::this_thread::yield();
          bool waiting = true;
          Status s = shm.OrWords(words.data(), 2, std::chrono::microseconds(0), &waiting);
          ASSERT_TRUE(s.ok()) << s.message();
          // With two ranks the only peer waits in this round already.
          if (size == 2) EXPECT_FALSE(waiting) << "round " << round;
          if (waiting) {
            s = shm.OrWords(words.data(), 2);
            ASSERT_TRUE(s.ok()) << s.message();
          }
        }
        EXPECT_EQ(words, (std::vector<uint64_t>{want0, want1}))
            << "rank " << r << " round " << round;
      }
    });
  }
}

// Opened as the core opens it: a waiting rank spins HOROVOD_SPIN_US, at most
// 50 us, where the host has a CPU per rank; where its ranks outnumber the CPUs
// it sleeps at once (a spinner takes the CPU its peer needs), and the sums
// stay exact with every wait a futex sleep.
TEST(ShmCollectives, AWaitingRankSpinsOnlyWhereTheHostHasACpuPerRank) {
  const int cpus = UsableCpus();
  for (int size : {2, cpus + 1}) {
    for (int64_t spin_us : {20, 5000}) {
      Parameters params;
      params.spin_us = spin_us;
      const int64_t want = size > cpus ? 0 : std::min<int64_t>(spin_us, 50);
      ThreadGroup group(size);
      std::vector<std::thread> threads;
      for (int r = 0; r < size; ++r) {
        threads.emplace_back([&, r] {
          ShmCollectives shm;
          Status s = shm.OpenIfSingleHost(
              r, size, size, params,
              [&](const std::string& mine, std::vector<std::string>* all) {
                return group.Allgather(r, mine, all);
              },
              "nothing");
          ASSERT_TRUE(s.ok() && shm.active()) << "rank " << r << ": " << s.message();
          EXPECT_EQ(shm.spin().count(), want) << size << " ranks on " << cpus << " CPUs";
          for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{100000}}) {
            std::vector<int32_t> data(static_cast<size_t>(count), r + 1);
            ASSERT_TRUE(shm.Allreduce(data.data(), data.data(), count, DataType::INT32,
                                      ReduceOp::SUM).ok());
            EXPECT_EQ(data.front(), size * (size + 1) / 2) << "rank " << r;
            EXPECT_EQ(data.back(), size * (size + 1) / 2) << "rank " << r;
          }
        });
      }
      for (auto& t : threads) t.join();
    }
  }
}

TEST(ShmCollectives, OrWordsRefusesMoreWordsThanItsBuffer) {
  RunRanks(2, 4096, [&](int, ShmCollectives& shm) {
    std::vector<uint64_t> words(ShmCollectives::kMaxOrWords + 1, 0);
    Status s = shm.OrWords(words.data(), words.size());
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.message(), "OrWords: 501 words, at most 500");
  });
}

// Readers flushing what they read (forced on) changes speed only: exact sums and maxima
// over many blocks, at 2 and 3 ranks, in place and not.
TEST(ShmCollectives, ReadersFlushingGiveTheSameResults) {
  for (int size : {2, 3}) {
    for (size_t count : {size_t{7}, size_t{100003}}) {
      RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
        shm.SetReaderFlush(ShmTimedChoice::Mode::kAlways);
        std::vector<float> in(count), out(count, -1);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i % 13) + r);
        const float rank_sum = size * (size - 1) / 2.0f;
        ASSERT_TRUE(shm.Allreduce(in.data(), out.data(), static_cast<int64_t>(count),
                                  DataType::FLOAT32, ReduceOp::SUM).ok());
        ASSERT_TRUE(shm.Allreduce(in.data(), in.data(), static_cast<int64_t>(count),
                                  DataType::FLOAT32, ReduceOp::MAX).ok());
        int bad = 0;
        for (size_t i = 0; i < count; ++i) {
          bad += out[i] != static_cast<float>(i % 13) * size + rank_sum;
          bad += in[i] != static_cast<float>(i % 13) + size - 1;
        }
        EXPECT_EQ(bad, 0) << size << " ranks, " << count << " elements, rank " << r;
      });
    }
  }
}

TEST(ShmTimedChoice, FixedModesNeverChange) {
  ShmTimedChoice always(ShmTimedChoice::ParseMode("on"));
  ShmTimedChoice never(ShmTimedChoice::ParseMode("off"));
  for (uint64_t b = 0; b < 600; ++b) {
    EXPECT_TRUE(always.Choose(b));
    EXPECT_FALSE(never.Choose(b));
    always.Record(b, true, 1 << 20, 1e9);  // however slow, it stays
    never.Record(b, false, 1 << 20, 1e9);
  }
  EXPECT_EQ(ShmTimedChoice::ParseMode("auto"), ShmTimedChoice::Mode::kAuto);
}

// Runs `periods` periods of blocks whose cost per byte is plain_ns or flush_ns; returns how
// many blocks flushed in the last period.
int RunPolicy(ShmTimedChoice* p, uint64_t* block, int periods, double plain_ns,
              double flush_ns, size_t bytes = size_t(1) << 20) {
  int flushed = 0;
  for (uint64_t end = *block + periods * ShmTimedChoice::kFlush.period; *block < end; ++*block) {
    const bool f = p->Choose(*block);
    if (end - *block <= ShmTimedChoice::kFlush.period) flushed += f;
    p->Record(*block, f, bytes, static_cast<double>(bytes) * (f ? flush_ns : plain_ns));
  }
  return flushed;
}

TEST(ShmTimedChoice, AutoKeepsTheCheaperWayAndTriesTheOther) {
  ShmTimedChoice p;
  uint64_t block = 0;
  const int trial = static_cast<int>(ShmTimedChoice::kFlush.trial);
  const int period = static_cast<int>(ShmTimedChoice::kFlush.period);
  // Near: flushing costs twice as much; only the trial blocks flush.
  EXPECT_EQ(RunPolicy(&p, &block, 3, 1.0, 2.0), trial);
  EXPECT_FALSE(p.preferred());
  // Far: plain costs twice flushing; after one trial the blocks flush, trying plain.
  RunPolicy(&p, &block, 2, 4.0, 2.0);
  EXPECT_TRUE(p.preferred());
  EXPECT_EQ(RunPolicy(&p, &block, 1, 4.0, 2.0), period - trial);
  // A difference inside the margin does not switch back.
  RunPolicy(&p, &block, 3, 1.9, 2.0);
  EXPECT_TRUE(p.preferred());
  // Near again: back to plain.
  RunPolicy(&p, &block, 3, 1.0, 2.0);
  EXPECT_FALSE(p.preferred());
  // Blocks too small to time change nothing.
  RunPolicy(&p, &block, 3, 9.0, 1.0, ShmTimedChoice::kFlush.min_bytes - 1);
  EXPECT_FALSE(p.preferred());
}

// The single copy's schedule: a first trial that paid for a cold start (its
// calls ten times dearer) is tried again within the first period, and the
// cheaper way (half the slots' cost) is kept from then on.
TEST(ShmTimedChoice, AColdFirstTrialIsTriedAgainWithinTheFirstPeriod) {
  const auto& schedule = ShmTimedChoice::kSingleCopy;
  ShmTimedChoice p(ShmTimedChoice::Mode::kAuto, schedule);
  const size_t bytes = schedule.min_bytes;
  uint64_t call = 0;
  auto run = [&](uint64_t end) {
    int single = 0;
    for (; call < end; ++call) {
      const bool way = p.Choose(call);
      const double cost = way ? (call < schedule.trial ? 10.0 : 1.0) : 2.0;
      p.Record(call, way, bytes, cost * static_cast<double>(bytes));
      single += way;
    }
    return single;
  };
  run(schedule.period / 2);
  EXPECT_TRUE(p.preferred());
  run(schedule.period);
  const int single = run(2 * schedule.period);
  EXPECT_EQ(single, static_cast<int>(schedule.period - schedule.trial));
}

void TestEveryDtype() {
  TestExact<float>(DataType::FLOAT32, [](double d) { return static_cast<float>(d); }, F32);
  TestExact<double>(DataType::FLOAT64, [](double d) { return d; }, F64);
  TestExact<int32_t>(DataType::INT32, [](double d) { return static_cast<int32_t>(d); }, I32);
  TestExact<int64_t>(DataType::INT64, [](double d) { return static_cast<int64_t>(d); }, I64);
  TestExact<uint8_t>(DataType::UINT8, [](double d) { return static_cast<uint8_t>(d); }, U8);
  TestExact<uint16_t>(DataType::FLOAT16,
                      [](double d) { return FloatToHalf(static_cast<float>(d)); }, F16);
  TestExact<uint16_t>(DataType::BFLOAT16,
                      [](double d) { return FloatToBFloat16(static_cast<float>(d)); }, BF16);
}

TEST(ShmCollectives, ExactSumsAndMaximaForEveryDtype) { TestEveryDtype(); }

// The single-copy allreduce (shm_single_copy.cc) passes the same checks: from
// one byte every call reads the peers' tensors where they lie.
TEST(ShmSingleCopy, ExactSumsAndMaximaForEveryDtype) {
  SingleCopy on(kOn);
  TestEveryDtype();
}
TEST(ShmSingleCopy, InexactFloatSumsHaveTheSameBitsOnEveryRank) {
  SingleCopy on(kOn);
  TestSameBits();
}
TEST(ShmSingleCopy, SeveralTensorsReducedAsOne) {
  SingleCopy on(kOn);
  TestSeveralTensors();
}
TEST(ShmSingleCopy, PostscaleInsideEqualsSumThenScale) {
  SingleCopy on(kOn);
  TestPostscales();
}
// Calls of 1 MiB (the default threshold) and more take the single copy,
// smaller ones the slots, in
// any order; with auto, rank 0's timing switches the way between calls (a
// trial of each within the first period) and every rank follows it.
void TestLargeAndSmallCalls(int calls) {
  for (int size : {2, 3}) {
    RunRanks(size, 4096, [&](int r, ShmCollectives& shm) {
      const int32_t rank_sum = size * (size - 1) / 2;
      for (int call = 0; call < calls; ++call) {
        // Small (the slots), 1 MiB and 4 MiB (two size classes, each timed apart).
        const size_t n = call % 3 == 2 ? 5000 + call
                                       : (size_t(1) << (call % 3 == 0 ? 18 : 20)) + call * 7;
        if (call % size == r && call % 5 == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::vector<int32_t> in(n), out(n, -1);
        for (size_t i = 0; i < n; ++i) in[i] = static_cast<int32_t>((i + call) % 31) + r;
        const bool in_place = call % 4 == 1;
        Status s = shm.Allreduce(in.data(), in_place ? in.data() : out.data(),
                                 static_cast<int64_t>(n), DataType::INT32, ReduceOp::SUM);
        ASSERT_TRUE(s.ok()) << s.message();
        const std::vector<int32_t>& got = in_place ? in : out;
        int bad = 0;
        for (size_t i = 0; i < n; ++i)
          bad += got[i] != static_cast<int32_t>((i + call) % 31) * size + rank_sum;
        ASSERT_EQ(bad, 0) << size << " ranks, call " << call << ", rank " << r;
      }
      const uint64_t large = static_cast<uint64_t>(calls - calls / 3);
      EXPECT_EQ(shm.large_calls(), large);
      // Every large call single (on), or some each way (auto: the trials).
      if (g_single_copy == kOn) {
        EXPECT_EQ(shm.single_copy_calls(), large);
      } else {
        EXPECT_GT(shm.single_copy_calls(), 0u);
        EXPECT_LT(shm.single_copy_calls(), large);
      }
    });
  }
}
TEST(ShmSingleCopy, LargeAndSmallCallsInARow) {
  SingleCopy on(kOn, ShmTimedChoice::kSingleCopy.min_bytes);
  TestLargeAndSmallCalls(12);
}
TEST(ShmSingleCopy, AutoSwitchesBetweenCallsAndEveryRankFollows) {
  SingleCopy automatic(ShmTimedChoice::Mode::kAuto, ShmTimedChoice::kSingleCopy.min_bytes);
  TestLargeAndSmallCalls(3 * static_cast<int>(ShmTimedChoice::kSingleCopy.period) / 2);
}

// The ranks agree: one rank that turned it off turns it off for all.
TEST(ShmSingleCopy, OneRankOffTurnsItOffEverywhere) {
  for (int off_rank : {0, 1}) {
    ThreadGroup group(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        ShmCollectives shm;
        shm.SetSingleCopy(r == off_rank ? ShmTimedChoice::Mode::kNever : kOn);
        std::string reason;
        ASSERT_TRUE(shm.Open(r, 2, 4096,
                             [&](const std::string& mine, std::vector<std::string>* all) {
                               return group.Allgather(r, mine, all);
                             },
                             &reason)
                        .ok());
        EXPECT_FALSE(shm.single_copy_possible()) << "rank " << r;
        const size_t n = size_t(1) << 19;
        std::vector<int32_t> in(n, r + 1), out(n);
        ASSERT_TRUE(shm.Allreduce(in.data(), out.data(), static_cast<int64_t>(n),
                                  DataType::INT32, ReduceOp::SUM).ok());
        EXPECT_EQ(out[0], 3);
        EXPECT_EQ(out[n - 1], 3);
      });
    }
    for (auto& t : threads) t.join();
  }
}

// The kernel's 2 MiB pages of one mapping, from /proc/self/smaps (kB).
long AnonHugeKb(const void* inside) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  char line[512];
  bool in_vma = false;
  long kb = -1;
  const uintptr_t at = reinterpret_cast<uintptr_t>(inside);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    // A mapping's first line ("lo-hi perms ..."); its fields follow.
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
        std::strchr(line, '-') < std::strchr(line, ' ')) {
      in_vma = at >= lo && at < hi;
    } else if (in_vma && std::sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
      break;
    }
  }
  std::fclose(f);
  return kb;
}

// Whether this kernel collapses anonymous memory on request (Linux 6.1 and
// THP not "never"); elsewhere HugePages leaves buffers as they are.
bool KernelCollapses() {
  const size_t bytes = 2 * HugePages::kPageBytes;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const uintptr_t mask = HugePages::kPageBytes - 1;
  char* page = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + mask) & ~mask);
  std::memset(page, 1, HugePages::kPageBytes);
  const bool ok = madvise(page, HugePages::kPageBytes, 25 /* MADV_COLLAPSE */) == 0;
  munmap(p, bytes);
  return ok;
}

// Only the 2 MiB pages wholly inside the buffer are collapsed, each once,
// and the bytes stay what they were.
TEST(HugePages, CollapsesTheWholePagesInsideABufferOnce) {
  if (!KernelCollapses()) {
    GTEST_SKIP() << "this kernel has no MADV_COLLAPSE (Linux < 6.1, or THP never)";
  }
  const size_t page = HugePages::kPageBytes, mapped = 8 * page;
  char* base = static_cast<char*>(
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  char* aligned =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + page - 1) & ~(page - 1));
  // 100 bytes into one page, to 100 bytes into the fifth: pages 2-4 are whole.
  char* data = aligned + 100;
  const size_t bytes = 4 * page;
  for (size_t i = 0; i < mapped - static_cast<size_t>(aligned - base); ++i) {
    aligned[i] = static_cast<char>(i * 7 + 3);
  }
  HugePages pages;
  EXPECT_EQ(pages.Collapse(data, page - 1), 0u);  // no whole page inside
  EXPECT_EQ(pages.remembered(), 0u);
  EXPECT_EQ(AnonHugeKb(data), 0);
  EXPECT_EQ(pages.Collapse(data, bytes), 3u);
  EXPECT_EQ(pages.remembered(), 3u);
  EXPECT_EQ(AnonHugeKb(data), 3 * 2048);
  EXPECT_EQ(pages.Collapse(data, bytes), 0u);  // seen: not asked again
  EXPECT_EQ(pages.Collapse(data + page, page), 0u);
  for (size_t i = 0; i < mapped - static_cast<size_t>(aligned - base); ++i) {
    ASSERT_EQ(aligned[i], static_cast<char>(i * 7 + 3)) << "byte " << i;
  }
  munmap(base, mapped);
}

}  // namespace

// Every region is unlinked once all ranks mapped it: no tfhvd.* name is left in /dev/shm
// after the whole suite (checked around all tests, so a leak from any of them shows).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int names_before = CountShmNames();
  int rc = RUN_ALL_TESTS();
  const int names_after = CountShmNames();
  if (names_after != names_before) {
    std::fprintf(stderr, "shm names left in /dev/shm: %d before, %d after\n", names_before,
                 names_after);
    return 1;
  }
  return rc;
}
