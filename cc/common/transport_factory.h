// Builds the transport core/transport_choice.h chose, and the channels its
// launcher reads fault reports from. The one place that knows every backend.
#ifndef TFHVD_COMMON_TRANSPORT_FACTORY_H_
#define TFHVD_COMMON_TRANSPORT_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/common/core/transport_choice.h"
#include "cc/common/transport/fault_channel.h"
#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

Status CreateTransport(const Parameters& params, const JobCommunicator& comm,
                       std::unique_ptr<Transport>* out);

// After the transport's Init: the rendezvous store under Gloo, and the file
// TF_HVD_FAULT_FILE names (tfhvdrun --mpi) when set.
std::vector<std::unique_ptr<FaultChannel>> CreateFaultChannels(const Transport& transport,
                                                               const Parameters& params,
                                                               const Topology& topology);

// Whether an MPI library can be loaded (mpi/mpi_library.h; loads it, once per process):
// OK, or the error naming every place tried. `library` is HOROVOD_MPI_LIBRARY's value.
Status LoadMpiLibrary(const std::string& library);

// Where LoadMpiLibrary also looks (the Python environment's lib/), and what it loaded.
void SetMpiLibrarySearchDirs(std::vector<std::string> dirs);
std::string MpiLibraryDescription();

// An MPI transport whose MPI provides MPI_THREAD_MULTIPLE.
bool MpiThreadsMultiple(const Transport& transport);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_FACTORY_H_
