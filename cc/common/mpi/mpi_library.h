// The MPI library, found and loaded at run time instead of linked: a tf_hvd
// wheel runs on Gloo on a machine with no MPI, and uses the site's MPI where
// there is one. The backend compiles against MPICH's mpi.h, whose handles and
// constants are plain integers (the "MPICH ABI"), so any MPICH-ABI library
// works: MPICH, Intel MPI, MVAPICH, Cray MPICH. Open MPI's ABI differs and is
// refused by name. mpi_symbols.cc binds each MPI call to the loaded library.
//
//   MpiLibrary::SetSearchDirs({"/venv/lib"});   // from Python: sys.prefix/lib
//   Status s = MpiLibrary::Load(params.mpi_library);
//   if (!s.ok()) return s;   // names every place tried and what to install
//   MPI_Init_thread(...);    // now resolves into that library
#ifndef TFHVD_COMMON_MPI_MPI_LIBRARY_H_
#define TFHVD_COMMON_MPI_MPI_LIBRARY_H_

#include <string>
#include <vector>

#include "cc/common/common.h"

namespace tfhvd {

class MpiLibrary {
 public:
  // Directories tried after HOROVOD_MPI_LIBRARY and before the loader's own
  // path: the Python environment's lib/, where the mpich (or impi-rt) wheel
  // puts libmpi.so.12, as mpi4py looks there too.
  static void SetSearchDirs(std::vector<std::string> dirs);

  // Loads the library once per process (later calls return the first
  // outcome). `explicit_path` is HOROVOD_MPI_LIBRARY: a path or a file name;
  // empty searches the search dirs, then libmpi.so.12 and libmpich.so.12 on
  // the loader's path (LD_LIBRARY_PATH, an MPI module's setting).
  static Status Load(const std::string& explicit_path);

  // Whether a Load succeeded.
  static bool Loaded();

  // After a successful Load: where the library was found and its
  // MPI_Get_library_version text. Empty before.
  static std::string Describe();

  // The address of `name` in the loaded library; aborts with a message when
  // called before a successful Load (a bug: every MPI caller loads first).
  static void* Symbol(const char* name);

  // Load's search, without its once-per-process memory: the first of `candidates` (paths
  // or file names) that is an MPICH-ABI MPI with every function the backend calls, in
  // *handle; else a Precondition naming each candidate and why it was refused (Open MPI,
  // a missing function, dlopen's error). `given`: the candidates are HOROVOD_MPI_LIBRARY.
  static Status Open(const std::vector<std::string>& candidates, bool given, void** handle);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_MPI_MPI_LIBRARY_H_
