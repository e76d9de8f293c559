// Rank 0's negotiation state: the table of requests received from every rank,
// join bookkeeping, and the construction of the ordered response list once a
// tensor has been requested by all ranks.
#ifndef TFHVD_COMMON_NEGOTIATION_COORDINATOR_H_
#define TFHVD_COMMON_NEGOTIATION_COORDINATOR_H_

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "cc/common/negotiation/message.h"
#include "cc/common/parameters.h"
#include "cc/common/negotiation/stall_inspector.h"

namespace tfhvd {

class Coordinator {
 public:
  // A process set's coordinator names the set (label) in its errors and
  // reports its members by global rank (global_ranks[set rank]).
  Coordinator(int size, const Parameters& params, const std::string& label = "",
              const std::vector<int>& global_ranks = {});

  void Add(const RequestList& list);
  // Responses for every tensor now requested by all (non-joined) ranks, in
  // the order tensors first arrived; a group's tensors only once all of them
  // are, and then together. When tensors stalled past
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, returns instead one ERROR response
  // naming them and the missing ranks, and sets *stall_shutdown: the job ends.
  std::vector<Response> TakeReadyResponses(bool* stall_shutdown = nullptr);
  // True while some tensor waits for ranks (the stall inspector needs rounds).
  bool HasPending() const { return !order_.empty(); }

 private:
  struct Pending {
    std::vector<Request> requests;  // by rank
    std::vector<bool> submitted;    // by rank
    int count = 0;
    std::chrono::steady_clock::time_point first_seen;
  };
  bool Ready(const Pending& p) const;
  const Request& AnyRequest(const Pending& p) const;  // a submitted rank's request
  // Decides a group this round: when every member is ready on every rank,
  // appends the members' responses (together, in order) to *out; when a ready
  // member is invalid, appends one ERROR naming the group, its tensors and
  // what differed. Returns true when the group was decided (and erased).
  bool TakeGroup(const std::string& group, const std::vector<std::string>& members,
                 std::vector<Response>* out);

  int size_;
  std::string label_;
  std::vector<int> global_ranks_;  // empty: set rank = global rank
  std::unordered_map<std::string, Pending> table_;
  std::vector<std::string> order_;
  std::vector<bool> joined_;
  std::vector<std::string> join_names_;
  int joined_count_ = 0;
  int last_joined_ = -1;
  StallInspector stall_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_COORDINATOR_H_
