#include "cc/common/operations.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>  // environ, gethostname

#include "cc/common/algorithms/adasum_allreduce.h"
#include "cc/common/algorithms/allreduce_runner.h"
#include "cc/common/collective_ops.h"
#include "cc/common/controller.h"
#include "cc/common/knobs.h"
#include "cc/common/local_transport.h"
#include "cc/common/logging.h"
#include "cc/common/malloc_tuning.h"
#include "cc/common/parameters.h"
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

Status CreateTransport(const Parameters& params, std::unique_ptr<Transport>* out) {
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
    out->reset(new MpiTransport(params));
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

// The report the launcher reads: "culprit=<rank>\nkind=<kind>\n<message>".
void ReportFault(GlobalState* st, int culprit, const std::string& kind, const Status& s) {
  st->transport->ReportFault("culprit=" + std::to_string(culprit) + "\nkind=" + kind + "\n" +
                             s.message());
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

// The background loop: wait for work (or the cycle time), negotiate, perform.
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
  AllreduceRunner allreduce(st->transport.get(), st->topology, st->params);
  if (s.ok()) s = allreduce.Open();
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
    allreduce.Close();
    return;
  }
  TFHVD_LOG(DEBUG) << "background thread started: transport " << st->transport->name()
                   << ", rank " << st->topology.rank << " of " << st->topology.size;
  Controller controller(st->transport.get(), st->topology, st->params, st->queue.get());
  CollectiveOps ops(st->transport.get(), &allreduce, st->topology);
  auto cycle = std::chrono::microseconds(static_cast<int64_t>(st->params.cycle_time_ms * 1000));
  Status final_status = Status::Aborted(
      "Horovod has been shut down in this process (hvd.shutdown(), or the process is "
      "exiting); this collective did not run");
  // While this rank has tensors in flight it negotiates again at once, backing
  // off (up to the cycle time) only while rounds make no progress; an idle
  // rank sleeps up to the cycle time. Enqueue wakes the thread either way.
  // An idle rank polls less and less often (up to 20 ms): its peers
  // do not need its rounds until it has work, and work wakes it at once.
  const auto max_idle = std::max(cycle, std::chrono::microseconds(20000));
  auto backoff = std::chrono::microseconds(0);
  auto idle_wait = cycle;
  for (;;) {
    bool busy = st->queue->size() > 0;
    if (busy) {
      idle_wait = cycle;
    } else {
      idle_wait = std::min(max_idle, idle_wait * 2);
    }
    st->queue->WaitForWork(busy ? backoff : idle_wait);
    GlobalTimeline().MarkCycle();
    ResponseList list;
    s = controller.ComputeResponseList(static_cast<Controller::Leaving>(st->leaving.load()),
                                       &list);
    if (!s.ok()) {
      final_status = Failed(st, s);
      s = final_status;
      TFHVD_LOG(ERROR) << "negotiation failed, stopping: " << s.message();
      break;
    }
    bool fatal = false;
    for (const Response& r : list.responses) {
      std::vector<TensorTableEntry> entries(r.names.size());
      std::vector<bool> present(r.names.size());
      std::vector<Request> own(r.names.size());
      for (size_t i = 0; i < r.names.size(); ++i) {
        present[i] = st->queue->Take(r.names[i], &entries[i]);
        own[i] = entries[i].request;
      }
      controller.CacheResponse(r, own);
      for (const auto& name : r.names) GlobalTimeline().QueueEnd(name);
      s = ops.Perform(r, entries, present);
      if (!s.ok()) {
        final_status = Failed(st, s);
        s = final_status;
        fatal = true;
        TFHVD_LOG(ERROR) << "collective failed, stopping: " << s.message();
        break;
      }
    }
    if (!list.responses.empty()) GlobalTimeline().Flush();
    if (!fatal && list.shutdown && st->leaving.load() == 0) {
      // Another rank shut down or is exiting while this one still runs.
      int culprit = -1;
      std::string kind;
      final_status = LeftByOthers(*st, list, &culprit, &kind);
      ReportFault(st, culprit, kind, final_status);
    }
    if (fatal || list.shutdown) break;
    backoff = list.responses.empty()
                  ? std::min(cycle, std::max(backoff * 2, std::chrono::microseconds(20)))
                  : std::chrono::microseconds(0);
  }
  SetStopped(*st, final_status);
  st->running = false;
  GlobalTimeline().Stop();
  st->queue->FailAll(final_status);
  allreduce.Close();
  st->transport->Finalize();
}

}  // namespace

Status Initialize() {
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
  st.queue.reset(new TensorQueue());
  st.leaving = 0;
  {
    std::lock_guard<std::mutex> hosts_lock(st.status_mutex);
    st.hosts.clear();
  }
  s = CreateTransport(st.params, &st.transport);
  if (!s.ok()) return s;
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
Status CheckEntry(TensorTableEntry& entry) {
  GlobalState& st = State();
  const Request& q = entry.request;
  const int size = st.topology.size;
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
  if (q.type == OpType::BROADCAST && (q.root_rank < 0 || q.root_rank >= size)) {
    // FailedPrecondition, as Horovod's coordinator reports it.
    return Status::Precondition("tensor '" + q.name + "': root_rank " +
                                   std::to_string(q.root_rank) + " is out of range for " +
                                   std::to_string(size) + " ranks");
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

Status Enqueue(TensorTableEntry entry) {
  Status s = CheckInitialized();
  if (s.ok()) s = CheckEntry(entry);
  if (!s.ok()) return s;
  return State().queue->Add(std::move(entry));
}

Status EnqueueGroup(const std::string& group, std::vector<TensorTableEntry> entries) {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  if (entries.empty()) return Status();
  for (auto& e : entries) {
    e.request.group = group;
    e.request.group_size = static_cast<int32_t>(entries.size());
    s = CheckEntry(e);
    if (!s.ok()) return s;
  }
  return State().queue->AddGroup(std::move(entries));
}

}  // namespace tfhvd
