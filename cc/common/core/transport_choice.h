// Which transport this process uses: HOROVOD_CONTROLLER / HOROVOD_CPU_OPERATIONS
// when set, else what the launcher that started it implies (mpirun/mpiexec: MPI;
// tfhvdrun: Gloo; none: a local job of one process). Creating the chosen
// backend is the facade's (transport_factory.h); this part knows no backend.
//
//   std::string choice;
//   ChooseTransport(params, LaunchEnvironment::FromEnvironment(), false, &choice);
#ifndef TFHVD_COMMON_CORE_TRANSPORT_CHOICE_H_
#define TFHVD_COMMON_CORE_TRANSPORT_CHOICE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/parameters.h"

namespace tfhvd {

// hvd.init(comm=...): under MPI the job is the communicator with Fortran
// handle `handle` (has_handle), or the MPI_COMM_WORLD ranks `ranks`, in that
// order (only they call init). Other transports accept only every rank of the job.
struct JobCommunicator {
  std::vector<int> ranks;
  bool has_handle = false;
  int64_t handle = 0;
};

// What the launcher's own variables (not knobs) say about this process.
struct LaunchEnvironment {
  // Started by mpirun/mpiexec: PMI_RANK, PMI_SIZE or OMPI_COMM_WORLD_RANK is
  // set to a non-empty value (an empty one, e.g. cleared by a wrapper, is not
  // a launch; the launcher's Python side reads them the same way).
  bool mpi = false;

  static LaunchEnvironment From(const std::function<const char*(const char*)>& getenv);
  static LaunchEnvironment FromEnvironment();  // the process's environment
};

// *choice: "mpi", "gloo" or "local". INVALID_ARGUMENT for a comm handle
// outside MPI, oneCCL, or HOROVOD_CPU_OPERATIONS disagreeing with HOROVOD_CONTROLLER.
Status ChooseTransport(const Parameters& params, const LaunchEnvironment& launch,
                       bool has_comm_handle, std::string* choice);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_TRANSPORT_CHOICE_H_
