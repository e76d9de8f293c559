#include "cc/common/core/fault_record.h"

#include <cerrno>
#include <cstdlib>

namespace tfhvd {

namespace {
const char kCulprit[] = "culprit=";
const char kKind[] = "kind=";
}  // namespace

std::string FaultRecord::Text() const {
  return kCulprit + std::to_string(culprit) + "\n" + kKind + kind + "\n" + message;
}

bool FaultRecord::Parse(const std::string& text, FaultRecord* out) {
  const size_t nl1 = text.find('\n');
  if (nl1 == std::string::npos || text.compare(0, sizeof(kCulprit) - 1, kCulprit) != 0) {
    return false;
  }
  const size_t kind_at = nl1 + 1;
  if (text.compare(kind_at, sizeof(kKind) - 1, kKind) != 0) return false;
  const std::string number = text.substr(sizeof(kCulprit) - 1, nl1 - (sizeof(kCulprit) - 1));
  char* end = nullptr;
  errno = 0;
  const long culprit = std::strtol(number.c_str(), &end, 10);
  if (number.empty() || *end != '\0' || errno != 0) return false;
  const size_t nl2 = text.find('\n', kind_at);
  FaultRecord r;
  r.culprit = static_cast<int>(culprit);
  const size_t kind_start = kind_at + sizeof(kKind) - 1;
  r.kind = text.substr(kind_start, nl2 == std::string::npos ? nl2 : nl2 - kind_start);
  if (nl2 != std::string::npos) r.message = text.substr(nl2 + 1);
  *out = std::move(r);
  return true;
}

}  // namespace tfhvd
