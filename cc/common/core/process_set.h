// A process set: a subset of the job's ranks that runs collectives on its own
// (Horovod's hvd.ProcessSet). Each set negotiates separately: its own tensor
// queue (names are matched only within the set), its own controller and
// coordinator (the set's first rank), response cache and fusion, and its own
// allreduce runner over links among its members (subset_transport.h), with
// shared memory only when all its members share one host. The background
// thread runs one negotiation round per set it belongs to, in id order, so a
// set whose members wait for a tensor never holds up another set.
//
// Set 0 is the global set (every rank, the global transport itself).
//
//   auto set = ProcessSet::Create(1, {0, 2}, global_transport, global_topology,
//                                 host_keys, params);
//   set->label;                 // "process set 1 (ranks 0, 2)"
//   set->topology.rank;         // this rank's position in the set (member only)
#ifndef TFHVD_COMMON_CORE_PROCESS_SET_H_
#define TFHVD_COMMON_CORE_PROCESS_SET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cc/common/algorithms/allreduce_runner.h"
#include "cc/common/core/collective_ops.h"
#include "cc/common/negotiation/controller.h"
#include "cc/common/parameters.h"
#include "cc/common/negotiation/tensor_queue.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

struct ProcessSet {
  int32_t id = 0;
  std::vector<int> ranks;   // global ranks, ascending
  int index = -1;           // this rank's position in ranks; -1: not a member
  Topology topology;        // within the set (members only): rank, size, local_*, cross_*
  std::string label;        // "process set 1 (ranks 0, 2)"; "the global process set" for 0
  TensorQueue* queue = nullptr;      // members only
  Transport* transport = nullptr;    // members only
  std::unique_ptr<TensorQueue> own_queue;
  std::unique_ptr<Transport> own_transport;
  std::unique_ptr<AllreduceRunner> allreduce;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<CollectiveOps> ops;
  std::atomic<bool> removed{false};

  bool member() const { return index >= 0; }
  // The set rank of a global rank, -1 when it is not a member.
  int SetRank(int global_rank) const;

  // A set of `ranks` (validated, ascending) for this process. Members get a
  // queue, a transport over a link set among them (opening it is collective
  // over the members: under MPI it makes a communicator), a controller and an
  // allreduce runner; Open() must then be called by every member at the same
  // point.
  static Status Create(int32_t id, std::vector<int> ranks, Transport* global,
                       const Topology& global_topology, const std::vector<std::string>& host_keys,
                       const Parameters& params, std::unique_ptr<ProcessSet>* out);
  // The global set over the global transport and queue; gpu (nullptr in the
  // CPU variant) runs or stages its GPU tensors. Other sets have no GPU
  // backend yet: their GPU tensors fail with an error saying so.
  static std::unique_ptr<ProcessSet> Global(Transport* global, const Topology& topology,
                                            TensorQueue* queue, const Parameters& params,
                                            GpuBackend* gpu = nullptr);
  // Collective among the members: maps the shared-memory regions when they
  // share one host.
  Status Open();
  void Close();
  // Whether this set's negotiation rounds can pause (Controller::
  // ComputeResponseList's `paused`): on one host, where the bit exchange goes
  // through shared memory; or never need to (a set of one rank).
  bool RoundsPause() const;
};

std::string ProcessSetLabel(int32_t id, const std::vector<int>& ranks);
std::string RankListText(const std::vector<int>& ranks);  // "0, 2"

// Checks a set's ranks for a job of `size` ranks: non-empty, in range, no
// rank twice. On success *sorted holds them in ascending order.
Status ValidateProcessSetRanks(const std::vector<int>& ranks, int size, std::vector<int>* sorted);

// Identifies this process's host (host name and network namespace): equal
// keys mean the same machine, so shared memory works between them.
std::string HostKey();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_PROCESS_SET_H_
