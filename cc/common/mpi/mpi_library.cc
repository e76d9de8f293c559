#include "cc/common/mpi/mpi_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cc/common/mpi/mpi_symbols.h"

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

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Opens `candidate`; on success checks it speaks the MPICH ABI and has every
// function the backend calls. Returns the handle, or null with *why set.
void* TryOpen(const std::string& candidate, std::string* why) {
  dlerror();
  // RTLD_GLOBAL: an MPI's own plugins (fabrics, PMI) may look up its symbols.
  void* h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    const char* e = dlerror();
    *why = e != nullptr ? e : "dlopen failed";
    return nullptr;
  }
  if (dlsym(h, "ompi_mpi_comm_world") != nullptr) {
    *why = "this is Open MPI, whose ABI differs from MPICH's (tf_hvd's MPI backend needs an "
           "MPICH-ABI library: MPICH, Intel MPI, MVAPICH or Cray MPICH)";
    dlclose(h);
    return nullptr;
  }
  for (const char* name : MpiFunctionNames()) {
    if (dlsym(h, name) == nullptr) {
      *why = std::string("it has no ") + name + " (not an MPICH-ABI MPI library)";
      dlclose(h);
      return nullptr;
    }
  }
  return h;
}

std::string DescribeLibrary(void* handle) {
  std::string where = "?";
  Dl_info info;
  void* init = dlsym(handle, "MPI_Init_thread");
  if (init != nullptr && dladdr(init, &info) != 0 && info.dli_fname != nullptr) {
    where = info.dli_fname;
  }
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
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates.push_back(explicit_path);
  } else {
    for (const std::string& dir : s.dirs) {
      for (const char* file : {"libmpi.so.12", "libmpich.so.12"}) {
        if (IsFile(dir + "/" + file)) candidates.push_back(dir + "/" + file);
      }
    }
    candidates.push_back("libmpi.so.12");
    candidates.push_back("libmpich.so.12");
  }
  std::string tried;
  for (const std::string& c : candidates) {
    std::string why;
    void* h = TryOpen(c, &why);
    if (h != nullptr) {
      s.handle = h;
      s.description = DescribeLibrary(h);
      s.status = Status();
      return s.status;
    }
    tried += "\n  " + c + ": " + why;
  }
  s.status = Status::Precondition(
      "MPI was asked for, but no MPICH-ABI MPI library could be loaded. Tried" +
      std::string(explicit_path.empty() ? "" : " (HOROVOD_MPI_LIBRARY)") + ":" + tried +
      "\nInstall one into this Python environment (`pip install mpich`), load your site's "
      "MPICH, Intel MPI, MVAPICH or Cray MPICH module (so that libmpi.so.12 is on "
      "LD_LIBRARY_PATH), or set HOROVOD_MPI_LIBRARY to its libmpi.so.12. Gloo needs no MPI: "
      "start the job with tfhvdrun without --mpi.");
  return s.status;
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
