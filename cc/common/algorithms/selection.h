// Which allreduce algorithm runs a response: one table, read top to bottom,
// the first row whose condition holds wins (selection.cc). The transports
// never decide this; they only say what they can do (AllreduceCase).
//
// To add an algorithm (hierarchical, NCCL, Adasum, ...): add its enumerator,
// the facts its condition needs to AllreduceCase, one row to kAllreduceTable
// at the place where it should win, and its Run in allreduce_runner.cc.
//
//   AllreduceCase c{ReduceOp::SUM, 4096, 2, true, true, false};
//   SelectAllreduce(c, params);  // AllreduceAlgorithm::GATHER
//   SelectAllgather(AllgatherCase{4, true}, params);  // HIERARCHICAL if the knob is on
#ifndef TFHVD_COMMON_ALGORITHMS_SELECTION_H_
#define TFHVD_COMMON_ALGORITHMS_SELECTION_H_

#include <cstdint>

#include "cc/common/common.h"
#include "cc/common/parameters.h"

namespace tfhvd {

enum class AllreduceAlgorithm : uint8_t {
  COPY,           // one rank: output = input
  ADASUM,         // adasum_allreduce.h: op=Adasum
  HIERARCHICAL,   // hierarchical_allreduce.h: within hosts, then across
  GATHER,         // gather_allreduce.h: one round, latency-bound sizes
  SHARED_MEMORY,  // shm_collectives.h: every rank on this host
  BACKEND,        // the backend's own allreduce (MPI_Allreduce)
  RING,           // ring_allreduce.h: bandwidth-bound sizes over the links
};

const char* AllreduceAlgorithmName(AllreduceAlgorithm a);

// What is known about one allreduce when it is about to run.
struct AllreduceCase {
  ReduceOp op = ReduceOp::SUM;
  int64_t bytes = 0;
  int ranks = 1;
  bool one_host = false;         // every rank on this host
  bool shm_ready = false;        // the shared-memory regions are mapped
  bool backend_allreduce = false;  // the backend has a tuned allreduce of its own
  // Several hosts, each with the same number of ranks, and their local and
  // cross link sets are open.
  bool hierarchical_ready = false;
};

AllreduceAlgorithm SelectAllreduce(const AllreduceCase& c, const Parameters& knobs);

// The allgather's table (HOROVOD_HIERARCHICAL_ALLGATHER), the same way.
enum class AllgatherAlgorithm : uint8_t {
  HIERARCHICAL,   // hierarchical_allgather.h: across hosts, then within hosts
  SHARED_MEMORY,  // shm_collectives.h: every rank on this host
  RING,           // ring_allreduce.h's allgather over the links
  BACKEND,        // the transport's allgather (MPI_Allgatherv)
};

const char* AllgatherAlgorithmName(AllgatherAlgorithm a);

struct AllgatherCase {
  int ranks = 1;
  // Several hosts, each with the same number of ranks, and their local and
  // cross link sets are open.
  bool hierarchical_ready = false;
  int64_t bytes = 0;       // the gathered result's
  bool shm_ready = false;  // every rank on this host, the shared-memory regions mapped
  bool backend_tuned = false;  // the backend's collectives are tuned for its network (MPI)
};

AllgatherAlgorithm SelectAllgather(const AllgatherCase& c, const Parameters& knobs);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SELECTION_H_
