// Finding a library at run time (cc/common/runtime_library.h) and the refusals of the two
// loaders built on it: the MPI loader (an Open MPI, a library without MPI's functions, a
// missing file) and the CUDA runtime and NCCL loader (a runtime older than 12.5). The
// fakes are built next to this test (BUILD: fake_libraries/).
#include "cc/common/runtime_library.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "cc/common/gpu/gpu_libraries.h"
#include "cc/common/mpi/mpi_library.h"
#include "gtest/gtest.h"

namespace tfhvd {
namespace {

// The fakes, as Bazel lays them out in the test's runfiles (the working directory).
const char kOpenMpi[] = "tests/unit/cc/fake_libraries/open_mpi/libmpi.so.12";
const char kOldCudaDir[] = "tests/unit/cc/fake_libraries/cuda_12_4";

std::string Absolute(const std::string& relative) {
  char* cwd = getcwd(nullptr, 0);
  std::string path = std::string(cwd) + "/" + relative;
  free(cwd);
  return path;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "runtime_library_XXXXXX";
    path_ = mkdtemp(&pattern[0]);
  }
  void Touch(const std::string& name) const { std::ofstream(path_ + "/" + name) << "x"; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RuntimeLibrary, CandidatesAreEachNameInTheDirsThatHoldItThenTheBareNames) {
  TempDir first, second;
  first.Touch("libx.so.2");
  second.Touch("libx.so.1");
  second.Touch("libx.so.2");
  EXPECT_EQ(RuntimeLibraryCandidates({"libx.so.1", "libx.so.2"}, {first.path(), second.path()}),
            (std::vector<std::string>{second.path() + "/libx.so.1", first.path() + "/libx.so.2",
                                      second.path() + "/libx.so.2", "libx.so.1", "libx.so.2"}));
  EXPECT_EQ(RuntimeLibraryCandidates({"libx.so.1"}, {}), std::vector<std::string>{"libx.so.1"});
}

TEST(RuntimeLibrary, OpensTheFirstTheCheckTakesAndListsWhyTheOthersWereRefused) {
  const std::string missing = "/nonexistent/libnothing.so.1";
  std::string tried;
  int asked = 0;
  auto refuse = [&asked](void*, std::string* why) {
    ++asked;
    *why = "not the one wanted";
    return false;
  };
  EXPECT_EQ(OpenRuntimeLibrary({missing, "libm.so.6"}, RTLD_NOW | RTLD_LOCAL, refuse, &tried),
            nullptr);
  EXPECT_EQ(asked, 1);  // dlopen refused the missing file before the check saw it
  EXPECT_NE(tried.find("\n  " + missing + ": "), std::string::npos) << tried;
  EXPECT_NE(tried.find("cannot open shared object file"), std::string::npos) << tried;
  EXPECT_NE(tried.find("\n  libm.so.6: not the one wanted"), std::string::npos) << tried;

  tried.clear();
  auto has_cos = [](void* h, std::string* why) { return dlsym(h, "cos") != nullptr; };
  void* libm = OpenRuntimeLibrary({missing, "libm.so.6"}, RTLD_NOW | RTLD_LOCAL, has_cos, &tried);
  ASSERT_NE(libm, nullptr) << tried;
  EXPECT_EQ(tried.find("libm.so.6"), std::string::npos) << tried;
  EXPECT_EQ(std::string(FirstMissingSymbol(libm, {"cos", "no_such_function", "sin"})),
            "no_such_function");
  EXPECT_EQ(FirstMissingSymbol(libm, {"cos", "sin"}), nullptr);
  EXPECT_NE(LibraryPath(libm).find("libm.so.6"), std::string::npos) << LibraryPath(libm);
  EXPECT_NE(LibraryFileOf(dlsym(libm, "cos")).find("libm.so.6"), std::string::npos);
  EXPECT_EQ(LibraryFileOf(nullptr), "?");
  dlclose(libm);
}

TEST(MpiLibrary, RefusesOpenMpiNamingIt) {
  void* handle = &handle;
  Status s = MpiLibrary::Open({Absolute(kOpenMpi)}, true, &handle);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_NE(s.message().find("no MPICH-ABI MPI library could be loaded. Tried "
                             "(HOROVOD_MPI_LIBRARY):\n  " + Absolute(kOpenMpi) +
                             ": this is Open MPI, whose ABI differs from MPICH's"),
            std::string::npos) << s.message();
  EXPECT_NE(s.message().find("`pip install mpich`"), std::string::npos) << s.message();
}

TEST(MpiLibrary, RefusesAMissingFileAndALibraryWithoutMpiListingBoth) {
  void* handle = nullptr;
  Status s = MpiLibrary::Open({"/nonexistent/libmpi.so.12", "libm.so.6"}, false, &handle);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(handle, nullptr);
  const std::string& m = s.message();
  EXPECT_NE(m.find("could be loaded. Tried:\n  /nonexistent/libmpi.so.12: "), std::string::npos)
      << m;
  EXPECT_NE(m.find("cannot open shared object file"), std::string::npos) << m;
  EXPECT_NE(m.find("\n  libm.so.6: it has no MPI_"), std::string::npos) << m;
  EXPECT_NE(m.find("(not an MPICH-ABI MPI library)"), std::string::npos) << m;
  EXPECT_EQ(m.find("HOROVOD_MPI_LIBRARY):"), std::string::npos) << m;  // not given
}

TEST(GpuLibraries, RefusesACudaRuntimeOlderThan12_5NamingItsVersionAndFile) {
  void* cudart = &cudart;
  void* nccl = &nccl;
  Status s = GpuLibraries::Open({Absolute(kOldCudaDir)}, &cudart, &nccl);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(cudart, nullptr);
  EXPECT_EQ(nccl, nullptr);
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_NE(s.message().find("the CUDA runtime that was loaded (" + Absolute(kOldCudaDir) +
                             "/libcudart.so.12) is version 12040; tf_hvd needs 12.5 or later"),
            std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pip install \"tensorflow[and-cuda]\""), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tfhvd
