#include "cc/common/core/process_set.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include <limits.h>
#include <unistd.h>

#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/transport/link_collectives.h"
#include "cc/common/negotiation/entry_checks.h"
#include "cc/common/logging.h"
#include "cc/common/transport/subset_transport.h"

namespace tfhvd {

std::string RankListText(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string ProcessSetLabel(int32_t id, const std::vector<int>& ranks) {
  if (id == 0) return "the global process set";
  return "process set " + std::to_string(id) + " (ranks " + RankListText(ranks) + ")";
}

Status ValidateProcessSetRanks(const std::vector<int>& ranks, int size, std::vector<int>* sorted) {
  if (ranks.empty()) {
    return Status::InvalidArgument("a process set needs at least one rank");
  }
  std::vector<int> s = ranks;
  std::sort(s.begin(), s.end());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] < 0 || s[i] >= size) {
      return Status::InvalidArgument("process set [" + RankListText(s) + "] names rank " +
                                     std::to_string(s[i]) + ", but the job has ranks 0.." +
                                     std::to_string(size - 1));
    }
    if (i > 0 && s[i] == s[i - 1]) {
      return Status::InvalidArgument("process set [" + RankListText(s) + "] names rank " +
                                     std::to_string(s[i]) + " twice");
    }
  }
  *sorted = std::move(s);
  return Status();
}

std::string HostKey() {
  char host[HOST_NAME_MAX + 1] = {0};
  gethostname(host, sizeof(host) - 1);
  // Network namespaces on one machine (a test cluster) count as hosts.
  char ns[128] = {0};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  return std::string(host) + "|" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "");
}

int ProcessSet::SetRank(int global_rank) const { return PositionIn(ranks, global_rank); }

Status ProcessSet::Create(int32_t id, std::vector<int> ranks, Transport* global,
                          const Topology& global_topology,
                          const std::vector<std::string>& host_keys, const Parameters& params,
                          std::unique_ptr<ProcessSet>* out) {
  out->reset(new ProcessSet());
  ProcessSet* set = out->get();
  set->id = id;
  set->ranks = std::move(ranks);
  set->label = ProcessSetLabel(id, set->ranks);
  set->index = set->SetRank(global_topology.rank);
  if (!set->member()) return Status();
  // Topology among the members: local = same host key; hosts numbered in
  // order of their first member.
  Topology& t = set->topology;
  t.rank = set->index;
  t.size = static_cast<int>(set->ranks.size());
  const std::string& mine = host_keys[static_cast<size_t>(global_topology.rank)];
  std::map<std::string, int> per_host;
  std::vector<std::string> hosts;
  t.local_rank = 0;
  t.local_size = 0;
  for (int r : set->ranks) {
    const std::string& key = host_keys[static_cast<size_t>(r)];
    if (per_host[key]++ == 0) hosts.push_back(key);
    if (key == mine) {
      if (r < global_topology.rank) ++t.local_rank;
      ++t.local_size;
    }
  }
  t.cross_size = static_cast<int>(hosts.size());
  t.cross_rank = static_cast<int>(std::find(hosts.begin(), hosts.end(), mine) - hosts.begin());
  t.homogeneous = true;
  for (const auto& kv : per_host) t.homogeneous &= kv.second == per_host.begin()->second;

  set->own_queue.reset(new TensorQueue());
  set->queue = set->own_queue.get();
  std::unique_ptr<LinkSet> links;
  Status s = global->OpenLinkSet(set->ranks, &links);
  if (!s.ok()) return s;
  set->own_transport.reset(new SubsetTransport(global, std::move(links)));
  set->transport = set->own_transport.get();
  set->allreduce.reset(new AllreduceRunner(set->transport, t, params));
  set->controller.reset(
      new Controller(set->transport, t, params, set->queue, set->label, set->ranks));
  set->ops.reset(new CollectiveOps(set->transport, set->allreduce.get(), t));
  return Status();
}

std::unique_ptr<ProcessSet> ProcessSet::Global(Transport* global, const Topology& topology,
                                               TensorQueue* queue, const Parameters& params,
                                               GpuBackend* gpu) {
  std::unique_ptr<ProcessSet> set(new ProcessSet());
  set->id = 0;
  for (int r = 0; r < topology.size; ++r) set->ranks.push_back(r);
  set->label = ProcessSetLabel(0, set->ranks);
  set->index = topology.rank;
  set->topology = topology;
  set->queue = queue;
  set->transport = global;
  set->allreduce.reset(new AllreduceRunner(global, topology, params));
  set->controller.reset(new Controller(global, topology, params, queue));
  set->ops.reset(new CollectiveOps(global, set->allreduce.get(), topology, gpu));
  return set;
}

bool ProcessSet::RoundsPause() const {
  // A set of one waits for nobody: its round never needs to pause.
  return member() && (topology.size == 1 ||
                      (allreduce && allreduce->shared_memory() != nullptr));
}

Status ProcessSet::Open() {
  if (!member()) return Status();
  Status s = allreduce->Open();
  // One host: the negotiation's bit vector goes through the shared-memory
  // region too (a vector too long for it, through the transport).
  if (ShmCollectives* shm = s.ok() ? allreduce->shared_memory() : nullptr) {
    Transport* t = transport;
    // A bounded wait spins no longer than a waiting rank spins before it sleeps.
    controller->SetBitExchange([shm, t](uint64_t* words, size_t n, bool bounded, bool* waiting) {
      if (n <= ShmCollectives::kMaxOrWords) {
        return shm->OrWords(words, n, bounded ? shm->spin() : std::chrono::microseconds(-1),
                            waiting);
      }
      // The transport's exchange cannot pause: a bounded caller leaves it to
      // the next, unbounded call.
      *waiting = bounded;
      return bounded ? Status() : t->BitwiseOr(words, n);
    });
  }
  if (s.ok() && id != 0) {
    const bool shm = allreduce->TakesSegments(INT64_MAX, ReduceOp::SUM);
    TFHVD_LOG(DEBUG) << label << ": rank " << topology.rank << " of " << topology.size << ", "
                     << topology.local_size << " on this host; shared-memory allreduce "
                     << (shm ? "mapped" : "not used");
  }
  return s;
}

void ProcessSet::Close() {
  if (allreduce) allreduce->Close();
  // The link set (an MPI communicator) goes before the global transport's
  // Finalize; nothing uses the set's transport after Close.
  own_transport.reset();
}

}  // namespace tfhvd
