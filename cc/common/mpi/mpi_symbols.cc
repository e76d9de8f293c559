#include "cc/common/mpi/mpi_symbols.h"

#include "cc/common/mpi/mpi_library.h"

// Hidden: the definitions serve this library's own calls only, and never stand
// in for the MPI functions of another library in the process (mpi4py's).
#define TFHVD_MPI_FORWARD(name, params, args)                                 \
  extern "C" __attribute__((visibility("hidden"))) int name params {          \
    static auto fn = reinterpret_cast<decltype(&name)>(                      \
        tfhvd::MpiLibrary::Symbol(#name));                                    \
    return fn args;                                                           \
  }

TFHVD_MPI_FUNCTIONS(TFHVD_MPI_FORWARD)

namespace tfhvd {

const std::vector<const char*>& MpiFunctionNames() {
#define TFHVD_MPI_NAME(name, params, args) #name,
  static const std::vector<const char*> names = {TFHVD_MPI_FUNCTIONS(TFHVD_MPI_NAME)};
#undef TFHVD_MPI_NAME
  return names;
}

}  // namespace tfhvd
