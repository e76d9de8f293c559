#include "cc/common/transport/transport.h"

#include "cc/common/transport/link_collectives.h"

namespace tfhvd {

Status Transport::GatherBytes(const std::string& mine, std::vector<std::string>* all) {
  return GatherStrings(*links(), mine, all);
}

Status Transport::BroadcastBytes(std::string* data, int root) {
  return BroadcastString(*links(), data, root);
}

Status Transport::BitwiseOr(uint64_t* words, size_t n) {
  return BitwiseOrWords(*links(), words, n, &or_scratch_);
}

}  // namespace tfhvd
