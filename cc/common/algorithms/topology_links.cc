#include "cc/common/algorithms/topology_links.h"

#include <algorithm>
#include <map>

#include "cc/common/transport/link_collectives.h"

namespace tfhvd {

namespace {

// hosts[cross_rank][local_rank] = global rank, after the checks.
using HostMap = std::map<int, std::map<int, int>>;

Status PlaceRanks(const std::vector<std::pair<int, int>>& places, HostMap* hosts) {
  for (size_t r = 0; r < places.size(); ++r) {
    const int host = places[r].first, local_rank = places[r].second;
    auto inserted = (*hosts)[host].emplace(local_rank, static_cast<int>(r));
    if (!inserted.second) {
      return Status::InvalidArgument(
          "ranks " + std::to_string(inserted.first->second) + " and " + std::to_string(r) +
          " both claim local rank " + std::to_string(local_rank) + " on host (cross rank) " +
          std::to_string(host) + "; check HOROVOD_LOCAL_RANK/HOROVOD_CROSS_RANK");
    }
  }
  for (const auto& host : *hosts) {
    const auto& ranks = host.second;
    if (ranks.rbegin()->first != static_cast<int>(ranks.size()) - 1) {
      return Status::InvalidArgument("the local ranks on host (cross rank) " +
                                     std::to_string(host.first) + " are not 0.." +
                                     std::to_string(ranks.size() - 1));
    }
  }
  return Status();
}

}  // namespace

Status TopologyMembers(const std::vector<std::pair<int, int>>& places, int rank,
                       std::vector<int>* local, std::vector<int>* cross, bool* homogeneous) {
  HostMap hosts;
  Status s = PlaceRanks(places, &hosts);
  if (!s.ok()) return s;
  *homogeneous = true;
  for (const auto& host : hosts)
    *homogeneous &= host.second.size() == hosts.begin()->second.size();
  const std::pair<int, int> mine = places[static_cast<size_t>(rank)];
  local->clear();
  for (const auto& lr : hosts[mine.first]) local->push_back(lr.second);
  cross->clear();
  for (const auto& host : hosts) {
    auto it = host.second.find(mine.second);
    if (it != host.second.end()) cross->push_back(it->second);
  }
  return Status();
}

Status TopologyHosts(const std::vector<std::pair<int, int>>& places,
                     std::vector<std::vector<int>>* hosts) {
  HostMap map;
  Status s = PlaceRanks(places, &map);
  if (!s.ok()) return s;
  hosts->clear();
  for (const auto& host : map) {
    hosts->emplace_back();
    for (const auto& lr : host.second) hosts->back().push_back(lr.second);
  }
  return Status();
}

Status OpenTopologyLinks(Links& job, const Topology& topology, const OpenLinkSetFn& open,
                         TopologyLinks* out) {
  const size_t n = static_cast<size_t>(job.size());
  int32_t mine[2] = {topology.cross_rank, topology.local_rank};
  std::vector<int32_t> all(2 * n);
  Status s = n > 1 ? AllgatherBlocks(job, mine, all.data(), sizeof(mine)) : Status();
  if (n == 1) std::copy(mine, mine + 2, all.begin());
  if (!s.ok()) return s;
  std::vector<std::pair<int, int>> places(n);
  for (size_t r = 0; r < n; ++r) places[r] = {all[2 * r], all[2 * r + 1]};
  std::vector<int> local, cross;
  s = TopologyMembers(places, job.rank(), &local, &cross, &out->homogeneous);
  if (s.ok() && out->homogeneous) s = TopologyHosts(places, &out->hosts);
  if (s.ok()) s = open(local, &out->local);
  if (s.ok()) s = open(cross, &out->cross);
  if (!s.ok()) out->Close();
  return s;
}

}  // namespace tfhvd
