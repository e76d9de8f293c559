// The two link sets of the hierarchical collectives: `local`, the ranks of
// this host in local-rank order, and `cross`, the ranks that have this
// rank's local rank, one per host, in cross-rank order. Built from the
// layout the launcher gives (HOROVOD_LOCAL_RANK, HOROVOD_CROSS_RANK, or MPI's
// shared-memory split): every rank's (cross_rank, local_rank) is gathered
// once over the job's links, so every rank derives the same sets.
//
//   TopologyLinks topo;
//   Status s = OpenTopologyLinks(*transport->links(), topology,
//       [&](const std::vector<int>& m, std::unique_ptr<LinkSet>* out) {
//         return transport->OpenLinkSet(m, out); }, &topo);
//   // ranks 0,1 on host A and 2,3 on host B: rank 3 has local {2,3}, cross {1,3}
#ifndef TFHVD_COMMON_ALGORITHMS_TOPOLOGY_LINKS_H_
#define TFHVD_COMMON_ALGORITHMS_TOPOLOGY_LINKS_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "cc/common/transport/link_set.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

struct TopologyLinks {
  std::unique_ptr<LinkSet> local;  // this host's ranks
  std::unique_ptr<LinkSet> cross;  // one rank per host: those with this local rank
  // Every host runs the same number of ranks (the hierarchical allreduce
  // needs it: chunk l of every host meets on the cross set of local rank l).
  bool homogeneous = false;
  // hosts[h][l]: the rank (in the job's links) of local rank l on host h,
  // hosts in cross-rank order; filled when homogeneous. The hierarchical
  // allgather places every rank's block by it.
  std::vector<std::vector<int>> hosts;
  void Close() {
    cross.reset();
    local.reset();
    hosts.clear();
  }
};

using OpenLinkSetFn =
    std::function<Status(const std::vector<int>& members, std::unique_ptr<LinkSet>* out)>;

// From every rank's (cross_rank, local_rank), indexed by global rank: the
// members of `rank`'s local and cross sets. Fails, naming the ranks, when two
// ranks claim the same place or a host's local ranks are not 0..n-1.
Status TopologyMembers(const std::vector<std::pair<int, int>>& places, int rank,
                       std::vector<int>* local, std::vector<int>* cross, bool* homogeneous);

// The same places as a grid: (*hosts)[h][l] is the global rank of local rank l
// on the h-th host (in cross-rank order). Fails as TopologyMembers does.
Status TopologyHosts(const std::vector<std::pair<int, int>>& places,
                     std::vector<std::vector<int>>* hosts);

// Collective over the job: gathers the places over `job`, then opens the
// local set, then the cross set, through `open`.
Status OpenTopologyLinks(Links& job, const Topology& topology, const OpenLinkSetFn& open,
                         TopologyLinks* out);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_TOPOLOGY_LINKS_H_
