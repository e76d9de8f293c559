#include "cc/common/operations.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>  // environ, gethostname

#include <map>

#include "cc/common/algorithms/adasum_allreduce.h"
#include "cc/common/algorithms/allreduce_runner.h"
#include "cc/common/algorithms/link_collectives.h"
#include "cc/common/autotune/parameter_manager.h"
#include "cc/common/collective_ops.h"
#include "cc/common/controller.h"
#include "cc/common/gpu_backend.h"
#include "cc/common/knobs.h"
#include "cc/common/local_transport.h"
#include "cc/common/logging.h"
#include "cc/common/malloc_tuning.h"
#include "cc/common/parameters.h"
#include "cc/common/process_set.h"
#include "cc/common/thread_affinity.h"
#include "cc/common/timeline.h"
#if HAVE_GLOO
#include "cc/common/gloo/gloo_transport.h"
#endif
#if HAVE_MPI
#include "cc/common/mpi/mpi_transport.h"
#endif

namespace tfhvd {

namespace {

struct GlobalState {
  std::mutex mutex;  // guards start/stop
  std::thread background;
  std::atomic<bool> running{false};
  // Set by Shutdown(): Controller::Leaving (called, or the process exiting).
  std::atomic<int> leaving{0};
  // From a successful init until this process calls Shutdown(): the topology
  // stays valid even after the core stopped because another rank exited.
  std::atomic<bool> topology_known{false};
  // Why the core stopped (shutdown or a fatal transport error); returned by
  // Enqueue after the loop ended.
  std::mutex status_mutex;
  Status stopped_status = Status::Precondition(
      "Horovod has not been initialized; use hvd.init().");
  std::unique_ptr<TensorQueue> queue;
  std::unique_ptr<Transport> transport;
  Topology topology;
  Parameters params;
  std::atomic<int> pinned_cpu{-1};  // HOROVOD_THREAD_AFFINITY, as the thread sees it
  // Every rank's host (HOROVOD_SLOT_HOSTNAME, else its hostname), exchanged
  // at init so that errors can say where a rank runs.
  std::vector<std::string> hosts;
  // Process sets by id (0: the global set). Enqueue looks sets up from any
  // thread; only the background thread adds and removes them.
  std::mutex sets_mutex;
  std::map<int32_t, std::shared_ptr<ProcessSet>> sets;
  int32_t next_set_id = 1;
  std::vector<std::vector<int>> requested_sets;  // hvd.init(process_sets=...)
  JobCommunicator comm;                          // hvd.init(comm=...)
  std::vector<std::string> host_keys;            // by global rank
  std::mutex autotune_mutex;
  std::vector<AutotuneRecord> autotune_history;  // AutotuneHistory()
};

GlobalState& State() {
  static GlobalState* state = new GlobalState();  // never destroyed: see Shutdown
  return *state;
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// HOROVOD_CPU_OPERATIONS picks the transport too: tf_hvd negotiates and runs
// CPU collectives on one transport, so it must agree with HOROVOD_CONTROLLER.
Status ChooseController(const Parameters& params, std::string* choice) {
  *choice = params.controller;
  const std::string& ops = params.cpu_operations;
  if (ops == "ccl") {
    return Status::InvalidArgument(
        "HOROVOD_CPU_OPERATIONS=ccl: tf_hvd has no oneCCL support (hvd.ccl_built() is False); "
        "use gloo or mpi");
  }
  if (ops.empty()) return Status();
  if (choice->empty()) {
    *choice = ops;
  } else if (*choice != ops) {
    return Status::InvalidArgument(
        "HOROVOD_CPU_OPERATIONS=" + ops + " but HOROVOD_CONTROLLER=" + *choice +
        ": tf_hvd runs negotiation and CPU collectives on one transport, so they must agree");
  }
  return Status();
}

Status CreateTransport(const Parameters& params, const JobCommunicator& comm,
                       std::unique_ptr<Transport>* out) {
  std::string choice;
  Status chosen = ChooseController(params, &choice);
  if (!chosen.ok()) return chosen;
  // The MPI launchers' own variables (not knobs): started by mpirun/mpiexec.
  bool under_mpi = EnvSet("PMI_RANK") || EnvSet("PMI_SIZE") || EnvSet("OMPI_COMM_WORLD_RANK");
  bool launched_by_tfhvdrun = params.rank >= 0;
  if (choice.empty()) {
    if (under_mpi) choice = "mpi";
    else if (launched_by_tfhvdrun) choice = "gloo";
    else choice = "local";
  }
  if (choice == "mpi") {
#if HAVE_MPI
    auto* mpi = new MpiTransport(params);
    if (comm.has_handle) mpi->UseCommunicator(comm.handle);
    if (!comm.ranks.empty()) mpi->UseWorldRanks(comm.ranks);
    out->reset(mpi);
    return Status();
#else
    return Status::Precondition("this tf_hvd build has no MPI support");
#endif
  }
  if (choice == "gloo") {
#if HAVE_GLOO
    if (!launched_by_tfhvdrun) {
      out->reset(new LocalTransport());
      return Status();
    }
    out->reset(new GlooTransport(params));
    return Status();
#else
    return Status::Precondition("this tf_hvd build has no Gloo support");
#endif
  }
  out->reset(new LocalTransport());
  return Status();
}

// A HOROVOD_* variable that is not a knob is probably a typo or a knob of
// another version: say so once per process instead of ignoring it.
void WarnAboutUnknownKnobs() {
  static bool warned = false;
  if (warned) return;
  warned = true;
  std::vector<std::string> unknown = UnknownKnobs(environ);
  if (unknown.empty()) return;
  std::string names;
  for (const auto& n : unknown) names += (names.empty() ? "" : ", ") + n;
  TFHVD_LOG(WARNING) << "ignoring environment variable" << (unknown.size() > 1 ? "s " : " ")
                     << names << ": not a tf_hvd knob (the README's Knobs section lists them)";
}

void SetStopped(GlobalState& st, const Status& s) {
  std::lock_guard<std::mutex> lock(st.status_mutex);
  st.stopped_status = s;
}

// "rank 2 (on node1)".
std::string RankAt(const GlobalState& st, int rank) {
  std::string text = "rank " + std::to_string(rank);
  if (rank >= 0 && static_cast<size_t>(rank) < st.hosts.size()) {
    text += " (on " + st.hosts[static_cast<size_t>(rank)] + ")";
  }
  return text;
}

std::string ThisHost(const Parameters& params) {
  if (!params.slot_hostname.empty()) return params.slot_hostname;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown host";
  return name;
}

// Every rank learns every rank's host: rank 0 gathers them, joins them with
// newlines and broadcasts the list.
Status ExchangeHosts(GlobalState* st) {
  std::vector<std::string> all;
  Status s = st->transport->GatherBytes(ThisHost(st->params), &all);
  if (!s.ok()) return s;
  std::string joined;
  for (size_t r = 0; r < all.size(); ++r) joined += (r ? "\n" : "") + all[r];
  s = st->transport->BroadcastBytes(&joined, 0);
  if (!s.ok()) return s;
  std::vector<std::string> hosts;
  size_t start = 0;
  for (;;) {
    size_t nl = joined.find('\n', start);
    hosts.push_back(joined.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  std::lock_guard<std::mutex> lock(st->status_mutex);
  st->hosts = std::move(hosts);
  return Status();
}

// The error of every collective on a rank whose peers asked to shut down,
// naming them and how; *culprit is the first one named.
Status LeftByOthers(const GlobalState& st, const ResponseList& list, int* culprit,
                    std::string* kind) {
  std::string who;
  *culprit = -1;
  for (int r : list.shutdown_called_by) {
    if (r == st.topology.rank) continue;
    who += (who.empty() ? "" : "; ") + RankAt(st, r) + " called hvd.shutdown()";
    if (*culprit < 0) { *culprit = r; *kind = "shutdown"; }
  }
  for (int r : list.exiting) {
    if (r == st.topology.rank) continue;
    who += (who.empty() ? "" : "; ") + RankAt(st, r) + " left the job (its process is exiting)";
    if (*culprit < 0) { *culprit = r; *kind = "exiting"; }
  }
  if (who.empty()) who = "another rank shut Horovod down";
  return Status::Aborted(who + "; this collective did not run");
}

// Writes ``record`` to the file tfhvdrun --mpi's rank wrapper names in TF_HVD_FAULT_FILE
// (MPI has no rendezvous store): written aside, then renamed, so the launcher never
// reads half a record.
void WriteFaultFile(const std::string& record) {
  const char* path = std::getenv("TF_HVD_FAULT_FILE");
  if (path == nullptr || *path == '\0') return;
  const std::string tmp = std::string(path) + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  const bool ok = std::fwrite(record.data(), 1, record.size(), f) == record.size();
  if (std::fclose(f) == 0 && ok) {
    std::rename(tmp.c_str(), path);
  } else {
    std::remove(tmp.c_str());
  }
}

// The report the launcher reads: "culprit=<rank>\nkind=<kind>\n<message>".
void ReportFault(GlobalState* st, int culprit, const std::string& kind, const Status& s) {
  const std::string record =
      "culprit=" + std::to_string(culprit) + "\nkind=" + kind + "\n" + s.message();
  st->transport->ReportFault(record);
  WriteFaultFile(record);
}

// A link error names the peer rank: say where it runs, and if that rank had
// itself stopped because of another one, name that one (its report says so);
// then report the failure to the launcher.
Status Failed(GlobalState* st, Status s) {
  std::string kind = "error";
  int culprit = -1;
  if (s.message().rfind("stall shutdown", 0) == 0) kind = "stall";
  const int peer = s.peer();
  if (peer >= 0 && peer != st->topology.rank) {
    kind = "lost";
    culprit = peer;
    std::string text = s.message() + " (" + RankAt(*st, peer) + ")";
    std::string record;
    if (st->transport->PeerFault(peer, &record)) {
      // "culprit=<c>\nkind=<k>\n<message>"
      size_t eq = record.find('='), nl1 = record.find('\n'),
             nl2 = nl1 == std::string::npos ? nl1 : record.find('\n', nl1 + 1);
      int theirs = eq != std::string::npos && nl1 != std::string::npos
                       ? std::atoi(record.c_str() + eq + 1)
                       : -1;
      if (nl2 != std::string::npos && theirs >= 0 && theirs != st->topology.rank) {
        culprit = theirs;
        text = RankAt(*st, theirs) + " failed first; " + RankAt(*st, peer) +
               " stopped because: " + record.substr(nl2 + 1) + " [here: " + s.message() + "]";
      }
    }
    s = Status(s.code(), text).WithPeer(peer);
  }
  ReportFault(st, culprit, kind, s);
  return s;
}

std::shared_ptr<ProcessSet> FindSet(GlobalState& st, int32_t id) {
  std::lock_guard<std::mutex> lock(st.sets_mutex);
  auto it = st.sets.find(id);
  return it == st.sets.end() ? nullptr : it->second;
}

// The id of a registered set with exactly these (sorted) ranks, or -1.
int32_t FindSetByRanks(GlobalState& st, const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(st.sets_mutex);
  for (const auto& kv : st.sets)
    if (kv.second->ranks == ranks) return kv.first;
  return -1;
}

// Registers and opens a set (background thread, the same point on every
// rank): members map its shared memory together.
Status RegisterSet(GlobalState& st, std::vector<int> ranks, int32_t* id) {
  *id = st.next_set_id++;
  std::unique_ptr<ProcessSet> created;
  Status s = ProcessSet::Create(*id, std::move(ranks), st.transport.get(), st.topology,
                                st.host_keys, st.params, &created);
  std::shared_ptr<ProcessSet> set(std::move(created));
  if (s.ok()) s = set->Open();
  if (!s.ok()) return Status(s.code(), set->label + ": " + s.message());
  std::lock_guard<std::mutex> lock(st.sets_mutex);
  st.sets[*id] = std::move(set);
  return Status();
}

std::string SetsText(const std::vector<std::vector<int>>& sets) {
  std::string out = "[";
  for (size_t i = 0; i < sets.size(); ++i) out += (i ? ", [" : "[") + RankListText(sets[i]) + "]";
  return out + "]";
}

// Collective at start-up: every rank's host (for the sets' topology) and the
// static sets, which must be the same list on every rank.
Status SetUpProcessSets(GlobalState& st) {
  Links& links = *st.transport->links();
  Status s = AllgatherStrings(links, HostKey(), &st.host_keys);
  if (!s.ok()) return s;
  std::string mine = SetsText(st.requested_sets);
  std::vector<std::string> all;
  s = AllgatherStrings(links, mine, &all);
  if (!s.ok()) return s;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return Status::InvalidArgument(
          "hvd.init(process_sets=...) must list the same process sets on every rank: " + all[0] +
          " on rank 0 but " + all[r] + " on rank " + std::to_string(r));
    }
  }
  for (const auto& ranks : st.requested_sets) {
    std::vector<int> sorted;
    s = ValidateProcessSetRanks(ranks, st.topology.size, &sorted);
    if (!s.ok()) return s;
    if (FindSetByRanks(st, sorted) >= 0) continue;  // a duplicate: Python reports it
    int32_t id;
    s = RegisterSet(st, std::move(sorted), &id);
    if (!s.ok()) return s;
  }
  return Status();
}

// The sets this rank takes part in, in id order (the order every rank runs
// their rounds in, so that sets sharing ranks never wait on each other).
std::vector<std::shared_ptr<ProcessSet>> MemberSets(GlobalState& st, bool* several) {
  std::lock_guard<std::mutex> lock(st.sets_mutex);
  std::vector<std::shared_ptr<ProcessSet>> out;
  for (const auto& kv : st.sets)
    if (kv.second->member()) out.push_back(kv.second);
  *several = st.sets.size() > 1;
  return out;
}

size_t QueuedEntries(const std::vector<std::shared_ptr<ProcessSet>>& sets) {
  size_t n = 0;
  for (const auto& set : sets) n += set->queue->size();
  return n;
}

// One negotiation round of one set and the collectives it decided. Returns a
// fatal error (the transport failed, or the set's coordinator ended the job).
Status RunSetRound(ProcessSet& set, Controller::Leaving leaving, ResponseList* list) {
  Status s = set.controller->ComputeResponseList(leaving, list);
  if (!s.ok()) {
    if (set.id == 0) return s;
    return Status(s.code(), set.label + ": " + s.message());
  }
  for (const Response& r : list->responses) {
    std::vector<TensorTableEntry> entries(r.names.size());
    std::vector<bool> present(r.names.size());
    std::vector<Request> own(r.names.size());
    for (size_t i = 0; i < r.names.size(); ++i) {
      present[i] = set.queue->Take(r.names[i], &entries[i]);
      own[i] = entries[i].request;
    }
    set.controller->CacheResponse(r, own);
    for (const auto& name : r.names) GlobalTimeline().QueueEnd(name);
    s = set.ops->Perform(r, entries, present);
    if (!s.ok()) return set.id == 0 ? s : Status(s.code(), set.label + ": " + s.message());
  }
  return Status();
}

// Bytes an allreduce response list reduced (autotune's score).
int64_t AllreducedBytes(const ResponseList& list) {
  int64_t bytes = 0;
  for (const Response& r : list.responses) {
    if (r.kind != Response::OPERATION || r.type != OpType::ALLREDUCE) continue;
    int64_t elements = 0;
    for (int64_t n : r.sizes) elements += n;
    bytes += elements * static_cast<int64_t>(DataTypeSize(r.dtype));
  }
  return bytes;
}

double SecondsNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The background loop: wait for work (or the cycle time), then one round per
// process set this rank belongs to (the global set first), each negotiating
// and performing its own collectives.
void BackgroundLoop(GlobalState* st, std::shared_ptr<std::promise<Status>> ready) {
  Status s = st->transport->Init(&st->topology);
  if (s.ok()) SetLogRank(st->topology.rank);
  if (s.ok()) {
    int cpu = -1;
    s = ThreadAffinityCpu(st->params.thread_affinity, st->topology.local_rank,
                          st->topology.local_size, &cpu);
    if (s.ok()) s = PinThisThread(cpu);
    // What the thread's affinity mask says now (-1: not on a single CPU).
    st->pinned_cpu = PinnedCpu();
    if (s.ok() && cpu >= 0) {
      TFHVD_LOG(DEBUG) << "background thread pinned to CPU " << cpu;
    }
  }
  if (s.ok()) s = ExchangeHosts(st);
  // The GPU backend (CUDA variant only; the global set's GPU tensors); its NCCL
  // communicators start at first use.
  std::unique_ptr<GpuBackend> gpu = CreateGpuBackend();
  {
    std::lock_guard<std::mutex> lock(st->sets_mutex);
    st->sets.clear();
    st->next_set_id = 1;
    st->sets[0] = std::shared_ptr<ProcessSet>(
        ProcessSet::Global(st->transport.get(), st->topology, st->queue.get(), st->params,
                           gpu.get()));
  }
  ProcessSet& global = *st->sets[0];
  if (s.ok()) s = global.Open();
  if (s.ok() && gpu) s = gpu->Open(st->transport.get(), st->topology, st->params);
  if (s.ok()) s = SetUpProcessSets(*st);
  // HOROVOD_TIMELINE=DYNAMIC: no file until hvd.start_timeline().
  if (s.ok() && st->topology.rank == 0 && !st->params.timeline_path.empty() &&
      !TimelineIsDynamic(st->params.timeline_path)) {
    std::string error;
    if (!GlobalTimeline().Start(st->params.timeline_path, st->params.timeline_mark_cycles,
                                &error)) {
      TFHVD_LOG(WARNING) << error;
    }
  }
  ready->set_value(s);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(st->sets_mutex);
    for (auto& kv : st->sets) kv.second->Close();
    st->sets.clear();
    if (gpu) gpu->Close();
    return;
  }
  TFHVD_LOG(DEBUG) << "background thread started: transport " << st->transport->name()
                   << ", rank " << st->topology.rank << " of " << st->topology.size;
  auto cycle = std::chrono::microseconds(static_cast<int64_t>(st->params.cycle_time_ms * 1000));
  // HOROVOD_AUTOTUNE: rank 0 tunes; every rank applies what the global
  // round's response list carries.
  std::unique_ptr<ParameterManager> tuner;
  if (st->params.autotune && st->topology.rank == 0) {
    const bool hierarchical = global.allreduce && global.allreduce->hierarchical_ready();
    tuner.reset(new ParameterManager(st->params, hierarchical));
    if (tuner->active()) {
      std::string names;
      for (auto k : tuner->tuned()) {
        names += (names.empty() ? "" : ", ") + std::string(ParameterManager::KnobName(k));
      }
      TFHVD_LOG(INFO) << "autotune: tuning " << names;
    }
  }
  int64_t global_rounds = 0;
  Status final_status = Status::Aborted(
      "Horovod has been shut down in this process (hvd.shutdown(), or the process is "
      "exiting); this collective did not run");
  // While this rank has tensors in flight it negotiates again at once, backing
  // off (up to the cycle time) only while rounds make no progress; an idle
  // rank sleeps up to the cycle time. Enqueue wakes the thread either way.
  // An idle rank polls less and less often (up to 20 ms): its peers
  // do not need its rounds until it has work, and work wakes it at once.
  // With process sets, an idle rank's global round may be what members of
  // another set wait for, so it polls every cycle time.
  auto max_idle = std::max(cycle, std::chrono::microseconds(20000));
  auto backoff = std::chrono::microseconds(0);
  auto idle_wait = cycle;
  for (;;) {
    bool several = false;
    std::vector<std::shared_ptr<ProcessSet>> sets = MemberSets(*st, &several);
    bool busy = QueuedEntries(sets) > 0;
    if (busy || several) {
      idle_wait = cycle;
    } else {
      idle_wait = std::min(max_idle, idle_wait * 2);
    }
    st->queue->WaitForWork(busy ? backoff : idle_wait);
    GlobalTimeline().MarkCycle();
    bool fatal = false, shutdown = false, progress = false;
    for (const auto& set : sets) {
      if (set->removed) continue;  // removed in this cycle's global round
      ResponseList list;
      const auto leaving = set->id == 0 ? static_cast<Controller::Leaving>(st->leaving.load())
                                        : Controller::Leaving::NO;
      s = RunSetRound(*set, leaving, &list);
      if (s.ok() && set->id == 0) {
        ++global_rounds;
        if (list.has_tuned) {
          // The controller switched fusion and cache at this round's end; the
          // cycle time and the allreduce algorithm switch here.
          cycle = std::chrono::microseconds(
              static_cast<int64_t>(list.tuned.cycle_time_ms * 1000));
          max_idle = std::max(cycle, std::chrono::microseconds(20000));
          idle_wait = std::min(idle_wait, cycle);
          if (set->allreduce) set->allreduce->SetHierarchical(list.tuned.hierarchical_allreduce);
          {
            std::lock_guard<std::mutex> lock(st->autotune_mutex);
            st->autotune_history.push_back({global_rounds, list.tuned});
          }
          if (tuner) tuner->Applied(SecondsNow());
        }
        // A round that switched values belongs to no sample.
        TunedParameters next;
        if (tuner && !list.has_tuned &&
            tuner->Update(AllreducedBytes(list), SecondsNow(), &next)) {
          set->controller->ProposeTuning(next);
        }
      }
      if (!s.ok()) {
        final_status = Failed(st, s);
        s = final_status;
        fatal = true;
        TFHVD_LOG(ERROR) << "negotiation or collective failed, stopping: " << s.message();
        break;
      }
      progress |= !list.responses.empty();
      if (list.shutdown) {
        shutdown = true;
        if (st->leaving.load() == 0) {
          // Another rank shut down or is exiting while this one still runs.
          int culprit = -1;
          std::string kind;
          final_status = LeftByOthers(*st, list, &culprit, &kind);
          ReportFault(st, culprit, kind, final_status);
        }
        break;
      }
    }
    if (progress) GlobalTimeline().Flush();
    if (fatal || shutdown) break;
    backoff = !progress ? std::min(cycle, std::max(backoff * 2, std::chrono::microseconds(20)))
                        : std::chrono::microseconds(0);
  }
  SetStopped(*st, final_status);
  st->running = false;
  GlobalTimeline().Stop();
  // The table stays (closed) until the next init: a peer's shutdown can end
  // this loop while this rank's hvd.init() still reads it.
  std::map<int32_t, std::shared_ptr<ProcessSet>> sets;
  {
    std::lock_guard<std::mutex> lock(st->sets_mutex);
    sets = st->sets;
  }
  for (auto& kv : sets) {
    if (kv.second->member()) kv.second->queue->FailAll(final_status);
    kv.second->Close();
  }
  if (gpu) gpu->Close();
  st->transport->Finalize();
}

}  // namespace

Status Initialize(const std::vector<std::vector<int>>& process_sets,
                  const JobCommunicator& comm) {
  GlobalState& st = State();
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.running) return Status();
  if (st.background.joinable()) st.background.join();
  Status s = Parameters::FromEnvironment(&st.params);
  if (!s.ok()) return Status(s.code(), "Horovod initialization failed: " + s.message());
  SetMinLogLevel(LogLevelFromName(st.params.log_level));
  SetLogHideTime(st.params.log_hide_time);
  WarnAboutUnknownKnobs();
  if (st.params.malloc_reuse) KeepLargeBuffersInHeap();
  {
    std::lock_guard<std::mutex> lock(st.sets_mutex);
    st.sets.clear();  // the last job's sets, closed
  }
  st.queue.reset(new TensorQueue());
  st.leaving = 0;
  {
    std::lock_guard<std::mutex> hosts_lock(st.status_mutex);
    st.hosts.clear();
  }
  st.requested_sets = process_sets;
  {
    std::lock_guard<std::mutex> lock(st.autotune_mutex);
    st.autotune_history.clear();
  }
  if (comm.has_handle && st.params.controller != "mpi" && !std::getenv("PMI_RANK") &&
      !std::getenv("PMI_SIZE") && !std::getenv("OMPI_COMM_WORLD_RANK")) {
    return Status::InvalidArgument(
        "hvd.init(comm=<mpi4py communicator>) needs the MPI transport: start the job with "
        "mpiexec/mpirun or tfhvdrun --mpi");
  }
  st.comm = comm;
  s = CreateTransport(st.params, comm, &st.transport);
  if (!s.ok()) return s;
  // A list of ranks for comm= selects a sub-job under MPI only (as in
  // Horovod); elsewhere the job is every process the launcher started.
  if (!comm.ranks.empty() && std::string(st.transport->name()) != "mpi") {
    const int size = st.params.rank >= 0 ? static_cast<int>(st.params.size) : 1;
    std::vector<int> all(static_cast<size_t>(size)), given = comm.ranks;
    for (int r = 0; r < size; ++r) all[static_cast<size_t>(r)] = r;
    std::sort(given.begin(), given.end());
    if (given != all) {
      return Status::InvalidArgument(
          "Horovod initialization failed: hvd.init(comm=[" + RankListText(comm.ranks) +
          "]): on the " + st.transport->name() + " transport the job is every process the "
          "launcher started (" + std::to_string(size) + "); a subset needs MPI (mpiexec or "
          "tfhvdrun --mpi), or use process sets");
    }
  }
  auto ready = std::make_shared<std::promise<Status>>();
  std::future<Status> result = ready->get_future();
  st.running = true;
  st.background = std::thread(BackgroundLoop, &st, ready);
  s = result.get();
  if (!s.ok()) {
    st.running = false;
    st.background.join();
    SetStopped(st, Status::Precondition("Horovod initialization failed: " + s.message()));
    return Status(s.code(), "Horovod initialization failed (" +
                                std::string(st.transport->name()) + "): " + s.message());
  }
  SetStopped(st, Status());
  st.topology_known = true;
  // Stop the background thread before the process exits, even if nobody
  // called shutdown (registered after the transport's own exit handlers, so
  // it runs before them).
  static bool exit_hook = (std::atexit([] { Shutdown(/*exiting=*/true); }), true);
  (void)exit_hook;
  return Status();
}

void Shutdown(bool exiting) {
  GlobalState& st = State();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.topology_known = false;
  if (st.background.joinable()) {
    st.leaving = static_cast<int>(exiting ? Controller::Leaving::EXITING
                                          : Controller::Leaving::SHUTDOWN_CALLED);
    st.queue->Notify();
    st.background.join();
  }
  SetStopped(st, Status::Precondition("Horovod has not been initialized: it was shut down by "
                                      "hvd.shutdown(); use hvd.init()."));
}

bool IsInitialized() { return State().running.load(); }

std::vector<AutotuneRecord> AutotuneHistory() {
  GlobalState& st = State();
  std::lock_guard<std::mutex> lock(st.autotune_mutex);
  return st.autotune_history;
}

bool TopologyKnown() { return State().topology_known.load(); }

Status CheckInitialized() {
  GlobalState& st = State();
  if (st.running) return Status();
  std::lock_guard<std::mutex> lock(st.status_mutex);
  if (st.stopped_status.ok()) {
    return Status::Precondition("Horovod has not been initialized; use hvd.init().");
  }
  return st.stopped_status;
}

Topology GetTopology() { return State().topology; }

Status StartTimeline(const std::string& path, bool mark_cycles) {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  if (State().topology.rank != 0) return Status();  // rank 0 writes the timeline
  std::string error;
  if (!GlobalTimeline().Start(path, mark_cycles, &error)) return Status::InvalidArgument(error);
  return Status();
}

Status StopTimeline() {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  GlobalTimeline().Stop();
  return Status();
}

bool TimelineIsDynamic(const std::string& value) {
  std::string v;
  for (char c : value) v += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "DYNAMIC";
}

bool MpiThreadsSupported() {
#if HAVE_MPI
  GlobalState& st = State();
  if (!st.running || std::string(st.transport->name()) != "mpi") return false;
  return MpiTransport::ThreadsMultiple();
#else
  return false;
#endif
}

int BackgroundThreadCpu() { return State().pinned_cpu.load(); }

const char* TransportName() {
  GlobalState& st = State();
  return st.transport ? st.transport->name() : "none";
}

namespace {

// Checks one entry's arguments on this rank (and fills alltoall's even splits).
Status CheckEntry(TensorTableEntry& entry, const ProcessSet& set) {
  entry.request.on_gpu = entry.gpu.on_gpu();
  Request& q = entry.request;
  const int size = set.topology.size;
  if ((q.type == OpType::ALLGATHER || q.type == OpType::ALLTOALL ||
       q.type == OpType::REDUCESCATTER) && q.shape.empty()) {
    return Status::InvalidArgument("tensor '" + q.name + "': " + OpTypeName(q.type) +
                                   " needs a tensor of rank >= 1, got a scalar");
  }
  if (q.type == OpType::ALLREDUCE && q.reduce_op == ReduceOp::ADASUM) {
    std::string why = AdasumAllreduce::Unsupported(size, q.dtype);
    if (!why.empty()) return Status::InvalidArgument("tensor '" + q.name + "': " + why);
  }
  if (q.type == OpType::REDUCESCATTER && q.reduce_op != ReduceOp::SUM &&
      q.reduce_op != ReduceOp::AVERAGE) {
    return Status::InvalidArgument("tensor '" + q.name +
                                   "': reducescatter supports only Sum and Average, got " +
                                   ReduceOpName(q.reduce_op));
  }
  if (q.type == OpType::BROADCAST && set.id == 0 && (q.root_rank < 0 || q.root_rank >= size)) {
    // FailedPrecondition, as Horovod's coordinator reports it.
    return Status::Precondition("tensor '" + q.name + "': root_rank " +
                                   std::to_string(q.root_rank) + " is out of range for " +
                                   std::to_string(size) + " ranks");
  }
  if (q.type == OpType::BROADCAST && set.id != 0) {
    // root_rank is a global rank (as in Horovod); the set negotiates its position.
    int root = set.SetRank(q.root_rank);
    if (root < 0) {
      return Status::InvalidArgument("tensor '" + q.name + "': broadcast received invalid root rank " +
                                     std::to_string(q.root_rank) + " for provided process set: " +
                                     set.label + " does not contain it");
    }
    q.root_rank = root;
  }
  if (q.type == OpType::ALLTOALL) {
    if (entry.splits.empty()) {
      if (q.shape[0] % size != 0) {
        return Status::InvalidArgument(
            "tensor '" + q.name + "': alltoall without splits needs dimension 0 (" +
            std::to_string(q.shape[0]) + ") divisible by the number of ranks (" +
            std::to_string(size) + ")");
      }
      entry.splits.assign(static_cast<size_t>(size), static_cast<int32_t>(q.shape[0] / size));
    }
    int64_t sum = 0;
    bool negative = false;
    for (int32_t v : entry.splits) { sum += v; negative |= v < 0; }
    if (entry.splits.size() != static_cast<size_t>(size) || sum != q.shape[0] || negative) {
      return Status::InvalidArgument(
          "tensor '" + q.name + "': alltoall splits must have one non-negative entry per rank (" +
          std::to_string(size) + ") summing to dimension 0 (" + std::to_string(q.shape[0]) +
          "), got " + std::to_string(entry.splits.size()) + " entries summing to " +
          std::to_string(sum));
    }
  }
  return Status();
}

}  // namespace

namespace {

std::string Capitalized(const char* text) {
  std::string out(text);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

// The set an op runs on, with Horovod's errors for an unknown set and for a
// rank that is not a member.
Status SetFor(int32_t id, OpType type, std::shared_ptr<ProcessSet>* out) {
  GlobalState& st = State();
  *out = FindSet(st, id);
  if (!*out) {
    Status s = CheckInitialized();
    if (!s.ok()) return s;
    return Status::InvalidArgument(Capitalized(OpTypeName(type)) +
                                   ": Process set provided does not exist, or has not been "
                                   "registered (process set id " + std::to_string(id) + ").");
  }
  if (!(*out)->member()) {
    return Status::InvalidArgument(Capitalized(OpTypeName(type)) + ": Rank " +
                                   std::to_string(st.topology.rank) +
                                   " is not a member of the provided process set (" +
                                   (*out)->label + ").");
  }
  return Status();
}

}  // namespace

Status Enqueue(TensorTableEntry entry, int32_t process_set_id) {
  Status s = CheckInitialized();
  std::shared_ptr<ProcessSet> set;
  if (s.ok()) s = SetFor(process_set_id, entry.request.type, &set);
  if (s.ok()) s = CheckEntry(entry, *set);
  if (!s.ok()) return s;
  s = set->queue->Add(std::move(entry));
  if (s.ok() && set->id != 0) State().queue->Notify();  // the thread waits on the global queue
  return s;
}

Status EnqueueGroup(const std::string& group, std::vector<TensorTableEntry> entries,
                    int32_t process_set_id) {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  if (entries.empty()) return Status();
  std::shared_ptr<ProcessSet> set;
  s = SetFor(process_set_id, entries[0].request.type, &set);
  if (!s.ok()) return s;
  for (auto& e : entries) {
    e.request.group = group;
    e.request.group_size = static_cast<int32_t>(entries.size());
    s = CheckEntry(e, *set);
    if (!s.ok()) return s;
  }
  s = set->queue->AddGroup(std::move(entries));
  if (s.ok() && set->id != 0) State().queue->Notify();
  return s;
}

std::vector<std::pair<int32_t, std::vector<int>>> ProcessSetRanks() {
  GlobalState& st = State();
  std::lock_guard<std::mutex> lock(st.sets_mutex);
  std::vector<std::pair<int32_t, std::vector<int>>> out;
  for (const auto& kv : st.sets) out.emplace_back(kv.first, kv.second->ranks);
  return out;
}

Status ProcessSetTopology(int32_t id, Topology* topology, bool* member) {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  std::shared_ptr<ProcessSet> set = FindSet(State(), id);
  if (!set) {
    return Status::InvalidArgument("Process set does not exist or has not been registered "
                                   "(process set id " + std::to_string(id) + ").");
  }
  *member = set->member();
  if (set->member()) *topology = set->topology;
  return Status();
}

namespace {

// A registration step every rank takes at the same point of the global
// negotiation: an allgather named `name` of this rank's int32 words; then
// `apply` runs on the background thread with every rank's words (in rank
// order), the same on every rank. Blocks the caller until it has run.
Status CollectiveRegistration(const std::string& name, std::vector<int32_t> words,
                              std::function<Status(const std::vector<std::vector<int32_t>>&)> apply) {
  struct Shared {
    std::vector<int32_t> in, out;
    std::promise<Status> done;
  };
  auto shared = std::make_shared<Shared>();
  shared->in = std::move(words);
  shared->in.insert(shared->in.begin(), static_cast<int32_t>(shared->in.size()));
  TensorTableEntry e;
  e.request.type = OpType::ALLGATHER;
  e.request.dtype = DataType::INT32;
  e.request.name = name;
  e.request.shape = {static_cast<int64_t>(shared->in.size())};
  e.input = shared->in.data();
  e.allocate_output = [shared](const Shape& shape, void** data) {
    shared->out.resize(static_cast<size_t>(NumElements(shape)) + 1);
    *data = shared->out.data();
    return Status();
  };
  const int size = State().topology.size;
  e.callback = [shared, apply, size](const Status& s) {
    if (!s.ok()) {
      shared->done.set_value(s);
      return;
    }
    // Every rank's words, each preceded by their count.
    std::vector<std::vector<int32_t>> all;
    size_t at = 0;
    for (int r = 0; r < size; ++r) {
      size_t n = static_cast<size_t>(shared->out[at]);
      all.emplace_back(shared->out.begin() + static_cast<long>(at + 1),
                       shared->out.begin() + static_cast<long>(at + 1 + n));
      at += n + 1;
    }
    shared->done.set_value(apply(all));
  };
  std::future<Status> result = shared->done.get_future();
  Status s = Enqueue(std::move(e), 0);
  if (!s.ok()) return s;
  return result.get();
}

std::string WordsText(const std::vector<int32_t>& words) {
  return "[" + RankListText(std::vector<int>(words.begin(), words.end())) + "]";
}

// INVALID_ARGUMENT naming what differs when ranks passed different words.
Status SameOnEveryRank(const char* what, const std::vector<std::vector<int32_t>>& all) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return Status::InvalidArgument(
          std::string(what) + " must be called by every rank with the same arguments, in the "
          "same order: " + WordsText(all[0]) + " on rank 0 but " + WordsText(all[r]) +
          " on rank " + std::to_string(r) + "; nothing was changed");
    }
  }
  return Status();
}

Status CheckDynamic(const char* what) {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  if (!State().params.dynamic_process_sets) {
    return Status::Precondition(std::string("Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow ") +
                                what + " process sets after Horovod initialization.");
  }
  return Status();
}

}  // namespace

Status AddProcessSet(const std::vector<int>& ranks, int32_t* id) {
  Status s = CheckDynamic("adding");
  if (!s.ok()) return s;
  GlobalState& st = State();
  std::vector<int> sorted;
  s = ValidateProcessSetRanks(ranks, st.topology.size, &sorted);
  if (!s.ok()) return s;
  // Every rank has the same table, so every rank decides this alike.
  if (FindSetByRanks(st, sorted) >= 0) {
    *id = -1;
    return Status();
  }
  int32_t new_id = -1;
  s = CollectiveRegistration(
      "process_set.add", std::vector<int32_t>(sorted.begin(), sorted.end()),
      [&st, &new_id, sorted](const std::vector<std::vector<int32_t>>& all) {
        Status same = SameOnEveryRank("hvd.add_process_set", all);
        if (!same.ok()) return same;
        if (FindSetByRanks(st, sorted) >= 0) {
          return Status::InvalidArgument("hvd.add_process_set: a process set of ranks [" +
                                         RankListText(sorted) + "] was added meanwhile");
        }
        return RegisterSet(st, sorted, &new_id);
      });
  if (!s.ok()) return s;
  *id = new_id;
  return Status();
}

Status RemoveProcessSet(int32_t id, bool* removed) {
  *removed = false;
  Status s = CheckDynamic("removing");
  if (!s.ok()) return s;
  GlobalState& st = State();
  if (id == 0 || !FindSet(st, id)) return Status();
  s = CollectiveRegistration(
      "process_set.remove", {id},
      [&st, id](const std::vector<std::vector<int32_t>>& all) {
        Status same = SameOnEveryRank("hvd.remove_process_set", all);
        if (!same.ok()) return same;
        std::shared_ptr<ProcessSet> set;
        {
          std::lock_guard<std::mutex> lock(st.sets_mutex);
          auto it = st.sets.find(id);
          if (it == st.sets.end()) return Status();
          set = it->second;
          st.sets.erase(it);
        }
        set->removed = true;
        if (set->member()) {
          set->queue->FailAll(Status::Aborted(set->label +
                                              " was removed (hvd.remove_process_set) before "
                                              "this collective ran"));
        }
        set->Close();
        return Status();
      });
  if (!s.ok()) return s;
  *removed = true;
  return Status();
}

}  // namespace tfhvd
