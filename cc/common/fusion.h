// Tensor fusion planning: merges consecutive compatible allreduce responses
// into one response whose tensors are reduced together in one collective.
#ifndef TFHVD_COMMON_FUSION_H_
#define TFHVD_COMMON_FUSION_H_

#include <cstdint>
#include <vector>

#include "cc/common/message.h"

namespace tfhvd {

// threshold_bytes == 0 disables fusion.
std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_FUSION_H_
