#include "cc/common/coordinator.h"

#include <algorithm>

#include "cc/common/timeline.h"
#include "cc/common/validation.h"

namespace tfhvd {

Coordinator::Coordinator(int size, const Parameters& params)
    : size_(size), joined_(static_cast<size_t>(size), false), stall_(params) {}

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

std::vector<Response> Coordinator::TakeReadyResponses(bool* stall_shutdown) {
  std::vector<Response> out;
  std::vector<std::string> remaining;
  Response stalled;
  stalled.kind = Response::ERROR;
  stalled.error_code = Status::ABORTED;
  stall_.StartRound();
  for (const std::string& name : order_) {
    Pending& p = table_[name];
    if (Ready(p)) {
      out.push_back(BuildResponse(name, p.requests, p.submitted, joined_, size_));
      GlobalTimeline().NegotiateEnd(name);
      table_.erase(name);
      continue;
    }
    const Request* any = nullptr;
    for (size_t r = 0; r < p.submitted.size() && !any; ++r)
      if (p.submitted[r]) any = &p.requests[r];
    std::string message;
    if (stall_.Check(name, OpTypeName(any->type), p.first_seen, p.submitted, &message)) {
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
  return out;
}

}  // namespace tfhvd
