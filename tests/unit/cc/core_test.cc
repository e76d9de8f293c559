// Unit tests of the framework-free core: message encoding, validation
// messages, fusion planning, the response cache, the coordinator's join and
// readiness logic and stall shutdown, 16-bit float conversions and the reduction kernels.
// GoogleTest: bazel test //:core_test
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/negotiation/coordinator.h"
#include "cc/common/negotiation/fusion.h"
#include "cc/common/half.h"
#include "cc/common/knobs.h"
#include "cc/common/negotiation/message.h"
#include "cc/common/parameters.h"
#include "cc/common/kernels/reduce_kernels.h"
#include "cc/common/kernels/reduce_last_step.h"
#include "cc/common/negotiation/response_cache.h"
#include "cc/common/negotiation/tensor_queue.h"
#include "cc/common/negotiation/validation.h"

using namespace tfhvd;

namespace {

// EXPECT_PRED2(Contains, haystack, needle) prints both strings when it fails.
bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

Request MakeRequest(int rank, const std::string& name, Shape shape,
                    OpType type = OpType::ALLREDUCE, DataType dtype = DataType::FLOAT32) {
  Request q;
  q.rank = rank;
  q.name = name;
  q.shape = std::move(shape);
  q.type = type;
  q.dtype = dtype;
  return q;
}
TEST(Message, RequestAndResponseListsRoundTrip) {
  RequestList list;
  list.shutdown = true;
  list.requests.push_back(MakeRequest(2, "grad/dense:0", {4, 5}));
  list.requests[0].prescale = 0.5;
  list.requests[0].reduce_op = ReduceOp::MAX;
  RequestList parsed;
  ASSERT_TRUE(ParseRequestList(SerializeRequestList(list), &parsed));
  EXPECT_TRUE(parsed.shutdown);
  ASSERT_EQ(parsed.requests.size(), 1u);
  EXPECT_EQ(parsed.requests[0].name, "grad/dense:0");
  EXPECT_EQ(parsed.requests[0].shape, (Shape{4, 5}));
  EXPECT_EQ(parsed.requests[0].prescale, 0.5);
  EXPECT_EQ(parsed.requests[0].reduce_op, ReduceOp::MAX);
  EXPECT_EQ(parsed.requests[0].rank, 2);

  ResponseList responses;
  Response r;
  r.names = {"a", "b"};
  r.sizes = {3, 4};
  r.error = "boom";
  r.kind = Response::ERROR;
  responses.responses.push_back(r);
  ResponseList back;
  ASSERT_TRUE(ParseResponseList(SerializeResponseList(responses), &back));
  ASSERT_EQ(back.responses.size(), 1u);
  EXPECT_EQ(back.responses[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(back.responses[0].error, "boom");
  EXPECT_EQ(back.responses[0].kind, Response::ERROR);
}

TEST(Message, TruncatedInputIsRejected) {
  // Rejected rather than read past the end.
  ResponseList responses;
  Response r;
  r.names = {"a", "b"};
  r.sizes = {3, 4};
  responses.responses.push_back(r);
  std::string bytes = SerializeResponseList(responses);
  ResponseList back;
  EXPECT_FALSE(ParseResponseList(bytes.substr(0, bytes.size() - 3), &back));
}

Response Validate(const std::vector<Request>& reqs, int size = -1) {
  int n = size < 0 ? static_cast<int>(reqs.size()) : size;
  std::vector<bool> present(reqs.size(), true), joined(reqs.size(), false);
  return BuildResponse(reqs[0].name, reqs, present, joined, n);
}

TEST(Validation, MatchingRequestsGiveACacheableOperation) {
  Response ok = Validate({MakeRequest(0, "t", {2, 3}), MakeRequest(1, "t", {2, 3})});
  EXPECT_EQ(ok.kind, Response::OPERATION);
  EXPECT_EQ(ok.sizes, (std::vector<int64_t>{6}));
  EXPECT_TRUE(ok.cacheable);
}

TEST(Validation, MismatchMessagesNameTensorValuesAndRanks) {
  Response shape = Validate({MakeRequest(0, "grad_3", {4, 5}), MakeRequest(1, "grad_3", {4, 6}),
                             MakeRequest(2, "grad_3", {4, 5})});
  EXPECT_EQ(shape.kind, Response::ERROR);
  EXPECT_PRED2(Contains, shape.error, "tensor 'grad_3'");
  EXPECT_PRED2(Contains, shape.error, "shape [4,5] on ranks 0,2 but [4,6] on rank 1");

  Response dtype = Validate({MakeRequest(0, "d", {1}), MakeRequest(1, "d", {1}, OpType::ALLREDUCE,
                                                                   DataType::INT32)});
  EXPECT_PRED2(Contains, dtype.error, "dtype float32 on rank 0 but int32 on rank 1");

  Response op = Validate({MakeRequest(0, "o", {1}), MakeRequest(1, "o", {1}, OpType::ALLGATHER)});
  EXPECT_PRED2(Contains, op.error, "op allreduce on rank 0 but allgather on rank 1");

  auto r0 = MakeRequest(0, "r", {2});
  auto r1 = r0;
  r1.rank = 1;
  r1.reduce_op = ReduceOp::MAX;
  EXPECT_PRED2(Contains, Validate({r0, r1}).error, "reduce op Sum on rank 0 but Max on rank 1");
  r1 = r0;
  r1.rank = 1;
  r1.prescale = 2.0;
  EXPECT_PRED2(Contains, Validate({r0, r1}).error, "prescale_factor 1 on rank 0 but 2 on rank 1");

  auto b0 = MakeRequest(0, "b", {2}, OpType::BROADCAST);
  auto b1 = b0;
  b1.rank = 1;
  b1.root_rank = 1;
  EXPECT_PRED2(Contains, Validate({b0, b1}).error, "root_rank 0 on rank 0 but 1 on rank 1");
}

TEST(Validation, AllgatherFirstDimensionMayDifferTheRestMayNot) {
  Response gather = Validate({MakeRequest(0, "g", {2, 3}, OpType::ALLGATHER),
                              MakeRequest(1, "g", {5, 3}, OpType::ALLGATHER)});
  EXPECT_EQ(gather.kind, Response::OPERATION);
  EXPECT_EQ(gather.sizes, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(gather.row_elements, (std::vector<int64_t>{3}));
  Response trailing = Validate({MakeRequest(0, "g", {2, 3}, OpType::ALLGATHER),
                                MakeRequest(1, "g", {2, 4}, OpType::ALLGATHER)});
  EXPECT_PRED2(Contains, trailing.error, "trailing dimensions");
  EXPECT_PRED2(Contains, trailing.error, "[3] on rank 0 but [4] on rank 1");
  Response rank = Validate({MakeRequest(0, "g", {2, 3}, OpType::ALLGATHER),
                            MakeRequest(1, "g", {2}, OpType::ALLGATHER)});
  EXPECT_PRED2(Contains, rank.error, "rank (number of dimensions) 2 on rank 0 but 1 on rank 1");
}

TEST(Fusion, SameDtypeResponsesFuseUpToTheThreshold) {
  auto make = [](const std::string& name, int64_t n, DataType dtype) {
    Response r;
    r.type = OpType::ALLREDUCE;
    r.dtype = dtype;
    r.names = {name};
    r.sizes = {n};
    r.cacheable = true;
    return r;
  };
  std::vector<Response> in = {make("a", 10, DataType::FLOAT32), make("b", 10, DataType::FLOAT32),
                              make("c", 10, DataType::INT32), make("d", 100, DataType::INT32)};
  auto fused = FuseResponses(in, 1 << 20);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(fused[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(fused[0].sizes, (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(fused[1].names, (std::vector<std::string>{"c", "d"}));
  // The threshold bounds the fused bytes; 0 disables fusion.
  EXPECT_EQ(FuseResponses(in, 80).size(), 3u);
  EXPECT_EQ(FuseResponses(in, 0).size(), 4u);
  // A fused response splits back into per-tensor responses.
  Response second = SingleTensorResponse(fused[1], 1, 2);
  EXPECT_EQ(second.names, (std::vector<std::string>{"d"}));
  EXPECT_EQ(second.sizes, (std::vector<int64_t>{100}));
}

// GPU placement: sent with the messages, a response is on the GPU only when every rank's
// tensor is (else GPU tensors are staged through host memory), CPU and GPU never fuse.
TEST(GpuPlacement, RoundTripsAndIsOnTheGpuOnlyWhenEveryRankIs) {
  RequestList list;
  list.requests.push_back(MakeRequest(0, "g", {4}));
  list.requests[0].on_gpu = true;
  RequestList parsed;
  ASSERT_TRUE(ParseRequestList(SerializeRequestList(list), &parsed));
  EXPECT_TRUE(parsed.requests[0].on_gpu);
  ResponseList responses;
  Response r;
  r.names = {"g"};
  r.sizes = {4};
  r.on_gpu = true;
  responses.responses.push_back(r);
  ResponseList back;
  ASSERT_TRUE(ParseResponseList(SerializeResponseList(responses), &back));
  EXPECT_TRUE(back.responses[0].on_gpu);

  Request gpu0 = MakeRequest(0, "t", {2}), gpu1 = MakeRequest(1, "t", {2});
  gpu0.on_gpu = gpu1.on_gpu = true;
  EXPECT_TRUE(Validate({gpu0, gpu1}).on_gpu);
  Request cpu1 = MakeRequest(1, "t", {2});
  Response mixed = Validate({gpu0, cpu1});
  EXPECT_EQ(mixed.kind, Response::OPERATION);
  EXPECT_FALSE(mixed.on_gpu);

  Response a = Validate({gpu0, gpu1});
  Response b = Validate({MakeRequest(0, "u", {2}), MakeRequest(1, "u", {2})});
  Response c = a;
  c.names = {"v"};
  auto fused = FuseResponses({a, b, c}, 1 << 20);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(fused[0].names, (std::vector<std::string>{"t", "v"}));
  EXPECT_TRUE(fused[0].on_gpu);
  EXPECT_FALSE(fused[1].on_gpu);
}

TEST(ResponseCache, HitMissInvalidAndLeastRecentlyUsedEviction) {
  ResponseCache cache(2);
  Request a = MakeRequest(0, "a", {3});
  Request b = MakeRequest(0, "b", {3});
  Request c = MakeRequest(0, "c", {3});
  Response ra = Validate({a});
  uint32_t bit = 99;
  EXPECT_EQ(cache.Lookup(a, &bit), ResponseCache::State::MISS);
  cache.Put(ra, a);
  EXPECT_EQ(cache.Lookup(a, &bit), ResponseCache::State::HIT);
  uint32_t bit_a = bit;
  Request a_changed = a;
  a_changed.shape = {4};
  EXPECT_EQ(cache.Lookup(a_changed, &bit), ResponseCache::State::INVALID);
  EXPECT_EQ(bit, bit_a);
  cache.Put(Validate({b}), b);
  cache.Touch(bit_a);  // b is now the least recently used
  cache.Put(Validate({c}), c);
  EXPECT_EQ(cache.Lookup(b, &bit), ResponseCache::State::MISS);
  EXPECT_EQ(cache.Lookup(a, &bit), ResponseCache::State::HIT);
  EXPECT_EQ(cache.Lookup(c, &bit), ResponseCache::State::HIT);
  cache.Erase(bit);
  EXPECT_EQ(cache.Lookup(c, &bit), ResponseCache::State::MISS);
  EXPECT_EQ(cache.words(), 1u);
}

TEST(Coordinator, JoinedRankIsNotWaitedFor) {
  Parameters params;
  Coordinator coord(3, params);
  RequestList r0, r1, r2;
  r0.requests = {MakeRequest(0, "x", {2})};
  r1.requests = {MakeRequest(1, "x", {2})};
  coord.Add(r0);
  coord.Add(r1);
  EXPECT_TRUE(coord.TakeReadyResponses().empty());  // rank 2 has not sent x
  Request join = MakeRequest(2, "join.0", {}, OpType::JOIN);
  r2.requests = {join};
  coord.Add(r2);
  auto ready = coord.TakeReadyResponses();
  ASSERT_EQ(ready.size(), 1u);  // x proceeds without the joined rank
  EXPECT_EQ(ready[0].names[0], "x");
  EXPECT_FALSE(ready[0].cacheable);
  RequestList j0, j1;
  j0.requests = {MakeRequest(0, "join.0", {}, OpType::JOIN)};
  j1.requests = {MakeRequest(1, "join.0", {}, OpType::JOIN)};
  coord.Add(j1);
  EXPECT_TRUE(coord.TakeReadyResponses().empty());
  coord.Add(j0);
  ready = coord.TakeReadyResponses();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].type, OpType::JOIN);
  EXPECT_EQ(ready[0].last_joined_rank, 0);
  // After everyone joined, the next tensor needs all ranks again.
  coord.Add(r0);
  EXPECT_TRUE(coord.TakeReadyResponses().empty());
}

TEST(Coordinator, StallShutdownFailsEveryStalledTensorNamingTheMissingRank) {
  Parameters params;
  params.stall_warning_s = 0.01;
  params.stall_shutdown_s = 0.02;
  Coordinator coord(3, params);
  RequestList r0, r2;
  r0.requests = {MakeRequest(0, "x", {2}), MakeRequest(0, "y", {2})};
  r2.requests = {MakeRequest(2, "x", {2}), MakeRequest(2, "y", {2})};
  coord.Add(r0);
  coord.Add(r2);
  bool shutdown = false;
  EXPECT_TRUE(coord.TakeReadyResponses(&shutdown).empty());
  EXPECT_FALSE(shutdown);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // One error for every stalled tensor, naming the missing rank; the job ends.
  auto out = coord.TakeReadyResponses(&shutdown);
  EXPECT_TRUE(shutdown);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::ERROR);
  EXPECT_EQ(out[0].error_code, Status::ABORTED);
  EXPECT_EQ(out[0].names.size(), 2u);
  EXPECT_PRED2(Contains, out[0].error, "stall shutdown");
  EXPECT_PRED2(Contains, out[0].error, "tensor 'x' (allreduce)");
  EXPECT_PRED2(Contains, out[0].error, "tensor 'y'");
  EXPECT_PRED2(Contains, out[0].error, "submitted by ranks [0,2] but not yet by ranks [1]");
}

TEST(Half, EveryFiniteHalfRoundTripsThroughFloat) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00u) == 0x7C00u) continue;  // inf/nan
    if (FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))) != h) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

TEST(Half, RoundingOverflowAndSubnormals) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f)), 1.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(65520.0f))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(2049.0f)), 2048.0f);  // ties to even
  EXPECT_EQ(HalfToFloat(FloatToHalf(2051.0f)), 2052.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(5.96046448e-08f)), 5.96046448e-08f);  // smallest subnormal
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.0f)), 3.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(257.0f)), 256.0f);  // ties to even
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(259.0f)), 260.0f);
}

TEST(ReduceKernels, FloatOpsOutOfPlaceAndInPlace) {
  float a[5] = {1, -2, 3, 4, 5}, b[5] = {2, 2, -3, 0.5f, 5};
  float out[5];
  ReduceBuffers(DataType::FLOAT32, ReduceOp::SUM, out, a, b, 5);
  EXPECT_EQ(std::vector<float>(out, out + 5), (std::vector<float>{3, 0, 0, 4.5f, 10}));
  ReduceBuffers(DataType::FLOAT32, ReduceOp::MIN, out, a, b, 5);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{1, -2, -3}));
  ReduceBuffers(DataType::FLOAT32, ReduceOp::PRODUCT, out, a, b, 5);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], -4);
  EXPECT_EQ(out[4], 25);
  // In place (dst aliases a), as the transports call it.
  ReduceBuffers(DataType::FLOAT32, ReduceOp::MAX, a, a, b, 5);
  EXPECT_EQ(std::vector<float>(a, a + 3), (std::vector<float>{2, 2, 3}));
}

TEST(ReduceKernels, SixteenBitSumsRoundOnceInFloat) {
  // float16: 2048 + 1 is 2048 in half precision.
  uint16_t h1[2] = {FloatToHalf(2048.0f), FloatToHalf(1000.0f)};
  uint16_t h2[2] = {FloatToHalf(1.0f), FloatToHalf(24.0f)};
  ReduceBuffers(DataType::FLOAT16, ReduceOp::SUM, h1, h1, h2, 2);
  EXPECT_EQ(HalfToFloat(h1[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(h1[1]), 1024.0f);
  uint16_t bf1[1] = {FloatToBFloat16(100.0f)}, bf2[1] = {FloatToBFloat16(28.0f)};
  ReduceBuffers(DataType::BFLOAT16, ReduceOp::SUM, bf1, bf1, bf2, 1);
  EXPECT_EQ(BFloat16ToFloat(bf1[0]), 128.0f);
}

TEST(ReduceKernels, IntegersScalingAndIdentities) {
  int8_t i8[2] = {100, -100}, j8[2] = {27, -28};
  ReduceBuffers(DataType::INT8, ReduceOp::SUM, i8, i8, j8, 2);
  EXPECT_EQ(i8[0], 127);
  EXPECT_EQ(i8[1], -128);

  int32_t ints[3] = {7, -7, 6};
  DivideBuffer(DataType::INT32, ints, 3, 2);
  EXPECT_EQ(std::vector<int32_t>(ints, ints + 3), (std::vector<int32_t>{3, -3, 3}));  // toward zero
  double d[2] = {1.0, 3.0};
  ScaleBuffer(DataType::FLOAT64, d, 2, 0.5);
  EXPECT_EQ(d[0], 0.5);
  EXPECT_EQ(d[1], 1.5);

  float ident[2];
  FillIdentity(DataType::FLOAT32, ReduceOp::MIN, ident, 2);
  EXPECT_TRUE(std::isinf(ident[0]) && ident[0] > 0) << ident[0];
  int64_t iid[1];
  FillIdentity(DataType::INT64, ReduceOp::PRODUCT, iid, 1);
  EXPECT_EQ(iid[0], 1);
}

// Scale factors give Horovod's numbers: integers are multiplied in double and
// truncated toward zero; float16 in float32 with the factor rounded to float32
// (a double product rounded twice would give 0x434e below, not 0x434f).
TEST(ReduceKernels, ScalingMatchesHorovodElementByElement) {
  int32_t ints[4] = {7, -7, 5, 100};
  ScaleBuffer(DataType::INT32, ints, 4, 0.5);
  EXPECT_EQ(std::vector<int32_t>(ints, ints + 4), (std::vector<int32_t>{3, -3, 2, 50}));
  int8_t i8[3] = {3, -3, 10};
  ScaleBuffer(DataType::INT8, i8, 3, 2.6);
  EXPECT_EQ(std::vector<int8_t>(i8, i8 + 3), (std::vector<int8_t>{7, -7, 26}));
  uint8_t u8[2] = {9, 200};
  ScaleBuffer(DataType::UINT8, u8, 2, 1.0 / 3.0);
  EXPECT_EQ(u8[0], 3);  // 9 * (1/3) rounds to exactly 3.0 in double
  EXPECT_EQ(u8[1], 66);
  int64_t big[1] = {(int64_t{1} << 53) + 1};  // not representable in double
  ScaleBuffer(DataType::INT64, big, 1, 2.0);
  EXPECT_EQ(big[0], int64_t{1} << 54);
  uint16_t h[2] = {0x3d0a, 0x3d32};  // 1.26, 1.299
  ScaleBuffer(DataType::FLOAT16, h, 2, 2.9);
  EXPECT_EQ(h[0], 0x434f);
  EXPECT_EQ(h[1], 0x4389);
  float f[1] = {3.0f};
  ScaleBuffer(DataType::FLOAT32, f, 1, 0.1);
  EXPECT_EQ(f[0], static_cast<float>(0.1 * 3.0));
}

// The vectorised 16-bit paths must agree bit for bit with the scalar
// definition (widen, combine in float, round to nearest even once).
TEST(ReduceKernels, WideSixteenBitReductionsMatchScalar) {
  const size_t n = 1003;  // not a multiple of the vector width
  std::vector<uint16_t> a(n), b(n), out(n);
  uint32_t seed = 12345;
  auto next = [&seed] { seed = seed * 1664525u + 1013904223u; return seed; };
  for (int bf = 0; bf < 2; ++bf) {
    auto to_f = bf ? BFloat16ToFloat : HalfToFloat;
    auto from_f = bf ? FloatToBFloat16 : FloatToHalf;
    DataType dtype = bf ? DataType::BFLOAT16 : DataType::FLOAT16;
    for (size_t i = 0; i < n; ++i) {
      a[i] = from_f(static_cast<float>(static_cast<int32_t>(next() % 20000) - 10000) / 7.0f);
      b[i] = from_f(static_cast<float>(static_cast<int32_t>(next() % 20000) - 10000) / 3.0f);
    }
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX}) {
      ReduceBuffers(dtype, op, out.data(), a.data(), b.data(), n);
      int mismatches = 0;
      for (size_t i = 0; i < n; ++i) {
        float x = to_f(a[i]), y = to_f(b[i]);
        float r = op == ReduceOp::SUM ? x + y
                  : op == ReduceOp::PRODUCT ? x * y
                  : op == ReduceOp::MIN ? std::fmin(x, y) : std::fmax(x, y);
        mismatches += from_f(r) != out[i];
      }
      EXPECT_EQ(mismatches, 0) << (bf ? "bfloat16" : "float16") << " op " << static_cast<int>(op);
    }
  }
}


// The one-pass last step gives the bits of ReduceBuffers + ScaleBuffer + a copy,
// for every op, a factor float32 holds (0.5) and one it does not (1/3), lengths
// around the vector width, NaNs and signed zeros (min/max keep the first
// operand on ties and NaNs, as std::min/std::max do), in place and apart.
template <typename T>
void CheckLastStepMatchesThreeCalls(DataType dtype) {
  uint32_t seed = 777;
  auto next = [&seed] { seed = seed * 1664525u + 1013904223u; return seed; };
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{1003}}) {
    std::vector<T> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<T>(static_cast<int32_t>(next() % 20000) - 10000) / static_cast<T>(7);
      b[i] = static_cast<T>(static_cast<int32_t>(next() % 20000) - 10000) / static_cast<T>(3);
    }
    if (n > 8) {
      if constexpr (std::is_floating_point<T>::value) {
        a[2] = static_cast<T>(std::nan(""));
        b[3] = static_cast<T>(std::nan(""));
        a[4] = static_cast<T>(0.0);
        b[4] = -static_cast<T>(0.0);
      }
      b[5] = a[5];
    }
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::PRODUCT, ReduceOp::MIN,
                        ReduceOp::MAX}) {
      for (double factor : {1.0, 0.5, 1.0 / 3.0}) {
        std::vector<T> want(n), got(n), copy(n);
        ReduceBuffers(dtype, op, want.data(), a.data(), b.data(), n);
        ScaleBuffer(dtype, want.data(), n, factor);
        ReduceScaleStore(dtype, op, got.data(), copy.data(), a.data(), b.data(), n, factor);
        EXPECT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(T)), 0)
            << "n " << n << " op " << static_cast<int>(op) << " factor " << factor;
        EXPECT_EQ(std::memcmp(want.data(), copy.data(), n * sizeof(T)), 0)
            << "copy, n " << n << " op " << static_cast<int>(op) << " factor " << factor;
        // In place: the result over a, the copy over b.
        std::vector<T> x(a), y(b);
        ReduceScaleStore(dtype, op, x.data(), y.data(), x.data(), y.data(), n, factor);
        EXPECT_EQ(std::memcmp(want.data(), x.data(), n * sizeof(T)), 0) << "in place";
        EXPECT_EQ(std::memcmp(want.data(), y.data(), n * sizeof(T)), 0) << "in place copy";
      }
    }
  }
}

TEST(ReduceKernels, LastStepMatchesReduceScaleAndCopyBitForBit) {
  CheckLastStepMatchesThreeCalls<float>(DataType::FLOAT32);
  CheckLastStepMatchesThreeCalls<double>(DataType::FLOAT64);
  CheckLastStepMatchesThreeCalls<int32_t>(DataType::INT32);
  // No copy asked for: only dst is written.
  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, out[3] = {0, 0, 0};
  ReduceScaleStore(DataType::FLOAT32, ReduceOp::SUM, out, nullptr, a, b, 3, 0.5);
  EXPECT_EQ(out[0], 2.5f);
  EXPECT_EQ(out[2], 4.5f);
}

// The knob list: strict parsing, defaults and the values that follow others.
Status ParseEnv(const std::map<std::string, std::string>& env, Parameters* p) {
  return Parameters::FromLookup(
      [&env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      p);
}

TEST(Knobs, DefaultsAndValidValues) {
  Parameters p;
  ASSERT_TRUE(ParseEnv({}, &p).ok());
  EXPECT_EQ(p.fusion_threshold_bytes, 64 * 1024 * 1024);
  EXPECT_EQ(p.rank, -1);
  EXPECT_EQ(p.local_rank, -1);
  EXPECT_EQ(p.local_size, 1);
  EXPECT_TRUE(p.stall_check);
  EXPECT_EQ(p.log_level, "warning");
  EXPECT_TRUE(p.tf_threads);
  ASSERT_TRUE(ParseEnv({{"HOROVOD_RANK", "3"}, {"HOROVOD_SIZE", "4"},
                        {"HOROVOD_STALL_CHECK_DISABLE", "Yes"},
                        {"HOROVOD_GLOO_DIRECT_MAX_BYTES", "1048576"},
                        {"HOROVOD_CYCLE_TIME", " 0.25 "}, {"HOROVOD_LOG_LEVEL", "INFO"},
                        {"HOROVOD_TIMELINE", ""}},
                       &p)
                  .ok());
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.size, 4);
  EXPECT_EQ(p.local_rank, 3);
  EXPECT_EQ(p.local_size, 4);
  EXPECT_FALSE(p.stall_check);
  EXPECT_EQ(p.gloo_direct_max_bytes, 1048576);
  EXPECT_EQ(p.cycle_time_ms, 0.25);
  EXPECT_EQ(p.log_level, "info");
  EXPECT_TRUE(p.timeline_path.empty());
}

TEST(Knobs, MalformedValuesNameTheVariableAndValue) {
  Parameters p;
  Status s = ParseEnv({{"HOROVOD_GLOO_DIRECT_MAX_BYTES", "1M"}}, &p);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, s.message(),
               "HOROVOD_GLOO_DIRECT_MAX_BYTES='1M' is not a valid value: expected");
  for (const char* bad : {"abc", "-1", "1e3x", "inf", "nan", "0x10"}) {
    s = ParseEnv({{"HOROVOD_GLOO_TIMEOUT_SECONDS", bad}}, &p);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_PRED2(Contains, s.message(), std::string("'") + bad + "'");
  }
  s = ParseEnv({{"HOROVOD_CONTROLLER", "foo"}}, &p);
  EXPECT_PRED2(Contains, s.message(), "expected one of gloo, mpi");
  s = ParseEnv({{"HOROVOD_SHM_ALLREDUCE", "on"}}, &p);
  EXPECT_PRED2(Contains, s.message(), "one of 1, 0, true, false, yes, no");
  s = ParseEnv({{"HOROVOD_SHM_SLOT_BYTES", "4095"}}, &p);
  EXPECT_PRED2(Contains, s.message(), "from 4096 to 4294967296");
}

TEST(Knobs, EveryListedDefaultParsesToTheUnsetValue) {
  Parameters defaults, parsed;
  for (const KnobSpec& k : Knobs()) {
    if (k.default_text[0] == '(') continue;
    EXPECT_TRUE(ParseKnob(k, k.default_text, &parsed).ok()) << k.name;
    EXPECT_EQ(KnobValueText(k, parsed), KnobValueText(k, defaults)) << k.name;
  }
}

TEST(Knobs, UnknownHorovodVariablesAreListed) {
  char foo[] = "HOROVOD_FOO=1", rank[] = "HOROVOD_RANK=0", path[] = "PATH=/bin",
       bare[] = "HOROVOD_BAR";
  char* environ_like[] = {foo, rank, path, bare, nullptr};
  auto unknown = UnknownKnobs(environ_like);
  ASSERT_EQ(unknown.size(), 2u);
  EXPECT_EQ(unknown[0], "HOROVOD_BAR");
  EXPECT_EQ(unknown[1], "HOROVOD_FOO");
}

// Grouped allreduce: members negotiated, fused and failed as one group.
Request Member(int rank, const std::string& group, int i, int n, Shape shape,
               DataType dtype = DataType::FLOAT32) {
  Request q = MakeRequest(rank, group + "_" + std::to_string(i), std::move(shape),
                          OpType::ALLREDUCE, dtype);
  q.group = group;
  q.group_size = n;
  return q;
}

TEST(Groups, GroupFieldsRoundTrip) {
  RequestList list;
  list.requests.push_back(Member(1, "g", 2, 3, {4}));
  RequestList parsed;
  ASSERT_TRUE(ParseRequestList(SerializeRequestList(list), &parsed));
  ASSERT_EQ(parsed.requests.size(), 1u);
  EXPECT_EQ(parsed.requests[0].group, "g");
  EXPECT_EQ(parsed.requests[0].group_size, 3);
  EXPECT_EQ(parsed.requests[0].name, "g_2");
}

TEST(Groups, RunOnlyWhenEveryMemberIsReadyAndFusePerDtype) {
  Parameters params;
  Coordinator coord(2, params);
  // Rank 0 sends the whole group; rank 1 only one member so far (as if its
  // members reached the coordinator in different rounds): nothing runs.
  RequestList a0, a1, b1, c1;
  a0.requests = {Member(0, "g", 0, 3, {2}), Member(0, "g", 1, 3, {3}, DataType::FLOAT64),
                 Member(0, "g", 2, 3, {4})};
  a1.requests = {Member(1, "g", 0, 3, {2})};
  coord.Add(a0);
  coord.Add(a1);
  EXPECT_TRUE(coord.TakeReadyResponses().empty());
  b1.requests = {Member(1, "g", 1, 3, {3}, DataType::FLOAT64)};
  coord.Add(b1);
  EXPECT_TRUE(coord.TakeReadyResponses().empty());
  c1.requests = {Member(1, "g", 2, 3, {4})};
  coord.Add(c1);
  auto ready = coord.TakeReadyResponses();
  ASSERT_EQ(ready.size(), 3u);
  EXPECT_EQ(ready[0].names[0], "g_0");
  EXPECT_EQ(ready[1].names[0], "g_1");
  EXPECT_EQ(ready[2].names[0], "g_2");
  EXPECT_EQ(ready[0].kind, Response::OPERATION);
  // Fused: one response per dtype, the group's float32 members together.
  auto fused = FuseResponses(ready, 1 << 20);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(fused[0].names, (std::vector<std::string>{"g_0", "g_2"}));
}

TEST(Groups, DisableGroupFusionKeepsAGroupApartFromOtherTensors) {
  // HOROVOD_DISABLE_GROUP_FUSION: a group's members fuse with each other only.
  auto make = [](const std::string& name, const std::string& group) {
    Response r;
    r.names = {name};
    r.sizes = {4};
    r.group = group;
    return r;
  };
  std::vector<Response> in = {make("x", ""), make("g_0", "g"), make("y", ""), make("g_1", "g"),
                              make("h_0", "h")};
  auto mixed = FuseResponses(in, 1 << 20);
  ASSERT_EQ(mixed.size(), 1u);
  EXPECT_EQ(mixed[0].group, "");  // several groups fused: no single group
  auto apart = FuseResponses(in, 1 << 20, /*separate_groups=*/true);
  ASSERT_EQ(apart.size(), 3u);
  EXPECT_EQ(apart[0].names, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(apart[1].names, (std::vector<std::string>{"g_0", "g_1"}));
  EXPECT_EQ(apart[1].group, "g");
  EXPECT_EQ(apart[2].names, (std::vector<std::string>{"h_0"}));
  // The group travels in the response list (the cache keeps it for cached rounds).
  ResponseList list;
  list.responses = apart;
  ResponseList back;
  ASSERT_TRUE(ParseResponseList(SerializeResponseList(list), &back));
  EXPECT_EQ(back.responses[1].group, "g");
}

TEST(Groups, OneMismatchedMemberFailsTheWholeGroupOnce) {
  Parameters params;
  Coordinator coord(2, params);
  RequestList m0, m1;
  m0.requests = {Member(0, "h", 0, 2, {2}), Member(0, "h", 1, 2, {5})};
  m1.requests = {Member(1, "h", 0, 2, {2}), Member(1, "h", 1, 2, {6})};
  coord.Add(m0);
  coord.Add(m1);
  auto ready = coord.TakeReadyResponses();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::ERROR);
  EXPECT_EQ(ready[0].error_code, Status::PRECONDITION);  // FailedPreconditionError, as Horovod
  EXPECT_EQ(ready[0].names, (std::vector<std::string>{"h_0", "h_1"}));
  EXPECT_PRED2(Contains, ready[0].error, "grouped allreduce 'h'");
  EXPECT_PRED2(Contains, ready[0].error, "none of its tensors ran");
  EXPECT_PRED2(Contains, ready[0].error, "tensor 'h_1': mismatched shape");
  EXPECT_FALSE(coord.HasPending());
}

TEST(Groups, MemberInAGroupOnOneRankAndAloneOnAnother) {
  Parameters params;
  Coordinator coord(2, params);
  RequestList s0, s1;
  s0.requests = {Member(0, "k", 0, 1, {2})};
  s1.requests = {MakeRequest(1, "k_0", {2})};
  coord.Add(s0);
  coord.Add(s1);
  auto ready = coord.TakeReadyResponses();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::ERROR);
  EXPECT_PRED2(Contains, ready[0].error, "mismatched group");
}

TEST(TensorQueue, SameNameSubmissionsAreNegotiatedInOrder) {
  TensorQueue queue;
  std::vector<int> done;
  for (int i = 0; i < 3; ++i) {
    TensorTableEntry e;
    e.request = MakeRequest(0, "allreduce", {static_cast<int64_t>(i + 1)});
    e.callback = [&done, i](const Status&) { done.push_back(i); };
    ASSERT_TRUE(queue.Add(std::move(e)).ok());
  }
  // Only the head of a name is up for negotiation; taking it releases the next.
  std::vector<Request> fresh;
  queue.PopNewRequests(&fresh);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].shape, Shape{1});
  EXPECT_EQ(queue.size(), 3u);
  TensorTableEntry taken;
  ASSERT_TRUE(queue.Take("allreduce", &taken));
  EXPECT_EQ(taken.request.shape, Shape{1});
  fresh.clear();
  queue.PopNewRequests(&fresh);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].shape, Shape{2});
  queue.FailAll(Status::Aborted("stop"));
  EXPECT_EQ(done, (std::vector<int>{1, 2}));
  EXPECT_EQ(queue.size(), 0u);
}

}  // namespace
