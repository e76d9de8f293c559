// One rank's checks of an op's arguments before it is queued
// (entry_checks.h): Horovod's error types and messages, alltoall's even
// splits, a process set's broadcast root. GoogleTest: bazel test //:entry_checks_test
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/negotiation/entry_checks.h"

using namespace tfhvd;

namespace {

TensorTableEntry Entry(OpType type, Shape shape, ReduceOp op = ReduceOp::SUM) {
  TensorTableEntry e;
  e.request.type = type;
  e.request.name = "x";
  e.request.shape = std::move(shape);
  e.request.reduce_op = op;
  return e;
}

const std::vector<int> kJob = {0, 1, 2, 3};
const std::string kGlobal = "the global process set";

Status Check(TensorTableEntry* e, int32_t set = 0, const std::vector<int>& ranks = kJob,
             const std::string& label = kGlobal) {
  return CheckEntry(EntryScope{set, ranks, label}, e);
}

TEST(CheckEntry, ShapedOpsRefuseScalars) {
  for (OpType t : {OpType::ALLGATHER, OpType::ALLTOALL, OpType::REDUCESCATTER}) {
    TensorTableEntry e = Entry(t, {});
    Status s = Check(&e);
    EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
    EXPECT_EQ(s.message(),
              "tensor 'x': " + std::string(OpTypeName(t)) + " needs a tensor of rank >= 1, got a scalar");
  }
  TensorTableEntry e = Entry(OpType::ALLREDUCE, {});
  EXPECT_TRUE(Check(&e).ok());
}

TEST(CheckEntry, AdasumNeedsAPowerOfTwoAndFloats) {
  TensorTableEntry e = Entry(OpType::ALLREDUCE, {2}, ReduceOp::ADASUM);
  EXPECT_TRUE(Check(&e).ok());
  Status s = Check(&e, 1, {0, 1, 2}, "process set 1 (ranks 0, 1, 2)");
  EXPECT_EQ(s.message(),
            "tensor 'x': Adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...); this "
            "job has 3");
  e.request.dtype = DataType::INT32;
  EXPECT_EQ(Check(&e).message(), "tensor 'x': Adasum reduces float16, float32 and float64 tensors, not int32");
}

TEST(CheckEntry, ReducescatterTakesSumAndAverageOnly) {
  TensorTableEntry e = Entry(OpType::REDUCESCATTER, {4}, ReduceOp::AVERAGE);
  EXPECT_TRUE(Check(&e).ok());
  e.request.reduce_op = ReduceOp::MAX;
  EXPECT_EQ(Check(&e).message(), "tensor 'x': reducescatter supports only Sum and Average, got Max");
}

TEST(CheckEntry, BroadcastRootIsAGlobalRank) {
  TensorTableEntry e = Entry(OpType::BROADCAST, {1});
  e.request.root_rank = 4;
  Status s = Check(&e);
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_EQ(s.message(), "tensor 'x': root_rank 4 is out of range for 4 ranks");
  // In a set, the root becomes its position there.
  e.request.root_rank = 3;
  const std::string label = "process set 1 (ranks 1, 3)";
  ASSERT_TRUE(Check(&e, 1, {1, 3}, label).ok());
  EXPECT_EQ(e.request.root_rank, 1);
  e.request.root_rank = 2;
  s = Check(&e, 1, {1, 3}, label);
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_EQ(s.message(),
            "tensor 'x': broadcast received invalid root rank 2 for provided process set: "
            "process set 1 (ranks 1, 3) does not contain it");
}

TEST(CheckEntry, AlltoallSplitsAreFilledOrChecked) {
  TensorTableEntry e = Entry(OpType::ALLTOALL, {8, 2});
  ASSERT_TRUE(Check(&e).ok());
  EXPECT_EQ(e.splits, (std::vector<int32_t>{2, 2, 2, 2}));
  e = Entry(OpType::ALLTOALL, {6});
  EXPECT_EQ(Check(&e).message(),
            "tensor 'x': alltoall without splits needs dimension 0 (6) divisible by the number "
            "of ranks (4)");
  e.splits = {1, 2, 3, 1};
  EXPECT_EQ(Check(&e).message(),
            "tensor 'x': alltoall splits must have one non-negative entry per rank (4) summing "
            "to dimension 0 (6), got 4 entries summing to 7");
  e.splits = {3, 3, 1, -1};
  EXPECT_FALSE(Check(&e).ok());
  e.splits = {3, 3, 0, 0};
  EXPECT_TRUE(Check(&e).ok());
}

TEST(PositionIn, FindsARanksPlaceInASet) {
  EXPECT_EQ(PositionIn({1, 3, 5}, 5), 2);
  EXPECT_EQ(PositionIn({1, 3, 5}, 4), -1);
  EXPECT_EQ(PositionIn({}, 0), -1);
}

}  // namespace
