#include "cc/common/transport/link_set.h"

#include <set>

namespace tfhvd {

std::string LinkSet::Describe() const {
  std::string text = members_.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < members_.size(); ++i) {
    text += (i ? "," : "") + std::to_string(members_[i]);
  }
  return text;
}

Status FindMember(const std::vector<int>& members, int job_size, int my_rank, int* index) {
  if (members.empty()) return Status::InvalidArgument("a link set needs at least one rank");
  std::set<int> seen;
  *index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    int r = members[i];
    if (r < 0 || r >= job_size) {
      return Status::InvalidArgument("rank " + std::to_string(r) +
                                     " is not in a job of " + std::to_string(job_size) +
                                     " ranks");
    }
    if (!seen.insert(r).second) {
      return Status::InvalidArgument("rank " + std::to_string(r) +
                                     " is listed twice in a link set");
    }
    if (r == my_rank) *index = static_cast<int>(i);
  }
  if (*index < 0) {
    return Status::InvalidArgument("rank " + std::to_string(my_rank) +
                                   " opened a link set it is not a member of");
  }
  return Status();
}

Status SubsetLinks::Peer(int set_rank, int* global) const {
  if (set_rank < 0 || set_rank >= size()) {
    return Status::InvalidArgument("no rank " + std::to_string(set_rank) + " in a link set of " +
                                   std::to_string(size()) + " (" + Describe() + ")");
  }
  *global = global_rank(set_rank);
  return Status();
}

Status SubsetLinks::Send(int to, const void* data, size_t bytes) {
  int g = 0;
  Status s = Peer(to, &g);
  return s.ok() ? parent_->Send(g, data, bytes) : s;
}

Status SubsetLinks::Recv(int from, void* data, size_t bytes) {
  int g = 0;
  Status s = Peer(from, &g);
  return s.ok() ? parent_->Recv(g, data, bytes) : s;
}

Status SubsetLinks::Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                             size_t recv_bytes) {
  int gt = 0, gf = 0;
  Status s = Peer(to, &gt);
  if (s.ok()) s = Peer(from, &gf);
  return s.ok() ? parent_->Exchange(gt, send, send_bytes, gf, recv, recv_bytes) : s;
}

Status SubsetLinks::StartExchange(int to, const void* send, size_t send_bytes, int from,
                                  void* recv, size_t recv_bytes) {
  int gt = 0, gf = 0;
  Status s = Peer(to, &gt);
  if (s.ok()) s = Peer(from, &gf);
  return s.ok() ? parent_->StartExchange(gt, send, send_bytes, gf, recv, recv_bytes) : s;
}

Status MakeSubsetLinks(Links* parent, const std::vector<int>& members,
                       std::unique_ptr<LinkSet>* out) {
  int index = 0;
  Status s = FindMember(members, parent->size(), parent->rank(), &index);
  if (!s.ok()) return s;
  out->reset(new SubsetLinks(parent, members, index));
  return Status();
}

}  // namespace tfhvd
