#include "cc/common/mpi/mpi_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cc/common/mpi/mpi_symbols.h"
#include "cc/common/runtime_library.h"

namespace tfhvd {
namespace {

struct State {
  std::mutex mu;
  std::vector<std::string> dirs;
  bool tried = false;
  Status status;
  void* handle = nullptr;
  std::string description;
};

State& state() {
  static State* s = new State();  // never destroyed: MPI_Finalize may run at exit
  return *s;
}

// Whether the opened library speaks the MPICH ABI and has every function the backend calls.
bool IsMpich(void* handle, std::string* why) {
  if (dlsym(handle, "ompi_mpi_comm_world") != nullptr) {
    *why = "this is Open MPI, whose ABI differs from MPICH's (tf_hvd's MPI backend needs an "
           "MPICH-ABI library: MPICH, Intel MPI, MVAPICH or Cray MPICH)";
    return false;
  }
  const char* missing = FirstMissingSymbol(handle, MpiFunctionNames());
  if (missing != nullptr) {
    *why = std::string("it has no ") + missing + " (not an MPICH-ABI MPI library)";
    return false;
  }
  return true;
}

std::string DescribeLibrary(void* handle) {
  const std::string where = LibraryPath(handle);
  std::string version;
  using VersionFn = int (*)(char*, int*);
  auto get_version = reinterpret_cast<VersionFn>(dlsym(handle, "MPI_Get_library_version"));
  if (get_version != nullptr) {
    char text[8192] = {0};  // MPI_MAX_LIBRARY_VERSION_STRING is at most 8192
    int len = 0;
    if (get_version(text, &len) == 0) {
      version.assign(text, text + std::min<int>(std::max(len, 0), sizeof(text) - 1));
      size_t eol = version.find('\n');
      if (eol != std::string::npos) version.resize(eol);
    }
  }
  return where + (version.empty() ? "" : " (" + version + ")");
}

}  // namespace

void MpiLibrary::SetSearchDirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().dirs = std::move(dirs);
}

Status MpiLibrary::Load(const std::string& explicit_path) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.tried) return s.status;
  s.tried = true;
  const std::vector<std::string> candidates =
      explicit_path.empty()
          ? RuntimeLibraryCandidates({"libmpi.so.12", "libmpich.so.12"}, s.dirs)
          : std::vector<std::string>{explicit_path};
  s.status = Open(candidates, !explicit_path.empty(), &s.handle);
  if (s.status.ok()) s.description = DescribeLibrary(s.handle);
  return s.status;
}

Status MpiLibrary::Open(const std::vector<std::string>& candidates, bool given, void** handle) {
  std::string tried;
  // RTLD_GLOBAL: an MPI's own plugins (fabrics, PMI) may look up its symbols.
  *handle = OpenRuntimeLibrary(candidates, RTLD_NOW | RTLD_GLOBAL, IsMpich, &tried);
  if (*handle != nullptr) return Status();
  return Status::Precondition(
      "MPI was asked for, but no MPICH-ABI MPI library could be loaded. Tried" +
      std::string(given ? " (HOROVOD_MPI_LIBRARY)" : "") + ":" + tried +
      "\nInstall one into this Python environment (`pip install mpich`), load your site's "
      "MPICH, Intel MPI, MVAPICH or Cray MPICH module (so that libmpi.so.12 is on "
      "LD_LIBRARY_PATH), or set HOROVOD_MPI_LIBRARY to its libmpi.so.12. Gloo needs no MPI: "
      "start the job with tfhvdrun without --mpi.");
}

bool MpiLibrary::Loaded() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().handle != nullptr;
}

std::string MpiLibrary::Describe() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().description;
}

void* MpiLibrary::Symbol(const char* name) {
  void* handle;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    handle = state().handle;
  }
  void* fn = handle != nullptr ? dlsym(handle, name) : nullptr;
  if (fn == nullptr) {
    std::fprintf(stderr, "tf_hvd: internal error: %s called %s\n", name,
                 handle == nullptr ? "before the MPI library was loaded"
                                   : "but the MPI library lacks it");
    std::abort();
  }
  return fn;
}

}  // namespace tfhvd
