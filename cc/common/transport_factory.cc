#include "cc/common/transport_factory.h"

#include <cstdlib>
#include <string>

#include "cc/common/core/fault_reporter.h"
#include "cc/common/transport/local_transport.h"
#if HAVE_GLOO
#include "cc/common/gloo/gloo_transport.h"
#include "cc/common/gloo/rendezvous_fault_channel.h"
#endif
#if HAVE_MPI
#include "cc/common/mpi/mpi_library.h"
#include "cc/common/mpi/mpi_transport.h"
#endif

namespace tfhvd {

Status CreateTransport(const Parameters& params, const JobCommunicator& comm,
                       std::unique_ptr<Transport>* out) {
  std::string choice;
  Status s = ChooseTransport(params, LaunchEnvironment::FromEnvironment(), comm.has_handle,
                             &choice);
  if (!s.ok()) return s;
  if (choice == "mpi") {
#if HAVE_MPI
    auto* mpi = new MpiTransport(params);
    if (comm.has_handle) mpi->UseCommunicator(comm.handle);
    if (!comm.ranks.empty()) mpi->UseWorldRanks(comm.ranks);
    out->reset(mpi);
    return Status();
#else
    return Status::Precondition("this tf_hvd build has no MPI support");
#endif
  }
  if (choice == "gloo") {
#if HAVE_GLOO
    out->reset(new GlooTransport(params));
    return Status();
#else
    return Status::Precondition("this tf_hvd build has no Gloo support");
#endif
  }
  out->reset(new LocalTransport());
  return Status();
}

std::vector<std::unique_ptr<FaultChannel>> CreateFaultChannels(const Transport& transport,
                                                               const Parameters& params,
                                                               const Topology& topology) {
  std::vector<std::unique_ptr<FaultChannel>> channels;
#if HAVE_GLOO
  if (std::string(transport.name()) == "gloo") {
    channels.emplace_back(new RendezvousFaultChannel(params, topology.rank, topology.size));
  }
#else
  (void)transport;
  (void)params;
  (void)topology;
#endif
  const char* path = std::getenv("TF_HVD_FAULT_FILE");
  if (path != nullptr && *path != '\0') channels.emplace_back(new FaultFileChannel(path));
  return channels;
}

Status LoadMpiLibrary(const std::string& library) {
#if HAVE_MPI
  return MpiLibrary::Load(library);
#else
  (void)library;
  return Status::Precondition("this tf_hvd build has no MPI support");
#endif
}

void SetMpiLibrarySearchDirs(std::vector<std::string> dirs) {
#if HAVE_MPI
  MpiLibrary::SetSearchDirs(std::move(dirs));
#else
  (void)dirs;
#endif
}

std::string MpiLibraryDescription() {
#if HAVE_MPI
  return MpiLibrary::Describe();
#else
  return "";
#endif
}

bool MpiThreadsMultiple(const Transport& transport) {
#if HAVE_MPI
  return std::string(transport.name()) == "mpi" && MpiTransport::ThreadsMultiple();
#else
  (void)transport;
  return false;
#endif
}

}  // namespace tfhvd
