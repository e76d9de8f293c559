// Allgather in two levels for jobs on several hosts (HOROVOD_HIERARCHICAL_ALLGATHER):
//   1. across hosts: each rank exchanges its block with the ranks that have
//      its local rank on the other hosts (its cross set), so every block
//      crosses the network once per other host, and every rank of a host
//      uses the network at once (no leader that carries the host's bytes);
//   2. within the host: the ranks of the host share the blocks they hold
//      (over the local links, pairwise).
// Every block is written at its rank's place in the output, so the output is
// byte for byte the flat allgather's (the blocks concatenated in rank order)
// for any placement of ranks on hosts (host-major or interleaved) and any
// block sizes (ragged first dimensions, zero included). Needs every host to
// run the same number of ranks (TopologyLinks::homogeneous).
//
//   // ranks 0,1 on host A and 2,3 on host B; rank r sends r+1 bytes
//   std::vector<int64_t> bytes = {1, 2, 3, 4};
//   Status s = HierarchicalAllgather::Run(topo, mine, out, bytes);  // out: 10 bytes
#ifndef TFHVD_COMMON_ALGORITHMS_HIERARCHICAL_ALLGATHER_H_
#define TFHVD_COMMON_ALGORITHMS_HIERARCHICAL_ALLGATHER_H_

#include <cstdint>
#include <vector>

#include "cc/common/algorithms/topology_links.h"

namespace tfhvd {

class HierarchicalAllgather {
 public:
  // bytes[r]: the size of rank r's block (r: a rank of the links topo was
  // opened over); input holds this rank's block (may be null when it is
  // empty); output receives the sum of bytes.
  static Status Run(const TopologyLinks& topo, const void* input, void* output,
                    const std::vector<int64_t>& bytes);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_HIERARCHICAL_ALLGATHER_H_
