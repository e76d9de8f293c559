// Watches tensors that some ranks submitted and others did not: warns (on the
// coordinator) naming the missing ranks after HOROVOD_STALL_CHECK_TIME_SECONDS
// and, with HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, turns the stall into an error.
#ifndef TFHVD_COMMON_NEGOTIATION_STALL_INSPECTOR_H_
#define TFHVD_COMMON_NEGOTIATION_STALL_INSPECTOR_H_

#include <chrono>
#include <string>
#include <vector>

#include "cc/common/parameters.h"

namespace tfhvd {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;
  // label/global_ranks: a process set's name and its members' global ranks
  // (the warnings name both); empty for the global set.
  explicit StallInspector(const Parameters& params, const std::string& label = "",
                          const std::vector<int>& global_ranks = {})
      : params_(params), label_(label), global_ranks_(global_ranks) {}

  // Called per pending tensor each round. Logs a warning at most once per
  // warning period; returns true when the tensor has stalled past the
  // shutdown time and should fail. *message describes the stall.
  bool Check(const std::string& name, const char* op, Clock::time_point first_seen,
             const std::vector<bool>& submitted, std::string* message);
  void StartRound();

 private:
  Parameters params_;
  std::string label_;
  std::vector<int> global_ranks_;
  Clock::time_point last_warning_{};
  bool warn_this_round_ = false;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_STALL_INSPECTOR_H_
