// The pipelined exchange of the MPI links (cc/common/mpi/mpi_links.h), one
// rank per process: run under `mpiexec -n 2` or `-n 3` (tests/unit/
// test_mpi_links_cc.py does both). Every rank runs the same script as the
// socket backends' test (exchange_script.h): pipelined rounds deliver the
// bytes plain Exchange calls do, a pipelining rank interoperates with one
// that calls Exchange, the Precondition errors, and the ring allreduce gives
// exact sums. Every wait is bounded (MpiWait's limit), so a lost message
// fails a rank instead of hanging it.
//   bazel build //:mpi_links_test && mpiexec -n 3 bazel-bin/mpi_links_test [--xml_dir=DIR]
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/mpi/mpi_library.h"
#include "cc/common/mpi/mpi_links.h"
#include "tests/unit/cc/exchange_script.h"

using namespace tfhvd;
using namespace tfhvd::testing;

namespace {

// A transfer that makes no progress for this long fails (DEADLINE_EXCEEDED).
constexpr double kLimitSeconds = 30;

class MpiLinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_GE(size, 2) << "run under mpiexec -n 2 (or more)";
    links_.Reset(MPI_COMM_WORLD, rank, size, /*spin_us=*/0, kLimitSeconds);
  }
  // Every rank enters each test together, so a test's messages never meet
  // the previous one's.
  void TearDown() override { MPI_Barrier(MPI_COMM_WORLD); }
  MpiLinks links_;
};

TEST_F(MpiLinksTest, PipelinedAndPlainExchangesMoveTheSameBytes) {
  Status s = RingRounds(links_);
  EXPECT_TRUE(s.ok()) << "rank " << links_.rank() << ": " << s.message();
}

TEST_F(MpiLinksTest, PreconditionErrors) {
  PreconditionScript(links_);
  Status s = RingScript(links_, Style::kPipelined);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST_F(MpiLinksTest, RingAllreduceExactSums) { CheckRingSumsEveryDtype(links_); }

}  // namespace

// --xml_dir=DIR: each rank writes its results to DIR/rank<r>.xml (the ranks'
// console output interleaves, so a checker reads these instead).
int main(int argc, char** argv) {
  // The backend's MPI calls go to the library tf_hvd loads at run time (the one this test
  // links, found again by its name).
  tfhvd::Status loaded = tfhvd::MpiLibrary::Load("");
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.message().c_str());
    return 1;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string flag = "--xml_dir=";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.compare(0, flag.size(), flag) == 0) {
      GTEST_FLAG_SET(output, "xml:" + arg.substr(flag.size()) + "/rank" + std::to_string(rank) +
                                 ".xml");
    }
  }
  // After the flag: GoogleTest sets up its XML output here.
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  MPI_Finalize();
  return failed;
}
