#include "cc/common/negotiation/validation.h"

#include <functional>
#include <map>
#include <sstream>

namespace tfhvd {

namespace {

// The names of the ranks in messages (global ranks of a process set's
// members); empty: a rank is its own name. Set for one BuildResponse call.
thread_local const std::vector<int>* g_rank_names = nullptr;

std::string RankList(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) {
    int r = ranks[i];
    if (g_rank_names && r >= 0 && static_cast<size_t>(r) < g_rank_names->size())
      r = (*g_rank_names)[static_cast<size_t>(r)];
    out << (i ? "," : "") << r;
  }
  return out.str();
}

struct RankNamesScope {
  explicit RankNamesScope(const std::vector<int>& names) {
    g_rank_names = names.empty() ? nullptr : &names;
  }
  ~RankNamesScope() { g_rank_names = nullptr; }
};

// Groups present ranks by key(request). Returns "" when all agree, otherwise
// "tensor 'x': <what> A on ranks 0,2 but B on rank 1".
std::string Disagreement(const std::string& name, const char* what,
                         const std::vector<Request>& requests,
                         const std::vector<bool>& present,
                         const std::function<std::string(const Request&)>& key) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (!present[r]) continue;
    std::string k = key(requests[r]);
    bool placed = false;
    for (auto& g : groups) {
      if (g.first == k) { g.second.push_back(static_cast<int>(r)); placed = true; break; }
    }
    if (!placed) groups.push_back({k, {static_cast<int>(r)}});
  }
  if (groups.size() <= 1) return "";
  std::ostringstream out;
  out << "tensor '" << name << "': mismatched " << what << " across ranks: " << what << " "
      << groups[0].first << " on " << RankList(groups[0].second);
  for (size_t i = 1; i < groups.size(); ++i) {
    out << (i == 1 ? " but " : " and ") << groups[i].first << " on " << RankList(groups[i].second);
  }
  return out.str();
}

std::string Num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Submissions that disagree across ranks fail with PRECONDITION (TensorFlow's
// FailedPreconditionError), the type Horovod raises for them.
Response Error(const std::string& name, const std::string& message) {
  Response r;
  r.kind = Response::ERROR;
  r.names = {name};
  r.error_code = Status::PRECONDITION;
  r.error = message;
  return r;
}

}  // namespace

Response BuildResponse(const std::string& name, const std::vector<Request>& requests,
                       const std::vector<bool>& present, const std::vector<bool>& joined,
                       int size, const std::vector<int>& rank_names) {
  RankNamesScope names(rank_names);
  const Request* first = nullptr;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (present[r]) { first = &requests[r]; break; }
  }
  using Key = std::function<std::string(const Request&)>;
  auto check = [&](const char* what, const Key& key) {
    return Disagreement(name, what, requests, present, key);
  };
  std::string err = check("op", [](const Request& q) { return OpTypeName(q.type); });
  if (err.empty()) err = check("dtype", [](const Request& q) { return DataTypeName(q.dtype); });
  if (err.empty()) {
    err = check("group", [](const Request& q) {
      return q.group.empty() ? std::string("(none)") : "'" + q.group + "'";
    });
  }
  if (err.empty()) {
    err = check("group size", [](const Request& q) { return std::to_string(q.group_size); });
  }
  if (!err.empty()) return Error(name, err);

  OpType type = first->type;
  bool any_joined = false;
  std::vector<int> joined_ranks;
  for (size_t r = 0; r < joined.size(); ++r) {
    if (joined[r] && !present[r]) { any_joined = true; joined_ranks.push_back(static_cast<int>(r)); }
  }
  if (any_joined && type != OpType::ALLREDUCE && type != OpType::ALLGATHER &&
      type != OpType::BARRIER) {
    return Error(name, "tensor '" + name + "': " + OpTypeName(type) + " cannot run while " +
                           RankList(joined_ranks) +
                           " joined; only allreduce and allgather work with join");
  }

  switch (type) {
    case OpType::ALLREDUCE:
    case OpType::BROADCAST:
    case OpType::REDUCESCATTER:
      err = check("shape", [](const Request& q) { return ShapeString(q.shape); });
      break;
    case OpType::ALLGATHER:
    case OpType::ALLTOALL:
      err = check("rank (number of dimensions)",
                  [](const Request& q) { return std::to_string(q.shape.size()); });
      if (err.empty()) {
        err = check("trailing dimensions (all but the first)", [](const Request& q) {
          return ShapeString(Shape(q.shape.begin() + (q.shape.empty() ? 0 : 1), q.shape.end()));
        });
      }
      break;
    default:
      break;
  }
  if (err.empty() && (type == OpType::ALLREDUCE || type == OpType::REDUCESCATTER)) {
    err = check("reduce op", [](const Request& q) { return ReduceOpName(q.reduce_op); });
    if (err.empty()) err = check("prescale_factor", [](const Request& q) { return Num(q.prescale); });
    if (err.empty()) err = check("postscale_factor", [](const Request& q) { return Num(q.postscale); });
  }
  if (err.empty() && type == OpType::BROADCAST) {
    err = check("root_rank", [](const Request& q) { return std::to_string(q.root_rank); });
    if (err.empty() && (first->root_rank < 0 || first->root_rank >= size)) {
      err = "tensor '" + name + "': root_rank " + std::to_string(first->root_rank) +
            " is out of range for " + std::to_string(size) + " ranks";
    }
  }
  if (!err.empty()) return Error(name, err);

  Response r;
  r.type = type;
  r.dtype = first->dtype;
  r.names = {name};
  r.root_rank = first->root_rank;
  r.reduce_op = first->reduce_op;
  r.prescale = first->prescale;
  r.postscale = first->postscale;
  r.group = first->group;
  r.cacheable = !any_joined && type != OpType::BARRIER && type != OpType::JOIN;
  // On the GPU only when every rank's tensor is (else GPU tensors are staged
  // through host memory on their own rank; a joined rank has none).
  r.on_gpu = !any_joined;
  for (size_t k = 0; k < requests.size(); ++k) {
    if (present[k] && !requests[k].on_gpu) r.on_gpu = false;
  }
  if (type == OpType::ALLREDUCE) {
    r.sizes = {NumElements(first->shape)};
  } else if (type == OpType::ALLGATHER) {
    int64_t row = 1;
    for (size_t d = 1; d < first->shape.size(); ++d) row *= first->shape[d];
    r.row_elements = {row};
    for (size_t k = 0; k < requests.size(); ++k) {
      r.sizes.push_back(present[k] && !requests[k].shape.empty() ? requests[k].shape[0] : 0);
    }
  }
  return r;
}

}  // namespace tfhvd
