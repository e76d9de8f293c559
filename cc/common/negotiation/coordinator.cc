#include "cc/common/negotiation/coordinator.h"

#include <algorithm>

#include "cc/common/timeline/timeline.h"
#include "cc/common/negotiation/validation.h"

namespace tfhvd {

Coordinator::Coordinator(int size, const Parameters& params, const std::string& label,
                         const std::vector<int>& global_ranks)
    : size_(size),
      label_(label),
      global_ranks_(global_ranks),
      joined_(static_cast<size_t>(size), false),
      stall_(params, label, global_ranks) {}

void Coordinator::Add(const RequestList& list) {
  for (const Request& q : list.requests) {
    auto r = static_cast<size_t>(q.rank);
    if (q.type == OpType::JOIN) {
      if (!joined_[r]) {
        joined_[r] = true;
        ++joined_count_;
      }
      last_joined_ = q.rank;
      join_names_.push_back(q.name);
      continue;
    }
    auto it = table_.find(q.name);
    if (it == table_.end()) {
      Pending p;
      p.requests.resize(static_cast<size_t>(size_));
      p.submitted.assign(static_cast<size_t>(size_), false);
      p.first_seen = std::chrono::steady_clock::now();
      it = table_.emplace(q.name, std::move(p)).first;
      order_.push_back(q.name);
      GlobalTimeline().NegotiateStart(q.name, q.type);
    }
    Pending& p = it->second;
    if (!p.submitted[r]) {
      p.submitted[r] = true;
      ++p.count;
      GlobalTimeline().NegotiateRankReady(q.name, q.rank);
    }
    p.requests[r] = q;
  }
}

bool Coordinator::Ready(const Pending& p) const {
  int covered = p.count;
  for (size_t r = 0; r < joined_.size(); ++r) covered += (joined_[r] && !p.submitted[r]);
  return covered == size_;
}

const Request& Coordinator::AnyRequest(const Pending& p) const {
  for (size_t r = 0; r < p.submitted.size(); ++r)
    if (p.submitted[r]) return p.requests[r];
  return p.requests.front();
}

std::vector<Response> Coordinator::TakeReadyResponses(bool* stall_shutdown) {
  std::vector<Response> out;
  std::vector<std::string> remaining;
  Response stalled;
  stalled.kind = Response::ERROR;
  stalled.error_code = Status::ABORTED;
  stall_.StartRound();
  // The members of every pending group, in arrival order.
  std::unordered_map<std::string, std::vector<std::string>> groups;
  for (const std::string& name : order_) {
    const Request& q = AnyRequest(table_[name]);
    if (!q.group.empty()) groups[q.group].push_back(name);
  }
  std::unordered_map<std::string, bool> group_done;  // decided this round
  for (const std::string& name : order_) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;  // decided with its group this round
    Pending& p = it->second;
    const std::string group = AnyRequest(p).group;
    if (!group.empty()) {
      auto decided = group_done.find(group);
      if (decided == group_done.end()) {
        decided = group_done.emplace(group, TakeGroup(group, groups[group], &out)).first;
      }
      if (decided->second) continue;  // performed or failed as a whole
    } else if (Ready(p)) {
      out.push_back(BuildResponse(name, p.requests, p.submitted, joined_, size_, global_ranks_));
      GlobalTimeline().NegotiateEnd(name);
      table_.erase(name);
      continue;
    }
    std::string message;
    if (stall_.Check(name, OpTypeName(AnyRequest(p).type), p.first_seen, p.submitted,
                     &message)) {
      stalled.error += (stalled.names.empty() ? "" : "; ") + message;
      stalled.names.push_back(name);
    }
    remaining.push_back(name);
  }
  if (!stalled.names.empty()) {
    // Every rank stops at once, whether it submitted the tensors or not.
    stalled.error = "stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS): " + stalled.error +
                    "; Horovod stopped on every rank";
    if (stall_shutdown) *stall_shutdown = true;
    order_.swap(remaining);
    return {std::move(stalled)};
  }
  order_.swap(remaining);
  if (joined_count_ == size_) {
    Response join;
    join.type = OpType::JOIN;
    join.names = join_names_;
    join.last_joined_rank = last_joined_;
    out.push_back(std::move(join));
    joined_.assign(static_cast<size_t>(size_), false);
    joined_count_ = 0;
    join_names_.clear();
    last_joined_ = -1;
  }
  if (!label_.empty()) {
    for (Response& r : out)
      if (r.kind == Response::ERROR) r.error = label_ + ": " + r.error;
  }
  return out;
}

}  // namespace tfhvd

namespace tfhvd {

bool Coordinator::TakeGroup(const std::string& group, const std::vector<std::string>& members,
                            std::vector<Response>* out) {
  // Validate every member that all ranks have sent; one error fails the group.
  std::vector<Response> responses;
  bool complete = true;
  int error_at = -1;
  for (const std::string& name : members) {
    const Pending& p = table_[name];
    if (!Ready(p)) {
      complete = false;
      continue;
    }
    responses.push_back(BuildResponse(name, p.requests, p.submitted, joined_, size_, global_ranks_));
    if (responses.back().kind == Response::ERROR && error_at < 0)
      error_at = static_cast<int>(responses.size()) - 1;
  }
  const int32_t declared = AnyRequest(table_[members.front()]).group_size;
  complete = complete && static_cast<int32_t>(members.size()) >= declared;
  if (error_at < 0 && !complete) return false;
  if (error_at >= 0) {
    const Response* error = &responses[static_cast<size_t>(error_at)];
    Response failed;
    failed.kind = Response::ERROR;
    failed.error_code = error->error_code;
    failed.names = members;
    std::string list;
    for (const std::string& name : members) list += (list.empty() ? "'" : ", '") + name + "'";
    failed.error = "grouped allreduce '" + group + "' (" + std::to_string(members.size()) +
                   " tensors: " + list + ") failed on every rank and none of its tensors ran: " +
                   error->error;
    out->push_back(std::move(failed));
  } else {
    for (auto& r : responses) out->push_back(std::move(r));
  }
  for (const std::string& name : members) {
    GlobalTimeline().NegotiateEnd(name);
    table_.erase(name);
  }
  return true;
}

}  // namespace tfhvd
