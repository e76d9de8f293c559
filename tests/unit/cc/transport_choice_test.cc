// Which transport a process uses (core/transport_choice.h): the knobs first,
// then what the launcher's variables say. GoogleTest: bazel test //:transport_choice_test
#include <map>
#include <string>

#include "gtest/gtest.h"

#include "cc/common/core/transport_choice.h"

using namespace tfhvd;

namespace {

LaunchEnvironment Env(std::map<std::string, std::string> vars) {
  return LaunchEnvironment::From([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string Choice(const Parameters& params, const LaunchEnvironment& env, Status* s = nullptr) {
  std::string choice;
  Status st = ChooseTransport(params, env, false, &choice);
  if (s) *s = st;
  return st.ok() ? choice : "error";
}

TEST(LaunchEnvironment, AnMpiLauncherSetsOneOfItsVariables) {
  EXPECT_FALSE(Env({}).mpi);
  EXPECT_TRUE(Env({{"PMI_RANK", "0"}}).mpi);
  EXPECT_TRUE(Env({{"PMI_SIZE", "2"}}).mpi);
  EXPECT_TRUE(Env({{"OMPI_COMM_WORLD_RANK", "1"}}).mpi);
  EXPECT_FALSE(Env({{"HOROVOD_RANK", "1"}}).mpi);
}

TEST(LaunchEnvironment, AnEmptyVariableIsNoLaunch) {
  EXPECT_FALSE(Env({{"PMI_RANK", ""}, {"PMI_SIZE", ""}, {"OMPI_COMM_WORLD_RANK", ""}}).mpi);
}

TEST(ChooseTransport, TheLauncherDecidesWhenNoKnobIsSet) {
  Parameters p;
  EXPECT_EQ(Choice(p, Env({})), "local");
  EXPECT_EQ(Choice(p, Env({{"PMI_RANK", "0"}})), "mpi");
  EXPECT_EQ(Choice(p, Env({{"PMI_RANK", ""}})), "local");
  p.rank = 0;  // tfhvdrun set HOROVOD_RANK
  EXPECT_EQ(Choice(p, Env({})), "gloo");
  EXPECT_EQ(Choice(p, Env({{"PMI_RANK", "0"}})), "mpi");
}

TEST(ChooseTransport, TheKnobsWinAndGlooWithoutALauncherIsOneProcess) {
  Parameters p;
  p.controller = "gloo";
  EXPECT_EQ(Choice(p, Env({{"PMI_RANK", "0"}})), "local");
  p.rank = 1;
  EXPECT_EQ(Choice(p, Env({{"PMI_RANK", "0"}})), "gloo");
  p.controller = "";
  p.cpu_operations = "mpi";
  EXPECT_EQ(Choice(p, Env({})), "mpi");
  p.controller = "mpi";
  EXPECT_EQ(Choice(p, Env({})), "mpi");
}

TEST(ChooseTransport, DisagreeingKnobsAndOneCclAreRefused) {
  Parameters p;
  Status s;
  p.controller = "gloo";
  p.cpu_operations = "mpi";
  EXPECT_EQ(Choice(p, Env({}), &s), "error");
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_EQ(s.message(),
            "HOROVOD_CPU_OPERATIONS=mpi but HOROVOD_CONTROLLER=gloo: tf_hvd runs negotiation "
            "and CPU collectives on one transport, so they must agree");
  p.cpu_operations = "ccl";
  EXPECT_EQ(Choice(p, Env({}), &s), "error");
  EXPECT_EQ(s.message(),
            "HOROVOD_CPU_OPERATIONS=ccl: tf_hvd has no oneCCL support (hvd.ccl_built() is "
            "False); use gloo or mpi");
}

TEST(ChooseTransport, AnMpiCommunicatorNeedsMpi) {
  Parameters p;
  std::string choice;
  Status s = ChooseTransport(p, Env({{"PMI_RANK", ""}}), /*has_comm_handle=*/true, &choice);
  EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
  EXPECT_EQ(s.message(),
            "hvd.init(comm=<mpi4py communicator>) needs the MPI transport: start the job with "
            "mpiexec/mpirun or tfhvdrun --mpi");
  EXPECT_TRUE(ChooseTransport(p, Env({{"PMI_RANK", "0"}}), true, &choice).ok());
  EXPECT_EQ(choice, "mpi");
  p.controller = "mpi";
  EXPECT_TRUE(ChooseTransport(p, Env({}), true, &choice).ok());
}

}  // namespace
