#include "cc/common/mpi/mpi_symbols.h"

#include "cc/common/forwarder.h"
#include "cc/common/mpi/mpi_library.h"

#define TFHVD_MPI_FORWARD(name, params, args) \
  TFHVD_FORWARD(tfhvd::MpiLibrary::Symbol, int, name, params, args)

TFHVD_MPI_FUNCTIONS(TFHVD_MPI_FORWARD)

namespace tfhvd {

const std::vector<const char*>& MpiFunctionNames() {
#define TFHVD_MPI_NAME(name, params, args) #name,
  static const std::vector<const char*> names = {TFHVD_MPI_FUNCTIONS(TFHVD_MPI_NAME)};
#undef TFHVD_MPI_NAME
  return names;
}

}  // namespace tfhvd
