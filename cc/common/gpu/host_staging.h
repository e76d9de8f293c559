// Host staging: a GPU tensor that runs on the CPU transport (Gloo or MPI,
// because NCCL is not chosen for the op, or another rank's tensor is on the
// CPU) is copied to host memory, the CPU path runs on the copy, and the result
// is copied back to the device before the op completes.
//
//   Status s = StageThroughHost(&entry, params.nccl_timeout_s);
//   // entry.input/output/allocate_output/callback now use host buffers
#ifndef TFHVD_COMMON_GPU_HOST_STAGING_H_
#define TFHVD_COMMON_GPU_HOST_STAGING_H_

#include "cc/common/negotiation/tensor_queue.h"

namespace tfhvd {

// Copies the entry's input to host memory (after its ready event) and rewires
// the entry so that its output lands in host memory and is copied to the
// device output before its callback runs. On error the entry is unchanged.
Status StageThroughHost(TensorTableEntry* entry, double timeout_s);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_HOST_STAGING_H_
