// Tests of the allreduce algorithms, the link collectives and the selection
// table, with threads as ranks over in-memory links. Checks: exact sums for
// integers, the same bits on every rank for floats (and the gather's rank-
// order reduction), every table row. GoogleTest: bazel test //:algorithms_test
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/algorithms/gather_allreduce.h"
#include "cc/common/algorithms/link_collectives.h"
#include "cc/common/algorithms/ring_allreduce.h"
#include "cc/common/algorithms/selection.h"
#include "cc/common/reduce_kernels.h"

using namespace tfhvd;

namespace {

// A message queue per ordered pair of ranks (empty transfers send nothing,
// as on real links); sends never block (unbounded),
// receives wait for the next message.
class Wires {
 public:
  explicit Wires(int n) : n_(n), streams_(static_cast<size_t>(n * n)) {}
  void Put(int from, int to, const char* p, size_t k) {
    std::lock_guard<std::mutex> lock(m_);
    streams_[static_cast<size_t>(from * n_ + to)].emplace_back(p, k);
    cv_.notify_all();
  }
  // Messages are taken whole: every test sends and receives the same sizes.
  void Take(int from, int to, char* p, size_t k) {
    std::unique_lock<std::mutex> lock(m_);
    auto& q = streams_[static_cast<size_t>(from * n_ + to)];
    cv_.wait(lock, [&] { return !q.empty(); });
    std::string m = std::move(q.front());
    q.pop_front();
    lock.unlock();
    if (m.size() != k) {
      std::fprintf(stderr, "rank %d sent %zu bytes to rank %d, which expected %zu\n", from,
                   m.size(), to, k);
      std::abort();
    }
    if (k > 0) std::memcpy(p, m.data(), k);
  }

 private:
  int n_;
  std::vector<std::deque<std::string>> streams_;
  std::mutex m_;
  std::condition_variable cv_;
};

class ThreadLinks : public Links {
 public:
  ThreadLinks(Wires* wires, int rank, int size) : wires_(wires), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Send(int to, const void* data, size_t bytes) override {
    if (to == rank_ || to < 0 || to >= size_) return Status::InvalidArgument("bad peer");
    if (bytes > 0) wires_->Put(rank_, to, static_cast<const char*>(data), bytes);
    return Status();
  }
  Status Recv(int from, void* data, size_t bytes) override {
    if (from == rank_ || from < 0 || from >= size_) return Status::InvalidArgument("bad peer");
    if (bytes > 0) wires_->Take(from, rank_, static_cast<char*>(data), bytes);
    return Status();
  }
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override {
    Status s = Send(to, send, send_bytes);
    return s.ok() ? Recv(from, recv, recv_bytes) : s;
  }

 private:
  Wires* wires_;
  int rank_, size_;
};

// Runs body(links) on n threads, one per rank.
void OnRanks(int n, const std::function<void(Links&)>& body) {
  Wires wires(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadLinks links(&wires, r, n);
      body(links);
    });
  }
  for (auto& t : threads) t.join();
}

float Value(int rank, size_t i) { return 0.1f * static_cast<float>(rank + 1) + 1e-3f * (i % 97); }

template <typename Algorithm>
void TestAllreduce(const char* name, int n, size_t count, bool in_place) {
  if (std::getenv("ALGORITHMS_TEST_VERBOSE")) std::fprintf(stderr, "%s n=%d count=%zu\n", name, n, count);
  std::vector<std::vector<float>> outputs(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> ints(static_cast<size_t>(n));
  OnRanks(n, [&](Links& links) {
    const int r = links.rank();
    Algorithm algorithm;
    std::vector<float> in(count), out(count, -1.0f);
    for (size_t i = 0; i < count; ++i) in[i] = Value(r, i);
    float* dst = in_place ? in.data() : out.data();
    Status s = algorithm.Run(links, in.data(), dst, static_cast<int64_t>(count),
                             DataType::FLOAT32, ReduceOp::SUM);
    EXPECT_TRUE(s.ok());
    outputs[static_cast<size_t>(r)].assign(dst, dst + count);
    std::vector<int32_t> iv(count);
    for (size_t i = 0; i < count; ++i) iv[i] = static_cast<int32_t>(i % 1000) + r;
    s = algorithm.Run(links, iv.data(), iv.data(), static_cast<int64_t>(count), DataType::INT32,
                      ReduceOp::SUM);
    EXPECT_TRUE(s.ok());
    ints[static_cast<size_t>(r)] = iv;
  });
  bool same = true, exact = true;
  for (int r = 1; r < n; ++r)
    same &= std::memcmp(outputs[0].data(), outputs[static_cast<size_t>(r)].data(),
                        count * sizeof(float)) == 0;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      exact &= ints[static_cast<size_t>(r)][i] ==
               n * static_cast<int32_t>(i % 1000) + n * (n - 1) / 2;
  if (!same || !exact)
    std::fprintf(stderr, "%s n=%d count=%zu in_place=%d\n", name, n, count, in_place);
  EXPECT_TRUE(same);
  EXPECT_TRUE(exact);
}

void TestGatherReducesInRankOrder() {
  const int n = 3;
  const size_t count = 1000;
  std::vector<float> result(count);
  OnRanks(n, [&](Links& links) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = Value(links.rank(), i);
    GatherAllreduce gather;
    EXPECT_TRUE(gather.Run(links, in.data(), in.data(), count, DataType::FLOAT32, ReduceOp::SUM).ok());
    if (links.rank() == 0) result = in;
  });
  bool ordered = true;
  for (size_t i = 0; i < count; ++i) {
    float acc = Value(0, i) + Value(1, i);
    acc = acc + Value(2, i);
    ordered &= acc == result[i];
  }
  EXPECT_TRUE(ordered);
}

void TestLinkCollectives() {
  const int n = 3;
  OnRanks(n, [&](Links& links) {
    const int r = links.rank();
    std::string mine(static_cast<size_t>(r) * 300000, static_cast<char>('a' + r));
    std::vector<std::string> all;
    EXPECT_TRUE(AllgatherStrings(links, mine, &all).ok());
    EXPECT_TRUE(all.size() == 3 && all[2] == std::string(600000, 'c') && all[0].empty());
    std::vector<std::string> gathered;
    EXPECT_TRUE(GatherStrings(links, "rank" + std::to_string(r), &gathered).ok());
    if (r == 0) EXPECT_TRUE(gathered.size() == 3 && gathered[1] == "rank1" && gathered[2] == "rank2");
    std::string data = r == 1 ? std::string("from one") : std::string();
    EXPECT_TRUE(BroadcastString(links, &data, 1).ok());
    EXPECT_TRUE(data == "from one");
    uint64_t words[2] = {uint64_t{1} << r, r == 2 ? uint64_t{8} : 0};
    std::vector<char> scratch;
    EXPECT_TRUE(BitwiseOrWords(links, words, 2, &scratch).ok());
    EXPECT_TRUE(words[0] == 7 && words[1] == 8);
    EXPECT_TRUE(LinksBarrier(links).ok());
  });
}

void TestSelectionTable() {
  Parameters k;  // gather up to 256 KiB, shared memory from 256 KiB
  AllreduceCase c;
  c.ranks = 2;
  c.one_host = true;
  c.shm_ready = true;
  c.bytes = 4096;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::GATHER);
  c.bytes = 256 * 1024;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::GATHER);
  c.bytes = 256 * 1024 + 4;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::SHARED_MEMORY);
  c.shm_ready = false;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::RING);
  c.backend_allreduce = true;  // MPI: its own allreduce, shared memory for large sizes
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::BACKEND);
  c.bytes = 4096;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::BACKEND);
  c.shm_ready = true;
  c.bytes = 1 << 20;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::SHARED_MEMORY);
  c.one_host = false;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::BACKEND);
  c.ranks = 1;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::COPY);
  c.ranks = 2;
  c.bytes = 0;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::COPY);
  EXPECT_TRUE(std::string(AllreduceAlgorithmName(AllreduceAlgorithm::RING)) == "ring");
}

TEST(Allreduce, GatherAndRingGiveExactSumsAndTheSameBitsOnEveryRank) {
  for (int n : {2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}, size_t{300001}}) {
      TestAllreduce<GatherAllreduce>("gather", n, count, false);
      TestAllreduce<RingAllreduce>("ring", n, count, false);
      TestAllreduce<RingAllreduce>("ring", n, count, true);
    }
  }
}

// Chunks larger than the ring's segment: several exchanges per step.
TEST(Allreduce, RingChunksLargerThanASegment) {
  TestAllreduce<RingAllreduce>("ring", 3, (size_t{3} << 20) + 5, false);
  TestAllreduce<RingAllreduce>("ring", 2, (size_t{3} << 20) + 5, true);
}

TEST(Allreduce, GatherReducesInRankOrder) { TestGatherReducesInRankOrder(); }

TEST(LinkCollectives, StringsBroadcastOrAndBarrier) { TestLinkCollectives(); }

TEST(Selection, EveryTableRow) { TestSelectionTable(); }

}  // namespace
