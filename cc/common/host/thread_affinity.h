// HOROVOD_THREAD_AFFINITY: pins the calling thread (the background thread) to
// one CPU chosen by the local rank.
//
//   "0,2"  local rank 0 on CPU 0, local rank 1 on CPU 2 (one id per local rank)
//   "4"    local rank r on CPU 4 + r
//   ""     not pinned
//
// Example: Status s = PinThisThread(ThreadAffinityCpu(spec, local_rank, local_size, &cpu));
#ifndef TFHVD_COMMON_HOST_THREAD_AFFINITY_H_
#define TFHVD_COMMON_HOST_THREAD_AFFINITY_H_

#include <string>

#include "cc/common/common.h"

namespace tfhvd {

// The CPU for `local_rank` under `spec` into *cpu (-1: not pinned); an error
// names the knob, its value and what is wrong.
Status ThreadAffinityCpu(const std::string& spec, int local_rank, int local_size, int* cpu);

// Pins the calling thread to `cpu` (no-op for -1); fails for a CPU this
// process may not use.
Status PinThisThread(int cpu);

// The CPU the calling thread is pinned to, or -1 when it may run on several.
int PinnedCpu();

// How many CPUs the calling thread may run on (at least 1).
int UsableCpus();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_HOST_THREAD_AFFINITY_H_
