// The process sets of a job by id (0: the global set), with their lock and the
// next free id, and the collective steps that add and remove sets. Ops look sets
// up from any thread; only the background thread adds and removes them, at the
// same point of the global negotiation on every rank.
//
//   ProcessSetTable table;
//   table.Reset(ProcessSet::Global(...), SetContext{transport, topology, params});
//   table.OpenStatic({{0, 2}});            // hvd.init(process_sets=[[0, 2]]) -> id 1
//   table.Find(1)->label;                  // "process set 1 (ranks 0, 2)"
#ifndef TFHVD_COMMON_CORE_PROCESS_SET_TABLE_H_
#define TFHVD_COMMON_CORE_PROCESS_SET_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cc/common/core/process_set.h"

namespace tfhvd {

// What new sets are built over: the global transport and topology, the knobs.
struct SetContext {
  Transport* transport = nullptr;
  Topology topology;
  Parameters params;
};

// Runs one allgather of int32 words through the global negotiation (the
// facade's Enqueue on set 0); its callback runs on the background thread.
using EnqueueGlobal = std::function<Status(TensorTableEntry)>;

class ProcessSetTable {
 public:
  // Forgets every set and starts a job's table with its global set.
  void Reset(std::shared_ptr<ProcessSet> global, const SetContext& context);
  void Clear();
  // Collective at start-up: every rank's host key (for the sets' topology) and
  // the static sets (hvd.init(process_sets=...)), the same list on every rank.
  Status OpenStatic(const std::vector<std::vector<int>>& requested, const std::string& host_key);

  std::shared_ptr<ProcessSet> Find(int32_t id) const;
  // The id of a set with exactly these (ascending) ranks, or -1.
  int32_t FindByRanks(const std::vector<int>& ranks) const;
  // The sets this rank is a member of, in id order (the order every rank runs
  // their rounds in); *several: the table has more than the global set.
  std::vector<std::shared_ptr<ProcessSet>> MemberSets(bool* several) const;
  std::map<int32_t, std::shared_ptr<ProcessSet>> Snapshot() const;
  std::vector<std::pair<int32_t, std::vector<int>>> Ranks() const;

  // Collective over all ranks (every rank calls it with the same ranks, in the
  // same order): registers and opens a set of `ranks`; *id = -1 when a set of
  // these ranks exists already.
  Status AddEverywhere(const std::vector<int>& ranks, const EnqueueGlobal& enqueue, int32_t* id);
  // Collective like AddEverywhere: removes set `id`, failing its pending
  // collectives; *removed = false when there is no such set (or id is 0).
  Status RemoveEverywhere(int32_t id, const EnqueueGlobal& enqueue, bool* removed);

 private:
  // Registers and opens a set (the same point on every rank).
  Status Register(std::vector<int> ranks, int32_t* id);

  mutable std::mutex mutex_;
  std::map<int32_t, std::shared_ptr<ProcessSet>> sets_;
  int32_t next_id_ = 1;
  SetContext context_;
  std::vector<std::string> host_keys_;  // by global rank
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_PROCESS_SET_TABLE_H_
