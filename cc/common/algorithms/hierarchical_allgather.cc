#include "cc/common/algorithms/hierarchical_allgather.h"

#include <cstring>
#include <string>

namespace tfhvd {

namespace {

// The link sets and the grid must describe the same hosts: the grid places
// the blocks, the sets carry them.
Status CheckGrid(const TopologyLinks& topo) {
  if (!topo.local || !topo.cross || topo.hosts.empty()) {
    return Status::Precondition("the hierarchical allgather's link sets are not open");
  }
  const LinkSet& local = *topo.local;
  const LinkSet& cross = *topo.cross;
  const size_t l = static_cast<size_t>(local.rank()), c = static_cast<size_t>(cross.rank());
  bool same = topo.hosts.size() == static_cast<size_t>(cross.size()) &&
              topo.hosts[c].size() == static_cast<size_t>(local.size());
  for (size_t h = 0; same && h < topo.hosts.size(); ++h) {
    same = topo.hosts[h].size() == static_cast<size_t>(local.size()) &&
           topo.hosts[h][l] == cross.global_rank(static_cast<int>(h));
  }
  for (size_t j = 0; same && j < topo.hosts[c].size(); ++j) {
    same = topo.hosts[c][j] == local.global_rank(static_cast<int>(j));
  }
  if (!same) {
    return Status::Precondition("the hierarchical allgather's host grid does not match its "
                                "link sets (local " + local.Describe() + ", cross " +
                                cross.Describe() + ")");
  }
  return Status();
}

}  // namespace

Status HierarchicalAllgather::Run(const TopologyLinks& topo, const void* input, void* output,
                                  const std::vector<int64_t>& bytes) {
  Status s = CheckGrid(topo);
  if (!s.ok()) return s;
  LinkSet& local = *topo.local;
  LinkSet& cross = *topo.cross;
  const auto& hosts = topo.hosts;
  const size_t ranks = hosts.size() * hosts[0].size();
  if (bytes.size() != ranks) {
    return Status::InvalidArgument("hierarchical allgather: " + std::to_string(bytes.size()) +
                                   " block sizes for a job of " + std::to_string(ranks) +
                                   " ranks");
  }
  std::vector<int64_t> offset(ranks + 1, 0);
  for (size_t r = 0; r < ranks; ++r) offset[r + 1] = offset[r] + bytes[r];
  char* out = static_cast<char*>(output);
  auto block = [&](int r) { return out + offset[static_cast<size_t>(r)]; };
  auto size = [&](int r) { return static_cast<size_t>(bytes[static_cast<size_t>(r)]); };

  const int me = local.global_rank(local.rank());
  if (size(me) > 0 && input != block(me)) std::memmove(block(me), input, size(me));
  // 1. Across hosts, among the ranks of this local rank: pairwise, so every
  //    pair meets once and both directions of a link carry bytes at once.
  const int c = cross.rank(), hosts_n = cross.size();
  for (int k = 1; k < hosts_n; ++k) {
    const int to = (c + k) % hosts_n, from = (c - k + hosts_n) % hosts_n;
    const int theirs = cross.global_rank(from);
    s = cross.Exchange(to, block(me), size(me), from, block(theirs), size(theirs));
    if (!s.ok()) return s;
  }
  // 2. Within the host: local rank l now holds column l (local rank l of
  //    every host); each pair of local ranks swaps columns, host by host.
  const int l = local.rank(), local_n = local.size();
  for (int k = 1; k < local_n; ++k) {
    const int to = (l + k) % local_n, from = (l - k + local_n) % local_n;
    for (const auto& host : hosts) {
      const int mine = host[static_cast<size_t>(l)], theirs = host[static_cast<size_t>(from)];
      s = local.Exchange(to, block(mine), size(mine), from, block(theirs), size(theirs));
      if (!s.ok()) return s;
    }
  }
  return Status();
}

}  // namespace tfhvd
