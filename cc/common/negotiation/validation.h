// The coordinator's check that every rank asked for the same collective on a
// tensor, producing the operation's Response or an ERROR Response whose
// message names the tensor and what each rank sent.
#ifndef TFHVD_COMMON_NEGOTIATION_VALIDATION_H_
#define TFHVD_COMMON_NEGOTIATION_VALIDATION_H_

#include <string>
#include <vector>

#include "cc/common/negotiation/message.h"

namespace tfhvd {

// requests[r] is rank r's request; present[r] says whether rank r sent one
// (ranks that joined early send none). joined lists ranks that have joined.
// Messages name rank r as rank_names[r] when given (a process set's members
// by global rank).
Response BuildResponse(const std::string& name, const std::vector<Request>& requests,
                       const std::vector<bool>& present, const std::vector<bool>& joined,
                       int size, const std::vector<int>& rank_names = {});

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_VALIDATION_H_
