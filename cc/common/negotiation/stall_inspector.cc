#include "cc/common/negotiation/stall_inspector.h"

#include <sstream>

#include "cc/common/logging.h"

namespace tfhvd {

void StallInspector::StartRound() {
  auto now = Clock::now();
  warn_this_round_ = params_.stall_check &&
                     now - last_warning_ >= std::chrono::duration<double>(params_.stall_warning_s);
}

bool StallInspector::Check(const std::string& name, const char* op, Clock::time_point first_seen,
                           const std::vector<bool>& submitted, std::string* message) {
  if (!params_.stall_check) return false;
  double waited = std::chrono::duration<double>(Clock::now() - first_seen).count();
  const bool can_fail = params_.stall_shutdown_s > 0;
  if (waited < params_.stall_warning_s && (!can_fail || waited < params_.stall_shutdown_s)) {
    return false;
  }
  std::ostringstream missing, ready;
 for (size_t r = 0, m = 0, k = 0; r < submitted.size(); ++r) {
    int name = r < global_ranks_.size() ? global_ranks_[r] : static_cast<int>(r);
    (submitted[r] ? ready : missing) << ((submitted[r] ? k++ : m++) ? "," : "") << name;
  }
  std::ostringstream out;
  if (!label_.empty()) out << label_ << ": ";
  out << "tensor '" << name << "' (" << op << ") has waited " << static_cast<int>(waited)
      << " s: submitted by ranks [" << ready.str() << "] but not yet by ranks ["
      << missing.str() << "]; the ranks may be running different code paths, or be stuck";
  *message = out.str();
  bool fail = can_fail && waited >= params_.stall_shutdown_s;
  if (warn_this_round_ && !fail) {
    TFHVD_LOG(WARNING) << "Stall detected: " << *message;
    last_warning_ = Clock::now();
  }
  return fail;
}

}  // namespace tfhvd
