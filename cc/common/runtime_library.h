// Finding a shared library at run time (dlopen) instead of linking it: what the MPI
// loader (mpi/mpi_library.h) and the CUDA runtime and NCCL loader
// (gpu/gpu_libraries.h) share. A caller lists where the library may be, opens the first
// candidate its own check accepts, and on failure reports every candidate with the
// reason it was refused:
//
//   std::string tried;
//   void* h = OpenRuntimeLibrary(RuntimeLibraryCandidates({"libmpi.so.12"}, dirs),
//                                RTLD_NOW | RTLD_GLOBAL, IsMpich, &tried);
//   if (h == nullptr) return Status::Precondition("no MPI could be loaded. Tried:" + tried);
#ifndef TFHVD_COMMON_RUNTIME_LIBRARY_H_
#define TFHVD_COMMON_RUNTIME_LIBRARY_H_

#include <functional>
#include <string>
#include <vector>

namespace tfhvd {

// Where a library may be, in the order to try: for each of `sonames` (the preferred
// first), the file of that name in each of `dirs` that holds one; then each bare soname,
// which dlopen looks for on the loader's path (LD_LIBRARY_PATH, the ld.so cache).
std::vector<std::string> RuntimeLibraryCandidates(const std::vector<std::string>& sonames,
                                                  const std::vector<std::string>& dirs);

// Whether an opened library is the one wanted; when not, says why in *why (the library
// is then closed and the next candidate tried).
using LibraryCheck = std::function<bool(void* handle, std::string* why)>;

// The first of `candidates` that dlopen opens with `flags` and `accept` takes, or null.
// Each candidate refused adds a line "\n  <candidate>: <dlopen's error or the check's
// reason>" to *tried, the text of an error that names every place tried.
void* OpenRuntimeLibrary(const std::vector<std::string>& candidates, int flags,
                         const LibraryCheck& accept, std::string* tried);

// The first of `names` that the library `handle` does not export, or null if it has them all.
const char* FirstMissingSymbol(void* handle, const std::vector<const char*>& names);

// The file the library `handle` was loaded from, or "?".
std::string LibraryPath(void* handle);

// The file that holds the code or data at `address` (a symbol of a loaded library, which
// may be one of its dependencies), or "?".
std::string LibraryFileOf(const void* address);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_RUNTIME_LIBRARY_H_
