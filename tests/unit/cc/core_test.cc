// Unit tests of the framework-free core: message encoding, validation
// messages, fusion planning, the response cache, the coordinator's join and
// readiness logic and stall shutdown, 16-bit float conversions and the reduction kernels.
// Prints "N passed, M failed" and exits non-zero on any failure.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cc/common/coordinator.h"
#include "cc/common/fusion.h"
#include "cc/common/half.h"
#include "cc/common/message.h"
#include "cc/common/parameters.h"
#include "cc/common/reduce_kernels.h"
#include "cc/common/response_cache.h"
#include "cc/common/tensor_queue.h"
#include "cc/common/validation.h"

using namespace tfhvd;

namespace {

int passed = 0, failed = 0;

#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (cond) {                                                            \
      ++passed;                                                            \
    } else {                                                               \
      ++failed;                                                            \
      std::fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

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

void TestMessageRoundTrip() {
  RequestList list;
  list.shutdown = true;
  list.requests.push_back(MakeRequest(2, "grad/dense:0", {4, 5}));
  list.requests[0].prescale = 0.5;
  list.requests[0].reduce_op = ReduceOp::MAX;
  RequestList parsed;
  EXPECT(ParseRequestList(SerializeRequestList(list), &parsed));
  EXPECT(parsed.shutdown);
  EXPECT(parsed.requests.size() == 1);
  EXPECT(parsed.requests[0].name == "grad/dense:0");
  EXPECT((parsed.requests[0].shape == Shape{4, 5}));
  EXPECT(parsed.requests[0].prescale == 0.5);
  EXPECT(parsed.requests[0].reduce_op == ReduceOp::MAX);
  EXPECT(parsed.requests[0].rank == 2);

  ResponseList responses;
  Response r;
  r.names = {"a", "b"};
  r.sizes = {3, 4};
  r.error = "boom";
  r.kind = Response::ERROR;
  responses.responses.push_back(r);
  ResponseList back;
  EXPECT(ParseResponseList(SerializeResponseList(responses), &back));
  EXPECT(back.responses.size() == 1);
  EXPECT((back.responses[0].names == std::vector<std::string>{"a", "b"}));
  EXPECT(back.responses[0].error == "boom");
  EXPECT(back.responses[0].kind == Response::ERROR);
  // Truncated input is rejected rather than read past the end.
  std::string bytes = SerializeResponseList(responses);
  EXPECT(!ParseResponseList(bytes.substr(0, bytes.size() - 3), &back));
}

Response Validate(const std::vector<Request>& reqs, int size = -1) {
  int n = size < 0 ? static_cast<int>(reqs.size()) : size;
  std::vector<bool> present(reqs.size(), true), joined(reqs.size(), false);
  return BuildResponse(reqs[0].name, reqs, present, joined, n);
}

void TestValidationMessages() {
  Response ok = Validate({MakeRequest(0, "t", {2, 3}), MakeRequest(1, "t", {2, 3})});
  EXPECT(ok.kind == Response::OPERATION);
  EXPECT((ok.sizes == std::vector<int64_t>{6}));
  EXPECT(ok.cacheable);

  Response shape = Validate({MakeRequest(0, "grad_3", {4, 5}), MakeRequest(1, "grad_3", {4, 6}),
                             MakeRequest(2, "grad_3", {4, 5})});
  EXPECT(shape.kind == Response::ERROR);
  EXPECT(Contains(shape.error, "tensor 'grad_3'"));
  EXPECT(Contains(shape.error, "shape [4,5] on ranks 0,2 but [4,6] on rank 1"));

  Response dtype = Validate({MakeRequest(0, "d", {1}), MakeRequest(1, "d", {1}, OpType::ALLREDUCE,
                                                                   DataType::INT32)});
  EXPECT(Contains(dtype.error, "dtype float32 on rank 0 but int32 on rank 1"));

  Response op = Validate({MakeRequest(0, "o", {1}), MakeRequest(1, "o", {1}, OpType::ALLGATHER)});
  EXPECT(Contains(op.error, "op allreduce on rank 0 but allgather on rank 1"));

  auto r0 = MakeRequest(0, "r", {2});
  auto r1 = r0;
  r1.rank = 1;
  r1.reduce_op = ReduceOp::MAX;
  EXPECT(Contains(Validate({r0, r1}).error, "reduce op Sum on rank 0 but Max on rank 1"));
  r1 = r0;
  r1.rank = 1;
  r1.prescale = 2.0;
  EXPECT(Contains(Validate({r0, r1}).error, "prescale_factor 1 on rank 0 but 2 on rank 1"));

  auto b0 = MakeRequest(0, "b", {2}, OpType::BROADCAST);
  auto b1 = b0;
  b1.rank = 1;
  b1.root_rank = 1;
  EXPECT(Contains(Validate({b0, b1}).error, "root_rank 0 on rank 0 but 1 on rank 1"));

  // Allgather: the first dimension may differ, the rest may not.
  Response gather = Validate({MakeRequest(0, "g", {2, 3}, OpType::ALLGATHER),
                              MakeRequest(1, "g", {5, 3}, OpType::ALLGATHER)});
  EXPECT(gather.kind == Response::OPERATION);
  EXPECT((gather.sizes == std::vector<int64_t>{2, 5}));
  EXPECT((gather.row_elements == std::vector<int64_t>{3}));
  Response trailing = Validate({MakeRequest(0, "g", {2, 3}, OpType::ALLGATHER),
                                MakeRequest(1, "g", {2, 4}, OpType::ALLGATHER)});
  EXPECT(Contains(trailing.error, "trailing dimensions"));
  EXPECT(Contains(trailing.error, "[3] on rank 0 but [4] on rank 1"));
  Response rank = Validate({MakeRequest(0, "g", {2, 3}, OpType::ALLGATHER),
                            MakeRequest(1, "g", {2}, OpType::ALLGATHER)});
  EXPECT(Contains(rank.error, "rank (number of dimensions) 2 on rank 0 but 1 on rank 1"));
}

void TestFusion() {
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
  EXPECT(fused.size() == 2);
  EXPECT((fused[0].names == std::vector<std::string>{"a", "b"}));
  EXPECT((fused[0].sizes == std::vector<int64_t>{10, 10}));
  EXPECT((fused[1].names == std::vector<std::string>{"c", "d"}));
  // The threshold bounds the fused bytes; 0 disables fusion.
  EXPECT(FuseResponses(in, 80).size() == 3);
  EXPECT(FuseResponses(in, 0).size() == 4);
  // A fused response splits back into per-tensor responses.
  Response second = SingleTensorResponse(fused[1], 1, 2);
  EXPECT((second.names == std::vector<std::string>{"d"}));
  EXPECT((second.sizes == std::vector<int64_t>{100}));
}

void TestResponseCache() {
  ResponseCache cache(2);
  Request a = MakeRequest(0, "a", {3});
  Request b = MakeRequest(0, "b", {3});
  Request c = MakeRequest(0, "c", {3});
  Response ra = Validate({a});
  uint32_t bit = 99;
  EXPECT(cache.Lookup(a, &bit) == ResponseCache::State::MISS);
  cache.Put(ra, a);
  EXPECT(cache.Lookup(a, &bit) == ResponseCache::State::HIT);
  uint32_t bit_a = bit;
  Request a_changed = a;
  a_changed.shape = {4};
  EXPECT(cache.Lookup(a_changed, &bit) == ResponseCache::State::INVALID);
  EXPECT(bit == bit_a);
  cache.Put(Validate({b}), b);
  cache.Touch(bit_a);  // b is now the least recently used
  cache.Put(Validate({c}), c);
  EXPECT(cache.Lookup(b, &bit) == ResponseCache::State::MISS);
  EXPECT(cache.Lookup(a, &bit) == ResponseCache::State::HIT);
  EXPECT(cache.Lookup(c, &bit) == ResponseCache::State::HIT);
  cache.Erase(bit);
  EXPECT(cache.Lookup(c, &bit) == ResponseCache::State::MISS);
  EXPECT(cache.words() == 1);
}

void TestCoordinatorJoin() {
  Parameters params;
  Coordinator coord(3, params);
  RequestList r0, r1, r2;
  r0.requests = {MakeRequest(0, "x", {2})};
  r1.requests = {MakeRequest(1, "x", {2})};
  coord.Add(r0);
  coord.Add(r1);
  EXPECT(coord.TakeReadyResponses().empty());  // rank 2 has not sent x
  Request join = MakeRequest(2, "join.0", {}, OpType::JOIN);
  r2.requests = {join};
  coord.Add(r2);
  auto ready = coord.TakeReadyResponses();
  EXPECT(ready.size() == 1);  // x proceeds without the joined rank
  EXPECT(ready.size() == 1 && ready[0].names[0] == "x" && !ready[0].cacheable);
  RequestList j0, j1;
  j0.requests = {MakeRequest(0, "join.0", {}, OpType::JOIN)};
  j1.requests = {MakeRequest(1, "join.0", {}, OpType::JOIN)};
  coord.Add(j1);
  EXPECT(coord.TakeReadyResponses().empty());
  coord.Add(j0);
  ready = coord.TakeReadyResponses();
  EXPECT(ready.size() == 1 && ready[0].type == OpType::JOIN && ready[0].last_joined_rank == 0);
  // After everyone joined, the next tensor needs all ranks again.
  coord.Add(r0);
  EXPECT(coord.TakeReadyResponses().empty());
}

void TestCoordinatorStallShutdown() {
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
  EXPECT(coord.TakeReadyResponses(&shutdown).empty() && !shutdown);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // One error for every stalled tensor, naming the missing rank; the job ends.
  auto out = coord.TakeReadyResponses(&shutdown);
  EXPECT(shutdown);
  EXPECT(out.size() == 1 && out[0].kind == Response::ERROR &&
         out[0].error_code == Status::ABORTED && out[0].names.size() == 2);
  EXPECT(!out.empty() && Contains(out[0].error, "stall shutdown") &&
         Contains(out[0].error, "tensor 'x' (allreduce)") && Contains(out[0].error, "tensor 'y'") &&
         Contains(out[0].error, "submitted by ranks [0,2] but not yet by ranks [1]"));
}

void TestHalfConversions() {
  // Every finite half converts to float and back unchanged.
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00u) == 0x7C00u) continue;  // inf/nan
    if (FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))) != h) ++bad;
  }
  EXPECT(bad == 0);
  EXPECT(HalfToFloat(FloatToHalf(1.0f)) == 1.0f);
  EXPECT(HalfToFloat(FloatToHalf(65504.0f)) == 65504.0f);
  EXPECT(std::isinf(HalfToFloat(FloatToHalf(65520.0f))));
  EXPECT(HalfToFloat(FloatToHalf(2049.0f)) == 2048.0f);  // ties to even
  EXPECT(HalfToFloat(FloatToHalf(2051.0f)) == 2052.0f);
  EXPECT(HalfToFloat(FloatToHalf(5.96046448e-08f)) == 5.96046448e-08f);  // smallest subnormal
  EXPECT(BFloat16ToFloat(FloatToBFloat16(3.0f)) == 3.0f);
  EXPECT(BFloat16ToFloat(FloatToBFloat16(257.0f)) == 256.0f);  // ties to even
  EXPECT(BFloat16ToFloat(FloatToBFloat16(259.0f)) == 260.0f);
}

void TestReduceKernels() {
  float a[5] = {1, -2, 3, 4, 5}, b[5] = {2, 2, -3, 0.5f, 5};
  float out[5];
  ReduceBuffers(DataType::FLOAT32, ReduceOp::SUM, out, a, b, 5);
  EXPECT(out[0] == 3 && out[1] == 0 && out[2] == 0 && out[3] == 4.5f && out[4] == 10);
  ReduceBuffers(DataType::FLOAT32, ReduceOp::MIN, out, a, b, 5);
  EXPECT(out[0] == 1 && out[1] == -2 && out[2] == -3);
  ReduceBuffers(DataType::FLOAT32, ReduceOp::PRODUCT, out, a, b, 5);
  EXPECT(out[0] == 2 && out[1] == -4 && out[4] == 25);
  // In place (dst aliases a), as the transports call it.
  ReduceBuffers(DataType::FLOAT32, ReduceOp::MAX, a, a, b, 5);
  EXPECT(a[0] == 2 && a[1] == 2 && a[2] == 3);

  // float16 sums round once, in float: 2048 + 1 is 2048 in half precision.
  uint16_t h1[2] = {FloatToHalf(2048.0f), FloatToHalf(1000.0f)};
  uint16_t h2[2] = {FloatToHalf(1.0f), FloatToHalf(24.0f)};
  ReduceBuffers(DataType::FLOAT16, ReduceOp::SUM, h1, h1, h2, 2);
  EXPECT(HalfToFloat(h1[0]) == 2048.0f && HalfToFloat(h1[1]) == 1024.0f);
  uint16_t bf1[1] = {FloatToBFloat16(100.0f)}, bf2[1] = {FloatToBFloat16(28.0f)};
  ReduceBuffers(DataType::BFLOAT16, ReduceOp::SUM, bf1, bf1, bf2, 1);
  EXPECT(BFloat16ToFloat(bf1[0]) == 128.0f);

  int8_t i8[2] = {100, -100}, j8[2] = {27, -28};
  ReduceBuffers(DataType::INT8, ReduceOp::SUM, i8, i8, j8, 2);
  EXPECT(i8[0] == 127 && i8[1] == -128);

  int32_t ints[3] = {7, -7, 6};
  DivideBuffer(DataType::INT32, ints, 3, 2);
  EXPECT(ints[0] == 3 && ints[1] == -3 && ints[2] == 3);  // truncation toward zero
  double d[2] = {1.0, 3.0};
  ScaleBuffer(DataType::FLOAT64, d, 2, 0.5);
  EXPECT(d[0] == 0.5 && d[1] == 1.5);

  float ident[2];
  FillIdentity(DataType::FLOAT32, ReduceOp::MIN, ident, 2);
  EXPECT(std::isinf(ident[0]) && ident[0] > 0);
  int64_t iid[1];
  FillIdentity(DataType::INT64, ReduceOp::PRODUCT, iid, 1);
  EXPECT(iid[0] == 1);
}

// The vectorised 16-bit paths must agree bit for bit with the scalar
// definition (widen, combine in float, round to nearest even once).
void TestWideReductionsMatchScalar() {
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
      EXPECT(mismatches == 0);
    }
  }
}

Request Member(int rank, const std::string& group, int i, int n, Shape shape,
               DataType dtype = DataType::FLOAT32) {
  Request q = MakeRequest(rank, group + "_" + std::to_string(i), std::move(shape),
                          OpType::ALLREDUCE, dtype);
  q.group = group;
  q.group_size = n;
  return q;
}

void TestGroupRoundTrip() {
  RequestList list;
  list.requests.push_back(Member(1, "g", 2, 3, {4}));
  RequestList parsed;
  EXPECT(ParseRequestList(SerializeRequestList(list), &parsed));
  EXPECT(parsed.requests.size() == 1 && parsed.requests[0].group == "g" &&
         parsed.requests[0].group_size == 3 && parsed.requests[0].name == "g_2");
}

void TestCoordinatorGroup() {
  Parameters params;
  Coordinator coord(2, params);
  // Rank 0 sends the whole group; rank 1 only one member so far (as if its
  // members reached the coordinator in different rounds): nothing runs.
  RequestList a0, a1, b1;
  a0.requests = {Member(0, "g", 0, 3, {2}), Member(0, "g", 1, 3, {3}, DataType::FLOAT64),
                 Member(0, "g", 2, 3, {4})};
  a1.requests = {Member(1, "g", 0, 3, {2})};
  coord.Add(a0);
  coord.Add(a1);
  EXPECT(coord.TakeReadyResponses().empty());
  b1.requests = {Member(1, "g", 1, 3, {3}, DataType::FLOAT64)};
  coord.Add(b1);
  EXPECT(coord.TakeReadyResponses().empty());
  RequestList c1;
  c1.requests = {Member(1, "g", 2, 3, {4})};
  coord.Add(c1);
  auto ready = coord.TakeReadyResponses();
  EXPECT(ready.size() == 3);
  EXPECT(ready.size() == 3 && ready[0].names[0] == "g_0" && ready[1].names[0] == "g_1" &&
         ready[2].names[0] == "g_2" && ready[0].kind == Response::OPERATION);
  // Fused: one response per dtype, the group's float32 members together.
  auto fused = FuseResponses(ready, 1 << 20);
  EXPECT(fused.size() == 2 && (fused[0].names == std::vector<std::string>{"g_0", "g_2"}));

  // One member mismatching on one rank fails the whole group, once.
  RequestList m0, m1;
  m0.requests = {Member(0, "h", 0, 2, {2}), Member(0, "h", 1, 2, {5})};
  m1.requests = {Member(1, "h", 0, 2, {2}), Member(1, "h", 1, 2, {6})};
  coord.Add(m0);
  coord.Add(m1);
  ready = coord.TakeReadyResponses();
  EXPECT(ready.size() == 1 && ready[0].kind == Response::ERROR &&
         ready[0].error_code == Status::INVALID_ARGUMENT &&
         (ready[0].names == std::vector<std::string>{"h_0", "h_1"}));
  EXPECT(!ready.empty() && Contains(ready[0].error, "grouped allreduce 'h'") &&
         Contains(ready[0].error, "none of its tensors ran") &&
         Contains(ready[0].error, "tensor 'h_1': mismatched shape"));
  EXPECT(!coord.HasPending());

  // A member sent as part of a group on one rank and alone on another.
  RequestList s0, s1;
  s0.requests = {Member(0, "k", 0, 1, {2})};
  s1.requests = {MakeRequest(1, "k_0", {2})};
  coord.Add(s0);
  coord.Add(s1);
  ready = coord.TakeReadyResponses();
  EXPECT(ready.size() == 1 && ready[0].kind == Response::ERROR &&
         Contains(ready[0].error, "mismatched group"));
}

void TestTensorQueueFifo() {
  TensorQueue queue;
  std::vector<int> done;
  for (int i = 0; i < 3; ++i) {
    TensorTableEntry e;
    e.request = MakeRequest(0, "allreduce", {static_cast<int64_t>(i + 1)});
    e.callback = [&done, i](const Status&) { done.push_back(i); };
    EXPECT(queue.Add(std::move(e)).ok());
  }
  // Only the head of a name is up for negotiation; taking it releases the next.
  std::vector<Request> fresh;
  queue.PopNewRequests(&fresh);
  EXPECT(fresh.size() == 1 && fresh[0].shape == Shape{1});
  EXPECT(queue.size() == 3);
  TensorTableEntry taken;
  EXPECT(queue.Take("allreduce", &taken) && taken.request.shape == Shape{1});
  fresh.clear();
  queue.PopNewRequests(&fresh);
  EXPECT(fresh.size() == 1 && fresh[0].shape == Shape{2});
  queue.FailAll(Status::Aborted("stop"));
  EXPECT((done == std::vector<int>{1, 2}) && queue.size() == 0);
}

}  // namespace

int main() {
  TestGroupRoundTrip();
  TestCoordinatorGroup();
  TestTensorQueueFifo();
  TestWideReductionsMatchScalar();
  TestMessageRoundTrip();
  TestValidationMessages();
  TestFusion();
  TestResponseCache();
  TestCoordinatorJoin();
  TestCoordinatorStallShutdown();
  TestHalfConversions();
  TestReduceKernels();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
