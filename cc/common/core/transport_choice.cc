#include "cc/common/core/transport_choice.h"

#include <cstdlib>

namespace tfhvd {

LaunchEnvironment LaunchEnvironment::From(
    const std::function<const char*(const char*)>& getenv) {
  LaunchEnvironment env;
  for (const char* name : {"PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK"}) {
    const char* v = getenv(name);
    env.mpi |= v != nullptr && *v != '\0';
  }
  return env;
}

LaunchEnvironment LaunchEnvironment::FromEnvironment() {
  return From([](const char* name) { return std::getenv(name); });
}

Status ChooseTransport(const Parameters& params, const LaunchEnvironment& launch,
                       bool has_comm_handle, std::string* choice) {
  if (has_comm_handle && params.controller != "mpi" && !launch.mpi) {
    return Status::InvalidArgument(
        "hvd.init(comm=<mpi4py communicator>) needs the MPI transport: start the job with "
        "mpiexec/mpirun or tfhvdrun --mpi");
  }
  // HOROVOD_CPU_OPERATIONS picks the transport too: tf_hvd negotiates and runs
  // CPU collectives on one transport, so it must agree with HOROVOD_CONTROLLER.
  *choice = params.controller;
  const std::string& ops = params.cpu_operations;
  if (ops == "ccl") {
    return Status::InvalidArgument(
        "HOROVOD_CPU_OPERATIONS=ccl: tf_hvd has no oneCCL support (hvd.ccl_built() is False); "
        "use gloo or mpi");
  }
  if (!ops.empty()) {
    if (choice->empty()) {
      *choice = ops;
    } else if (*choice != ops) {
      return Status::InvalidArgument(
          "HOROVOD_CPU_OPERATIONS=" + ops + " but HOROVOD_CONTROLLER=" + *choice +
          ": tf_hvd runs negotiation and CPU collectives on one transport, so they must agree");
    }
  }
  // tfhvdrun sets HOROVOD_RANK; without it Gloo has no rendezvous: one process.
  const bool launched_by_tfhvdrun = params.rank >= 0;
  if (choice->empty()) {
    if (launch.mpi) *choice = "mpi";
    else if (launched_by_tfhvdrun) *choice = "gloo";
    else *choice = "local";
  }
  if (*choice == "gloo" && !launched_by_tfhvdrun) *choice = "local";
  if (*choice != "mpi" && *choice != "gloo") *choice = "local";
  return Status();
}

}  // namespace tfhvd
