// Tests of the allreduce algorithms, the link collectives and the selection
// table, with threads as ranks over in-memory links. Checks: exact sums for
// integers, the same bits on every rank for floats (and the gather's rank-
// order reduction), every table row. GoogleTest: bazel test //:algorithms_test
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/algorithms/adasum_allreduce.h"
#include "cc/common/algorithms/gather_allreduce.h"
#include "cc/common/algorithms/algorithm_counts.h"
#include "cc/common/algorithms/allgather_runner.h"
#include "cc/common/algorithms/hierarchical_allgather.h"
#include "cc/common/algorithms/hierarchical_allreduce.h"
#include "cc/common/algorithms/topology_links.h"
#include "cc/common/half.h"
#include "cc/common/transport/link_collectives.h"
#include "cc/common/algorithms/ring_allreduce.h"
#include "cc/common/algorithms/selection.h"
#include "cc/common/kernels/reduce_kernels.h"
#include "tests/unit/cc/thread_links.h"

using namespace tfhvd;

namespace {

// Threads as ranks over in-memory links (thread_links.h).
void OnRanks(int n, const std::function<void(Links&)>& body, bool eager = false) {
  tfhvd::testing::OnThreadRanks(n, body, eager);
}

float Value(int rank, size_t i) { return 0.1f * static_cast<float>(rank + 1) + 1e-3f * (i % 97); }

template <typename Algorithm>
void TestAllreduce(const char* name, int n, size_t count, bool in_place, bool eager = false) {
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
  }, eager);
  bool same = true, exact = true;
  for (int r = 1; r < n; ++r)
    same &= std::memcmp(outputs[0].data(), outputs[static_cast<size_t>(r)].data(),
                        count * sizeof(float)) == 0;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      exact &= ints[static_cast<size_t>(r)][i] ==
               n * static_cast<int32_t>(i % 1000) + n * (n - 1) / 2;
  if (!same || !exact)
    std::fprintf(stderr, "%s n=%d count=%zu in_place=%d eager=%d\n", name, n, count, in_place,
                 eager);
  EXPECT_TRUE(same);
  EXPECT_TRUE(exact);
}

void TestGatherReducesInRankOrder() {
  const int n = 3;
  const size_t count = 1000;
  std::vector<float> result(count);
  // The ranks' inputs as they computed them: Value's multiply-add may be fused in one place and
  // not in another (aarch64 has FMA, and clang contracts a * b + c by default).
  std::vector<std::vector<float>> inputs(static_cast<size_t>(n));
  OnRanks(n, [&](Links& links) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = Value(links.rank(), i);
    inputs[static_cast<size_t>(links.rank())] = in;
    GatherAllreduce gather;
    EXPECT_TRUE(gather.Run(links, in.data(), in.data(), count, DataType::FLOAT32, ReduceOp::SUM).ok());
    if (links.rank() == 0) result = in;
  });
  bool ordered = true;
  for (size_t i = 0; i < count; ++i) {
    float acc = inputs[0][i] + inputs[1][i];
    acc = acc + inputs[2][i];
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
  Parameters k;  // shared memory at every size on one host; else gather up to 256 KiB
  AllreduceCase c;
  c.ranks = 2;
  c.one_host = true;
  c.shm_ready = true;
  c.bytes = 4;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::SHARED_MEMORY);
  k.shm_min_bytes = 256 * 1024;  // below it: the gather (Gloo), MPI's own (MPI)
  c.bytes = 4096;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::GATHER);
  c.bytes = 256 * 1024 - 4;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::GATHER);
  c.bytes = 256 * 1024;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::SHARED_MEMORY);
  c.one_host = false;  // several hosts: the gather up to 256 KiB, then the ring
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::GATHER);
  c.bytes = 256 * 1024 + 4;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::RING);
  c.one_host = true;
  c.shm_ready = false;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::RING);
  c.backend_allreduce = true;  // MPI: its own allreduce, shared memory where it is mapped
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::BACKEND);
  c.bytes = 4096;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::BACKEND);
  c.shm_ready = true;
  EXPECT_TRUE(SelectAllreduce(c, k) == AllreduceAlgorithm::BACKEND);
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

// Links whose StartExchange puts the message on the wire at once: pieces of
// the next step go out while this one's are reduced, as over TCP; chunks
// smaller than n elements, pieces that do not divide a chunk evenly.
TEST(Allreduce, RingPipelinedPiecesGiveExactSumsAndTheSameBits) {
  for (int n : {2, 3, 5}) {
    const size_t uneven = static_cast<size_t>(n) * (3 * 16384 + 5) + 3;  // 3 pieces of a chunk
    for (size_t count : {size_t{1}, static_cast<size_t>(n - 1), size_t{7}, uneven}) {
      TestAllreduce<RingAllreduce>("ring eager", n, count, false, true);
      TestAllreduce<RingAllreduce>("ring eager", n, count, true, true);
    }
  }
  TestAllreduce<RingAllreduce>("ring eager", 3, (size_t{3} << 20) + 5, true, true);
}

TEST(Allreduce, RingPiecesPerChunk) {
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(1, 3, 4), 1u);          // one element
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(1000, 2, 4), 1u);       // 2000 B a chunk
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(2 * 50000, 2, 4), 3u);  // 200 KB: 3 small pieces
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(2 * 32768, 2, 4), 2u);  // 128 KiB: 2 of 64 KiB
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(3 * 262145, 3, 4), 3u);  // 1 MiB + 4 B
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(int64_t{16} << 20, 8, 4), 8u);  // 64 MiB, 8 ranks
  EXPECT_EQ(RingAllreduce::PiecesPerChunk((int64_t{16} << 20) + 1, 8, 4), 9u);
  EXPECT_EQ(RingAllreduce::PiecesPerChunk(2, 3, 1), 1u);  // fewer elements than ranks
}

// Small integers, exact in every type and in any order of combination.
double RingValue(ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::PRODUCT) return static_cast<double>(1 + (i + static_cast<size_t>(rank)) % 2);
  return static_cast<double>((i * 7 + static_cast<size_t>(rank) * 3) % 5);
}

void PutValue(DataType dtype, void* buf, size_t i, double v) {
  switch (dtype) {
    case DataType::UINT8: case DataType::BOOL: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DataType::INT8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DataType::UINT16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(v); break;
    case DataType::INT16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); break;
    case DataType::INT32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::INT64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::FLOAT16: static_cast<uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DataType::BFLOAT16: static_cast<uint16_t*>(buf)[i] = FloatToBFloat16(static_cast<float>(v)); break;
    case DataType::FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::FLOAT64: static_cast<double*>(buf)[i] = v; break;
  }
}

double GetValue(DataType dtype, const void* buf, size_t i) {
  switch (dtype) {
    case DataType::UINT8: case DataType::BOOL: return static_cast<const uint8_t*>(buf)[i];
    case DataType::INT8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UINT16: return static_cast<const uint16_t*>(buf)[i];
    case DataType::INT16: return static_cast<const int16_t*>(buf)[i];
    case DataType::INT32: return static_cast<const int32_t*>(buf)[i];
    case DataType::INT64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::FLOAT16: return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::BFLOAT16: return BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::FLOAT32: return static_cast<const float*>(buf)[i];
    case DataType::FLOAT64: return static_cast<const double*>(buf)[i];
  }
  return 0;
}

// Every dtype and op through the pipelined ring: exact results and the same
// bytes on every rank, with counts below n and pieces that do not divide a
// chunk evenly.
TEST(Allreduce, RingEveryDtypeAndOp) {
  const DataType dtypes[] = {DataType::UINT8, DataType::INT8, DataType::UINT16, DataType::INT16,
                             DataType::INT32, DataType::INT64, DataType::FLOAT16,
                             DataType::BFLOAT16, DataType::FLOAT32, DataType::FLOAT64,
                             DataType::BOOL};
  const ReduceOp ops[] = {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MIN, ReduceOp::MAX,
                          ReduceOp::PRODUCT};
  const int n = 3;
  for (DataType dtype : dtypes) {
    const size_t elem = DataTypeSize(dtype);
    for (ReduceOp op : ops) {
      for (size_t count : {size_t{2}, size_t{1001}, 3 * (3 * (65536 / elem) + 7) + 1}) {
        for (bool eager : {false, true}) {
          std::vector<std::string> results(n);
          OnRanks(n, [&](Links& links) {
            const int r = links.rank();
            std::string buf(count * elem, '\0');
            for (size_t i = 0; i < count; ++i) PutValue(dtype, &buf[0], i, RingValue(op, r, i));
            RingAllreduce ring;
            Status s = ring.Run(links, buf.data(), &buf[0], static_cast<int64_t>(count), dtype, op);
            EXPECT_TRUE(s.ok()) << s.message();
            results[static_cast<size_t>(r)] = buf;
          }, eager);
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            double want = RingValue(op, 0, i);
            for (int r = 1; r < n; ++r) {
              double v = RingValue(op, r, i);
              if (op == ReduceOp::SUM || op == ReduceOp::AVERAGE) want += v;
              if (op == ReduceOp::MIN) want = std::min(want, v);
              if (op == ReduceOp::MAX) want = std::max(want, v);
              if (op == ReduceOp::PRODUCT) want *= v;
            }
            wrong += GetValue(dtype, results[0].data(), i) != want;
          }
          EXPECT_EQ(wrong, 0u) << DataTypeName(dtype) << " " << ReduceOpName(op) << " count "
                               << count << " eager " << eager;
          EXPECT_TRUE(results[1] == results[0] && results[2] == results[0])
              << DataTypeName(dtype) << " " << ReduceOpName(op) << " count " << count;
        }
      }
    }
  }
}

// The ring's reduce-scatter over the caller's slices (a reducescatter's
// rows: uneven, empty for some ranks, pieces that do not divide a slice):
// each rank's slice holds the exact sum, the same bytes the allreduce gives.
TEST(ReduceScatter, RingSlicesHoldTheExactSumOnTheirRank) {
  const DataType dtypes[] = {DataType::INT32, DataType::FLOAT16, DataType::FLOAT64};
  for (int n : {2, 3, 5}) {
    for (int64_t rows : {int64_t{1}, int64_t{n - 1}, int64_t{7}, int64_t{3 * 65536 + 5}}) {
      for (int64_t row_elems : {int64_t{1}, int64_t{3}}) {
        for (DataType dtype : dtypes) {
          for (bool eager : {false, true}) {
            const size_t elem = DataTypeSize(dtype);
            const RowSplit split{rows, n};
            std::vector<int64_t> first(static_cast<size_t>(n)), counts(static_cast<size_t>(n));
            for (int q = 0; q < n; ++q) {
              first[static_cast<size_t>(q)] = split.first(q) * row_elems;
              counts[static_cast<size_t>(q)] = split.rows(q) * row_elems;
            }
            const size_t count = static_cast<size_t>(rows * row_elems);
            std::vector<size_t> wrong(static_cast<size_t>(n), 0);
            OnRanks(n, [&](Links& links) {
              const int r = links.rank();
              std::string in(count * elem, '\0'), out(count * elem, '\0');
              for (size_t i = 0; i < count; ++i)
                PutValue(dtype, &in[0], i, RingValue(ReduceOp::SUM, r, i));
              const std::string before = in;
              RingAllreduce ring;
              Status s = ring.ReduceScatter(links, in.data(), &out[0], first, counts, dtype,
                                            ReduceOp::SUM);
              EXPECT_TRUE(s.ok()) << s.message();
              EXPECT_TRUE(in == before) << "the input changed on rank " << r;
              const size_t lo = static_cast<size_t>(first[static_cast<size_t>(r)]);
              for (size_t i = lo; i < lo + static_cast<size_t>(counts[static_cast<size_t>(r)]);
                   ++i) {
                double want = 0;
                for (int q = 0; q < n; ++q) want += RingValue(ReduceOp::SUM, q, i);
                wrong[static_cast<size_t>(r)] += GetValue(dtype, out.data(), i) != want;
              }
            }, eager);
            for (int r = 0; r < n; ++r)
              EXPECT_EQ(wrong[static_cast<size_t>(r)], 0u)
                  << DataTypeName(dtype) << " n " << n << " rows " << rows << " x " << row_elems
                  << " rank " << r << " eager " << eager;
          }
        }
      }
    }
  }
}

TEST(ReduceScatter, RowSplitGivesTheFirstRanksTheExtraRows) {
  const RowSplit split{7, 3};
  EXPECT_EQ(split.rows(0), 3);
  EXPECT_EQ(split.rows(1), 2);
  EXPECT_EQ(split.rows(2), 2);
  EXPECT_EQ(split.first(0), 0);
  EXPECT_EQ(split.first(1), 3);
  EXPECT_EQ(split.first(2), 5);
  const RowSplit few{2, 4};
  EXPECT_EQ(few.rows(3), 0);
  EXPECT_EQ(few.first(3), 2);
}

// A failed transfer ends the ring with the links' own status (its peer too).
TEST(Allreduce, RingReturnsTheLinksErrorWithItsPeer) {
  class Failing : public Links {
   public:
    explicit Failing(Links* inner) : inner_(inner) {}
    int rank() const override { return inner_->rank(); }
    int size() const override { return inner_->size(); }
    Status Send(int to, const void* d, size_t b) override { return inner_->Send(to, d, b); }
    Status Recv(int from, void* d, size_t b) override { return inner_->Recv(from, d, b); }
    Status Exchange(int to, const void* s, size_t sb, int from, void* r, size_t rb) override {
      return inner_->Exchange(to, s, sb, from, r, rb);
    }
    Status StartExchange(int to, const void* s, size_t sb, int from, void* r,
                         size_t rb) override {
      return inner_->StartExchange(to, s, sb, from, r, rb);
    }
    Status FinishExchange() override {
      if (++finished_ == 4) {  // on every rank at once: nobody waits for a failed rank
        return Status::Unavailable("rank " + std::to_string((rank() + size() - 1) % size()) +
                                   " closed its connection").WithPeer((rank() + size() - 1) % size());
      }
      return inner_->FinishExchange();
    }
   private:
    Links* inner_;
    int finished_ = 0;
  };
  OnRanks(3, [&](Links& links) {
    Failing failing(&links);
    std::vector<float> v(3 * 200000, 1.0f);  // 3 pieces a chunk: the 4th exchange is in step 1
    RingAllreduce ring;
    Status s = ring.Run(failing, v.data(), v.data(), static_cast<int64_t>(v.size()),
                        DataType::FLOAT32, ReduceOp::SUM);
    const int prev = (links.rank() + 2) % 3;
    EXPECT_EQ(s.code(), Status::UNAVAILABLE);
    EXPECT_EQ(s.message(), "rank " + std::to_string(prev) + " closed its connection");
    EXPECT_EQ(s.peer(), prev);
  }, true);
}

// StartExchange / FinishExchange of Links' default: at most kMaxStarted
// started, errors of the exchange come back from FinishExchange and drop the
// rest.
TEST(Links, StartAndFinishExchange) {
  SelfLinks self;
  char byte = 0;
  Status s = self.FinishExchange();
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_EQ(s.message(), "FinishExchange without a started exchange");
  EXPECT_TRUE(self.StartExchange(1, &byte, 1, 1, &byte, 1).ok());
  EXPECT_TRUE(self.StartExchange(2, &byte, 1, 2, &byte, 1).ok());
  s = self.StartExchange(3, &byte, 1, 3, &byte, 1);
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_EQ(s.message(), "StartExchange: 2 exchanges are already started and not finished");
  s = self.FinishExchange();
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_EQ(s.message(), "no rank 1 in a job of one process");
  EXPECT_EQ(self.FinishExchange().code(), Status::PRECONDITION);  // the second was dropped
}

TEST(Allreduce, GatherReducesInRankOrder) { TestGatherReducesInRankOrder(); }

TEST(LinkCollectives, StringsBroadcastOrAndBarrier) { TestLinkCollectives(); }

TEST(Selection, EveryTableRow) { TestSelectionTable(); }

TEST(Selection, AllgatherTable) {
  Parameters k;
  AllgatherCase c;
  c.ranks = 4;
  c.hierarchical_ready = true;
  EXPECT_TRUE(SelectAllgather(c, k) == AllgatherAlgorithm::RING);  // knob off, Gloo
  c.backend_tuned = true;
  EXPECT_TRUE(SelectAllgather(c, k) == AllgatherAlgorithm::BACKEND);  // MPI
  k.hierarchical_allgather = true;
  EXPECT_TRUE(SelectAllgather(c, k) == AllgatherAlgorithm::HIERARCHICAL);
  c.hierarchical_ready = false;  // one host, or hosts with different numbers of ranks
  EXPECT_TRUE(SelectAllgather(c, k) == AllgatherAlgorithm::BACKEND);
  c.backend_tuned = false;
  EXPECT_TRUE(SelectAllgather(c, k) == AllgatherAlgorithm::RING);
  c.hierarchical_ready = true;
  c.ranks = 1;
  EXPECT_TRUE(SelectAllgather(c, k) == AllgatherAlgorithm::BACKEND);
  EXPECT_EQ(std::string(AllgatherAlgorithmName(AllgatherAlgorithm::HIERARCHICAL)),
            "hierarchical");
  EXPECT_EQ(std::string(AllgatherAlgorithmName(AllgatherAlgorithm::RING)), "ring");
  // One host with the shared-memory regions mapped, from HOROVOD_SHM_MIN_BYTES up.
  AllgatherCase one;
  one.ranks = 3;
  one.shm_ready = true;
  one.bytes = 4096;
  k.shm_min_bytes = 4096;
  EXPECT_TRUE(SelectAllgather(one, k) == AllgatherAlgorithm::SHARED_MEMORY);
  one.bytes = 4095;
  EXPECT_TRUE(SelectAllgather(one, k) == AllgatherAlgorithm::RING);
}

// The ring's allgather over uneven slices (a ragged allgather's blocks, some
// empty): every rank ends with every block at its place, byte for byte.
TEST(Allgather, RingSlicesReachEveryRankInPlace) {
  for (int n : {2, 3, 5}) {
    for (int64_t unit : {int64_t{1}, int64_t{3 * 65536 + 5}}) {
      for (bool eager : {false, true}) {
        std::vector<int64_t> first(static_cast<size_t>(n)), counts(static_cast<size_t>(n));
        int64_t total = 0;
        for (int q = 0; q < n; ++q) {
          first[static_cast<size_t>(q)] = total;
          counts[static_cast<size_t>(q)] = q == 1 ? 0 : unit * (q + 1);
          total += counts[static_cast<size_t>(q)];
        }
        std::string expected(static_cast<size_t>(total), '\0');
        for (int64_t i = 0; i < total; ++i) expected[static_cast<size_t>(i)] = static_cast<char>(i * 7 + 3);
        std::vector<std::string> got(static_cast<size_t>(n));
        OnRanks(n, [&](Links& links) {
          const size_t q = static_cast<size_t>(links.rank());
          std::string out(static_cast<size_t>(total), '?');
          std::memcpy(&out[static_cast<size_t>(first[q])], expected.data() + first[q],
                      static_cast<size_t>(counts[q]));
          RingAllreduce ring;
          Status s = ring.Allgather(links, &out[0], first, counts, DataType::UINT8);
          EXPECT_TRUE(s.ok()) << s.message();
          got[q] = out;
        }, eager);
        for (int q = 0; q < n; ++q)
          EXPECT_TRUE(got[static_cast<size_t>(q)] == expected)
              << "n " << n << " unit " << unit << " rank " << q << " eager " << eager;
      }
    }
  }
}

// --- Adasum: against the formula in double precision -------------------------------
std::vector<double> AdasumPair(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  double ca = aa > 0 ? 1 - dot / (2 * aa) : 1, cb = bb > 0 ? 1 - dot / (2 * bb) : 1;
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = ca * a[i] + cb * b[i];
  return r;
}

// Rank r's tensor t, element i.
double AdasumInput(int r, size_t i) {
  return std::sin(0.37 * static_cast<double>(i + 1) * (r + 1)) + 0.25 * (r % 3) - 0.1;
}

// Runs Adasum on n thread-ranks over two fused tensors (counts c0, c1) of
// dtype; checks the same bits everywhere and the tree of pairwise Adasums
// within rel_tol.
template <typename T>
void TestAdasum(int n, DataType dtype, size_t c0, size_t c1, double tol) {
  const size_t count = c0 + c1;
  auto load = [&](const T& v) -> double {
    if (dtype == DataType::FLOAT16) {
      uint16_t h;
      std::memcpy(&h, &v, 2);
      return HalfToFloat(h);
    }
    return static_cast<double>(v);
  };
  auto store = [&](double v) -> T {
    T out{};
    if (dtype == DataType::FLOAT16) {
      uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(&out, &h, 2);
    } else {
      out = static_cast<T>(v);
    }
    return out;
  };
  std::vector<std::vector<T>> outs(static_cast<size_t>(n));
  OnRanks(n, [&](Links& links) {
    const int r = links.rank();
    std::vector<T> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = store(AdasumInput(r, i));
    AdasumAllreduce adasum;
    Status s = adasum.Run(links, buf.data(), buf.data(), static_cast<int64_t>(count), dtype,
                          {static_cast<int64_t>(c0), static_cast<int64_t>(c1)});
    EXPECT_TRUE(s.ok()) << s.message();
    outs[static_cast<size_t>(r)] = buf;
  });
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[static_cast<size_t>(r)].data(), count * sizeof(T)));
  for (size_t part = 0; part < 2; ++part) {
    size_t lo = part == 0 ? 0 : c0, hi = part == 0 ? c0 : count;
    std::vector<std::vector<double>> level;
    for (int r = 0; r < n; ++r) {
      std::vector<double> v;
      for (size_t i = lo; i < hi; ++i) v.push_back(load(store(AdasumInput(r, i))));
      level.push_back(v);
    }
    while (level.size() > 1) {
      std::vector<std::vector<double>> next;
      for (size_t k = 0; k < level.size(); k += 2) next.push_back(AdasumPair(level[k], level[k + 1]));
      level = next;
    }
    for (size_t i = lo; i < hi; ++i) {
      double want = level[0][i - lo], got = load(outs[0][i]);
      EXPECT_NEAR(got, want, tol * (1 + std::fabs(want))) << "n=" << n << " element " << i;
    }
  }
}

TEST(Adasum, MatchesTheFormulaTensorByTensorWithTheSameBitsEverywhere) {
  for (int n : {1, 2, 4, 8}) {
    TestAdasum<float>(n, DataType::FLOAT32, 1000, 37, 1e-5);
    TestAdasum<double>(n, DataType::FLOAT64, 5, 1, 1e-12);
    TestAdasum<uint16_t>(n, DataType::FLOAT16, 300, 3, 4e-3);
  }
  TestAdasum<float>(4, DataType::FLOAT32, 2, 1, 1e-5);  // fewer elements than ranks
}

TEST(Adasum, ZeroVectorsAndUnsupportedCases) {
  // Adasum(a, 0) = a: a joined rank's zeros leave the others' gradient alone.
  OnRanks(2, [&](Links& links) {
    std::vector<float> v(10, links.rank() == 0 ? 1.5f : 0.0f);
    AdasumAllreduce adasum;
    EXPECT_TRUE(adasum.Run(links, v.data(), v.data(), 10, DataType::FLOAT32, {}).ok());
    for (float x : v) EXPECT_EQ(x, 1.5f);
  });
  OnRanks(3, [&](Links& links) {
    std::vector<float> v(4, 1.0f);
    AdasumAllreduce adasum;
    Status s = adasum.Run(links, v.data(), v.data(), 4, DataType::FLOAT32, {});
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("power-of-two number of ranks"), std::string::npos);
    EXPECT_NE(s.message().find("this job has 3"), std::string::npos);
  });
  EXPECT_NE(AdasumAllreduce::Unsupported(2, DataType::INT32).find("not int32"), std::string::npos);
}

// --- topology link sets and the hierarchical allreduce --------------------------------
TEST(Topology, MembersOfLocalAndCrossSets) {
  // ranks 0,1,2 on host 0; 3 on host 1 (uneven); rank 1's sets.
  std::vector<std::pair<int, int>> places = {{0, 0}, {0, 1}, {0, 2}, {1, 0}};
  std::vector<int> local, cross;
  bool homogeneous = true;
  EXPECT_TRUE(TopologyMembers(places, 3, &local, &cross, &homogeneous).ok());
  EXPECT_EQ(local, std::vector<int>({3}));
  EXPECT_EQ(cross, std::vector<int>({0, 3}));
  EXPECT_FALSE(homogeneous);
  places = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};  // interleaved hosts
  EXPECT_TRUE(TopologyMembers(places, 2, &local, &cross, &homogeneous).ok());
  EXPECT_EQ(local, std::vector<int>({0, 2}));
  EXPECT_EQ(cross, std::vector<int>({2, 3}));
  EXPECT_TRUE(homogeneous);
  places = {{0, 0}, {0, 0}};
  Status s = TopologyMembers(places, 0, &local, &cross, &homogeneous);
  EXPECT_NE(s.message().find("ranks 0 and 1 both claim local rank 0"), std::string::npos);
}

// hosts x per_host thread-ranks; host_major: ranks 0..per_host-1 on host 0,
// else round-robin. Checks exact integer sums, the same float bits on every
// rank, and floats against the flat ring within rounding.
void TestHierarchical(int hosts, int per_host, bool host_major, size_t count) {
  const int n = hosts * per_host;
  std::vector<std::vector<float>> outs(static_cast<size_t>(n)), flat(static_cast<size_t>(n));
  OnRanks(n, [&](Links& links) {
    const int r = links.rank();
    Topology t;
    t.rank = r;
    t.size = n;
    t.cross_rank = host_major ? r / per_host : r % hosts;
    t.local_rank = host_major ? r % per_host : r / hosts;
    TopologyLinks topo;
    Status s = OpenTopologyLinks(
        links, t,
        [&](const std::vector<int>& m, std::unique_ptr<LinkSet>* out) {
          return MakeSubsetLinks(&links, m, out);
        },
        &topo);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(topo.homogeneous);
    EXPECT_EQ(topo.local->size(), per_host);
    EXPECT_EQ(topo.cross->size(), hosts);
    HierarchicalAllreduce h;
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = Value(r, i);
    for (int64_t gather_max : {int64_t{0}, int64_t{1} << 30}) {  // cross ring, cross gather
      s = h.Run(*topo.local, *topo.cross, nullptr, gather_max, in.data(), out.data(),
                static_cast<int64_t>(count), DataType::FLOAT32, ReduceOp::SUM);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    outs[static_cast<size_t>(r)] = out;
    std::vector<int32_t> iv(count);
    for (size_t i = 0; i < count; ++i) iv[i] = static_cast<int32_t>(i % 1000) * (r + 1);
    s = h.Run(*topo.local, *topo.cross, nullptr, 1 << 20, iv.data(), iv.data(),
              static_cast<int64_t>(count), DataType::INT32, ReduceOp::SUM);
    EXPECT_TRUE(s.ok());
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ(iv[i], static_cast<int32_t>(i % 1000) * n * (n + 1) / 2) << "element " << i;
    RingAllreduce ring;
    std::vector<float> f(count);
    EXPECT_TRUE(ring.Run(links, in.data(), f.data(), static_cast<int64_t>(count),
                         DataType::FLOAT32, ReduceOp::SUM).ok());
    flat[static_cast<size_t>(r)] = f;
  });
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[static_cast<size_t>(r)].data(),
                             count * sizeof(float)));
  for (size_t i = 0; i < count; ++i) EXPECT_NEAR(outs[0][i], flat[0][i], 1e-5f * n);
}

TEST(Topology, HostGrid) {
  std::vector<std::vector<int>> hosts;
  // host of rank r: 1,0,1,0 (cross ranks need not start with rank 0's host)
  EXPECT_TRUE(TopologyHosts({{1, 0}, {0, 0}, {1, 1}, {0, 1}}, &hosts).ok());
  EXPECT_EQ(hosts, std::vector<std::vector<int>>({{1, 3}, {0, 2}}));
  Status s = TopologyHosts({{0, 0}, {0, 2}}, &hosts);
  EXPECT_NE(s.message().find("the local ranks on host (cross rank) 0 are not 0..1"),
            std::string::npos);
}

// The host (cross rank) and local rank of every rank, for a layout.
std::vector<std::pair<int, int>> Layout(int hosts, int per_host, const std::string& how) {
  const int n = hosts * per_host;
  std::vector<int> host_of(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (how == "host-major") host_of[static_cast<size_t>(r)] = r / per_host;
    if (how == "interleaved") host_of[static_cast<size_t>(r)] = r % hosts;
  }
  // Neither: rank 0 not on the first host, a host's ranks neither adjacent
  // nor evenly spaced.
  if (how == "scrambled" && hosts == 2 && per_host == 2) host_of = {1, 0, 0, 1};
  if (how == "scrambled" && hosts == 3 && per_host == 2) host_of = {2, 0, 1, 1, 2, 0};
  if (how == "scrambled" && hosts == 2 && per_host == 3) host_of = {1, 0, 0, 1, 1, 0};
  std::vector<std::pair<int, int>> places(static_cast<size_t>(n));
  std::vector<int> next(static_cast<size_t>(hosts), 0);
  for (int r = 0; r < n; ++r) {
    const int h = host_of[static_cast<size_t>(r)];
    places[static_cast<size_t>(r)] = {h, next[static_cast<size_t>(h)]++};
  }
  return places;
}

// Rank r's block in allgather `round`: ragged (rank 1 empty in round 0), bytes
// that say whose they are and where.
std::string AllgatherBlock(int r, int round) {
  const size_t rows = round == 0 ? (r == 1 ? 0 : static_cast<size_t>(r) + 1)
                                 : static_cast<size_t>((r * 5 + round) % 4) * 1000 + 3;
  std::string b(rows * 6, '\0');
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(r * 31 + i * 7 + round);
  return b;
}

// hosts x per_host thread-ranks in a layout: the hierarchical allgather's
// output is byte for byte the blocks in rank order (what the flat allgather
// gives) on every rank, for ragged blocks, through the runner and directly.
void TestHierarchicalAllgather(int hosts, int per_host, const std::string& how) {
  const int n = hosts * per_host;
  const auto places = Layout(hosts, per_host, how);
  OnRanks(n, [&](Links& links) {
    const int r = links.rank();
    Topology t;
    t.rank = r;
    t.size = n;
    t.cross_rank = places[static_cast<size_t>(r)].first;
    t.local_rank = places[static_cast<size_t>(r)].second;
    TopologyLinks topo;
    Status s = OpenTopologyLinks(
        links, t,
        [&](const std::vector<int>& m, std::unique_ptr<LinkSet>* out) {
          return MakeSubsetLinks(&links, m, out);
        },
        &topo);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(topo.homogeneous);
    ASSERT_EQ(topo.hosts.size(), static_cast<size_t>(hosts));
    Parameters knobs;
    knobs.hierarchical_allgather = true;
    AllgatherRunner runner(nullptr, knobs);  // never reaches the (absent) transport
    for (int round = 0; round < 3; ++round) {
      std::vector<int64_t> bytes(static_cast<size_t>(n));
      std::string expected;
      for (int q = 0; q < n; ++q) {
        bytes[static_cast<size_t>(q)] = static_cast<int64_t>(AllgatherBlock(q, round).size());
        expected += AllgatherBlock(q, round);
      }
      const std::string mine = AllgatherBlock(r, round);
      std::string out(expected.size() + 1, '?');
      s = round == 2 ? runner.Run(&topo, nullptr, mine.data(), &out[0], bytes)
                     : HierarchicalAllgather::Run(topo, mine.data(), &out[0], bytes);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(out.substr(0, expected.size()), expected)
          << how << " " << hosts << "x" << per_host << " rank " << r << " round " << round;
      EXPECT_EQ(out.back(), '?') << "wrote past the output";
    }
    std::vector<int64_t> wrong(static_cast<size_t>(n) + 1, 0);
    s = HierarchicalAllgather::Run(topo, nullptr, nullptr, wrong);
    EXPECT_NE(s.message().find(std::to_string(n + 1) + " block sizes for a job of " +
                               std::to_string(n) + " ranks"),
              std::string::npos);
  });
}

TEST(Hierarchical, AllgatherEqualsFlatByteForByte) {
  const uint64_t before = AlgorithmCounts()["allgather/hierarchical"];
  for (const char* how : {"host-major", "interleaved", "scrambled"}) {
    TestHierarchicalAllgather(2, 2, how);
    TestHierarchicalAllgather(3, 2, how);
    TestHierarchicalAllgather(2, 3, how);
  }
  TestHierarchicalAllgather(2, 1, "host-major");
  TestHierarchicalAllgather(1, 3, "host-major");
  // The runner counted its hierarchical runs (one per rank per layout).
  EXPECT_EQ(AlgorithmCounts()["allgather/hierarchical"] - before,
            uint64_t{3 * (4 + 6 + 6) + 2 + 3});
}

TEST(Hierarchical, AllgatherNeedsOpenLinkSets) {
  TopologyLinks none;
  Status s = HierarchicalAllgather::Run(none, nullptr, nullptr, {});
  EXPECT_NE(s.message().find("link sets are not open"), std::string::npos);
}

TEST(Hierarchical, AllreduceEqualsFlatWithTheSameBitsEverywhere) {
  for (size_t count : {size_t{1}, size_t{5}, size_t{1000}}) {
    TestHierarchical(2, 2, true, count);
    TestHierarchical(2, 2, false, count);
    TestHierarchical(3, 2, true, count);
    TestHierarchical(2, 3, false, count);
    TestHierarchical(2, 1, true, count);
    TestHierarchical(1, 3, true, count);
  }
}

}  // namespace
