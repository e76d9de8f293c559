// Tensor fusion planning: merges compatible allreduce responses (same dtype,
// reduce op and scaling; a group's members sit next to each other) into
// responses whose tensors are reduced together in one collective, each up to
// the fusion threshold.
#ifndef TFHVD_COMMON_NEGOTIATION_FUSION_H_
#define TFHVD_COMMON_NEGOTIATION_FUSION_H_

#include <cstdint>
#include <vector>

#include "cc/common/negotiation/message.h"

namespace tfhvd {

// threshold_bytes == 0 disables fusion. separate_groups
// (HOROVOD_DISABLE_GROUP_FUSION): tensors of a grouped allreduce fuse only with
// tensors of the same group.
std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    bool separate_groups = false);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_FUSION_H_
