// Tunable knobs of the core, read from Horovod's environment variables.
#ifndef TFHVD_COMMON_PARAMETERS_H_
#define TFHVD_COMMON_PARAMETERS_H_

#include <cstdint>

#include "cc/common/common.h"

namespace tfhvd {

struct Parameters {
  int64_t fusion_threshold_bytes = 64 * 1024 * 1024;  // HOROVOD_FUSION_THRESHOLD; 0 = off
  double cycle_time_ms = 1.0;                          // HOROVOD_CYCLE_TIME
  int64_t cache_capacity = 1024;                       // HOROVOD_CACHE_CAPACITY; 0 = off
  bool stall_check = true;                             // !HOROVOD_STALL_CHECK_DISABLE
  double stall_warning_s = 60.0;                       // HOROVOD_STALL_CHECK_TIME_SECONDS
  double stall_shutdown_s = 0.0;                       // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS
  bool malloc_reuse = true;                            // HOROVOD_MALLOC_REUSE (malloc_tuning.h)
  // Allreduces of at least shm_min_bytes between ranks that all share one host
  // go through shared memory (shm_allreduce.h) in blocks of shm_slot_bytes.
  // How long a rank waiting for its peers (Gloo socket-mesh transfers, the MPI
  // per-round exchange) keeps retrying, yielding the core, before it sleeps.
  int64_t spin_us = 5000;                              // HOROVOD_SPIN_US
  bool shm_allreduce = true;                           // HOROVOD_SHM_ALLREDUCE
  int64_t shm_min_bytes = 256 * 1024;                  // HOROVOD_SHM_MIN_BYTES
  int64_t shm_slot_bytes = 1024 * 1024;                // HOROVOD_SHM_SLOT_BYTES (>= 4096)

  // Fails with a message naming the variable when a knob is malformed.
  static Status FromEnvironment(Parameters* out);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_PARAMETERS_H_
