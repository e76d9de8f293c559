#include "cc/common/operations.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>  // environ

#include "cc/common/core/background_loop.h"
#include "cc/common/gpu_backend.h"
#include "cc/common/core/process_set_table.h"
#include "cc/common/negotiation/entry_checks.h"
#include "cc/common/knobs.h"
#include "cc/common/logging.h"
#include "cc/common/host/malloc_tuning.h"
#include "cc/common/timeline/timeline.h"
#include "cc/common/transport_factory.h"

namespace tfhvd {

namespace {

// The one core of this process. Never destroyed: see Shutdown.
struct Core {
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
  ProcessSetTable sets;
  std::mutex loop_mutex;  // guards the pointer; the loop runs on `background`
  std::shared_ptr<BackgroundLoop> loop;
};

Core& State() {
  static Core* core = new Core();
  return *core;
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
                     << names << ": not a tf_hvd knob (docs/knobs.md lists them)";
}

void SetStopped(Core& st, const Status& s) {
  std::lock_guard<std::mutex> lock(st.status_mutex);
  st.stopped_status = s;
}

std::shared_ptr<BackgroundLoop> CurrentLoop() {
  Core& st = State();
  std::lock_guard<std::mutex> lock(st.loop_mutex);
  return st.loop;
}

void RunBackground(Core* st, std::shared_ptr<BackgroundLoop> loop,
                   std::shared_ptr<std::promise<Status>> ready) {
  Status s = loop->Start();
  st->topology = loop->topology();
  ready->set_value(s);
  if (!s.ok()) return;
  while (loop->RunCycle()) {
  }
  SetStopped(*st, loop->final_status());
  st->running = false;
  loop->Stop();
}

// A list of ranks for comm= selects a sub-job under MPI only (as in Horovod);
// elsewhere the job is every process the launcher started.
Status CheckCommRanks(const Core& st, const JobCommunicator& comm) {
  if (comm.ranks.empty() || std::string(st.transport->name()) == "mpi") return Status();
  const int size = st.params.rank >= 0 ? static_cast<int>(st.params.size) : 1;
  std::vector<int> all(static_cast<size_t>(size)), given = comm.ranks;
  for (int r = 0; r < size; ++r) all[static_cast<size_t>(r)] = r;
  std::sort(given.begin(), given.end());
  if (given == all) return Status();
  return Status::InvalidArgument(
      "Horovod initialization failed: hvd.init(comm=[" + RankListText(comm.ranks) +
      "]): on the " + st.transport->name() + " transport the job is every process the "
      "launcher started (" + std::to_string(size) + "); a subset needs MPI (mpiexec or "
      "tfhvdrun --mpi), or use process sets");
}

}  // namespace

Status Initialize(const std::vector<std::vector<int>>& process_sets,
                  const JobCommunicator& comm) {
  Core& st = State();
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.running) return Status();
  if (st.background.joinable()) st.background.join();
  Status s = Parameters::FromEnvironment(&st.params);
  if (!s.ok()) return Status(s.code(), "Horovod initialization failed: " + s.message());
  SetMinLogLevel(LogLevelFromName(st.params.log_level));
  SetLogHideTime(st.params.log_hide_time);
  WarnAboutUnknownKnobs();
  if (st.params.malloc_reuse) KeepLargeBuffersInHeap();
  st.sets.Clear();  // the last job's sets, closed
  st.queue.reset(new TensorQueue());
  st.leaving = 0;
  {
    std::lock_guard<std::mutex> loop_lock(st.loop_mutex);
    st.loop.reset();  // and with it the last job's autotune history
  }
  s = CreateTransport(st.params, comm, &st.transport);
  if (!s.ok()) return s;
  s = CheckCommRanks(st, comm);
  if (!s.ok()) return s;
  LoopParts parts;
  parts.transport = st.transport.get();
  parts.queue = st.queue.get();
  parts.sets = &st.sets;
  parts.params = st.params;
  parts.static_sets = process_sets;
  parts.fault_channels = [&st](const Topology& topology) {
    return CreateFaultChannels(*st.transport, st.params, topology);
  };
  parts.leaving = &st.leaving;
  auto loop = std::make_shared<BackgroundLoop>(std::move(parts));
  {
    std::lock_guard<std::mutex> loop_lock(st.loop_mutex);
    st.loop = loop;
  }
  auto ready = std::make_shared<std::promise<Status>>();
  std::future<Status> result = ready->get_future();
  st.running = true;
  st.background = std::thread(RunBackground, &st, loop, ready);
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
  TFHVD_LOG(DEBUG) << "background thread started: transport " << st.transport->name()
                   << ", rank " << st.topology.rank << " of " << st.topology.size;
  // Stop the background thread before the process exits, even if nobody
  // called shutdown (registered after the transport's own exit handlers, so
  // it runs before them).
  static bool exit_hook = (std::atexit([] { Shutdown(/*exiting=*/true); }), true);
  (void)exit_hook;
  return Status();
}

void Shutdown(bool exiting) {
  Core& st = State();
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
  Core& st = State();
  if (st.running) return Status();
  std::lock_guard<std::mutex> lock(st.status_mutex);
  if (st.stopped_status.ok()) {
    return Status::Precondition("Horovod has not been initialized; use hvd.init().");
  }
  return st.stopped_status;
}

Topology GetTopology() { return State().topology; }

const char* TransportName() {
  Core& st = State();
  return st.transport ? st.transport->name() : "none";
}

std::vector<AutotuneRecord> AutotuneHistory() {
  std::shared_ptr<BackgroundLoop> loop = CurrentLoop();
  return loop ? loop->autotune_history() : std::vector<AutotuneRecord>();
}

int BackgroundThreadCpu() {
  std::shared_ptr<BackgroundLoop> loop = CurrentLoop();
  return loop ? loop->pinned_cpu() : -1;
}

bool MpiThreadsSupported() {
  Core& st = State();
  return st.running && MpiThreadsMultiple(*st.transport);
}

void SetMpiSearchDirs(std::vector<std::string> dirs) {
  SetMpiLibrarySearchDirs(std::move(dirs));
}

Status MpiAvailable() {
  Parameters params;
  Status s = Parameters::FromEnvironment(&params);
  if (!s.ok()) return s;
  return LoadMpiLibrary(params.mpi_library);
}

std::string MpiLibraryFound() { return MpiLibraryDescription(); }

void SetGpuSearchDirs(std::vector<std::string> dirs) { SetGpuLibraryDirs(std::move(dirs)); }

Status GpuLibrariesAvailable() { return LoadGpuLibraries(); }

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

namespace {

std::string Capitalized(const char* text) {
  std::string out(text);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

// The set an op runs on, with Horovod's errors for an unknown set and for a
// rank that is not a member.
Status SetFor(int32_t id, OpType type, std::shared_ptr<ProcessSet>* out) {
  Core& st = State();
  *out = st.sets.Find(id);
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

Status Check(const ProcessSet& set, TensorTableEntry* entry) {
  return CheckEntry(EntryScope{set.id, set.ranks, set.label}, entry);
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

Status EnqueueGlobalEntry(TensorTableEntry entry) { return Enqueue(std::move(entry), 0); }

// The loop, when ops run rounds themselves (HOROVOD_INLINE_ROUNDS): then
// their tensors are queued without waking it.
std::shared_ptr<BackgroundLoop> LoopForOpThreads() {
  std::shared_ptr<BackgroundLoop> loop = CurrentLoop();
  return loop && loop->rounds_in_op_threads() ? loop : nullptr;
}

// After an op queued its `added` tensors in `set`: runs the rounds here or
// wakes the background thread, which waits on the global queue.
void RunOrWake(BackgroundLoop* loop, const ProcessSet& set, size_t added) {
  if (loop) {
    loop->RunRoundsHereOrWake(added);
  } else if (set.id != 0) {
    State().queue->Notify();
  }
}

}  // namespace

Status Enqueue(TensorTableEntry entry, int32_t process_set_id) {
  Status s = CheckInitialized();
  std::shared_ptr<ProcessSet> set;
  if (s.ok()) s = SetFor(process_set_id, entry.request.type, &set);
  if (s.ok()) s = Check(*set, &entry);
  if (!s.ok()) return s;
  std::shared_ptr<BackgroundLoop> loop = LoopForOpThreads();
  s = set->queue->Add(std::move(entry), /*wake=*/!loop);
  if (!s.ok()) return s;
  RunOrWake(loop.get(), *set, 1);
  return Status();
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
    s = Check(*set, &e);
    if (!s.ok()) return s;
  }
  std::shared_ptr<BackgroundLoop> loop = LoopForOpThreads();
  const size_t added = entries.size();
  s = set->queue->AddGroup(std::move(entries), /*wake=*/!loop);
  if (!s.ok()) return s;
  RunOrWake(loop.get(), *set, added);
  return Status();
}

std::vector<std::pair<int32_t, std::vector<int>>> ProcessSetRanks() {
  return State().sets.Ranks();
}

Status ProcessSetTopology(int32_t id, Topology* topology, bool* member) {
  Status s = CheckInitialized();
  if (!s.ok()) return s;
  std::shared_ptr<ProcessSet> set = State().sets.Find(id);
  if (!set) {
    return Status::InvalidArgument("Process set does not exist or has not been registered "
                                   "(process set id " + std::to_string(id) + ").");
  }
  *member = set->member();
  if (set->member()) *topology = set->topology;
  return Status();
}

Status AddProcessSet(const std::vector<int>& ranks, int32_t* id) {
  Status s = CheckDynamic("adding");
  if (!s.ok()) return s;
  return State().sets.AddEverywhere(ranks, EnqueueGlobalEntry, id);
}

Status RemoveProcessSet(int32_t id, bool* removed) {
  *removed = false;
  Status s = CheckDynamic("removing");
  if (!s.ok()) return s;
  return State().sets.RemoveEverywhere(id, EnqueueGlobalEntry, removed);
}

}  // namespace tfhvd
