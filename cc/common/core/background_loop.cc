#include "cc/common/core/background_loop.h"

#include <chrono>

#include "cc/common/core/host_names.h"
#include "cc/common/core/liveness_monitor.h"
#include "cc/common/host/cpu_binding.h"
#include "cc/common/logging.h"
#include "cc/common/host/thread_affinity.h"
#include "cc/common/timeline/timeline.h"
#include "cc/common/transport/peer_loss.h"

namespace tfhvd {

namespace {

std::chrono::microseconds CycleTime(double ms) {
  return std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
}

double SecondsNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

size_t QueuedEntries(const std::vector<std::shared_ptr<ProcessSet>>& sets) {
  size_t n = 0;
  for (const auto& set : sets) n += set->queue->size();
  return n;
}

// One negotiation round of one set and the collectives it decided. Returns a
// fatal error (the transport failed, or the set's coordinator ended the job).
// With `paused`, a round whose peers are late stays open (Controller).
Status RunSetRound(ProcessSet& set, Controller::Leaving leaving, ResponseList* list,
                   bool* paused = nullptr) {
  Status s = set.controller->ComputeResponseList(leaving, list, paused);
  if (!s.ok()) {
    if (set.id == 0) return s;
    return Status(s.code(), set.label + ": " + s.message());
  }
  if (paused != nullptr && *paused) return Status();
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

}  // namespace

BackgroundLoop::BackgroundLoop(LoopParts parts)
    : parts_(std::move(parts)),
      final_status_(Status::Aborted(
          "Horovod has been shut down in this process (hvd.shutdown(), or the process is "
          "exiting); this collective did not run")) {}

BackgroundLoop::~BackgroundLoop() = default;

Status BackgroundLoop::Start() {
  const Parameters& params = parts_.params;
  ClearPeerLoss();  // the last job's, if a peer was lost there
  Status s = parts_.transport->Init(&topology_);
  if (s.ok()) SetLogRank(topology_.rank);
  if (s.ok()) {
    int cpu = -1;
    s = ThreadAffinityCpu(params.thread_affinity, topology_.local_rank, topology_.local_size,
                          &cpu);
    if (s.ok()) s = PinThisThread(cpu);
    pinned_cpu_ = PinnedCpu();
    if (s.ok() && cpu >= 0) TFHVD_LOG(DEBUG) << "background thread pinned to CPU " << cpu;
  }
  std::vector<std::string> hosts;
  if (s.ok()) s = ExchangeHosts(parts_.transport, ThisHost(params), &hosts);
  faults_.reset(new FaultReporter(topology_.rank, hosts,
                                  s.ok() && parts_.fault_channels
                                      ? parts_.fault_channels(topology_)
                                      : std::vector<std::unique_ptr<FaultChannel>>()));
  if (s.ok()) s = StartLiveness(hosts);
  // The GPU backend (CUDA variant only; the global set's GPU tensors); its NCCL
  // communicators start at first use.
  gpu_ = CreateGpuBackend();
  parts_.sets->Reset(std::shared_ptr<ProcessSet>(ProcessSet::Global(
                         parts_.transport, topology_, parts_.queue, params, gpu_.get())),
                     SetContext{parts_.transport, topology_, params});
  std::shared_ptr<ProcessSet> global = parts_.sets->Find(0);
  if (s.ok()) s = global->Open();
  if (s.ok() && gpu_) s = gpu_->Open(parts_.transport, topology_, params);
  if (s.ok()) s = parts_.sets->OpenStatic(parts_.static_sets, HostKey());
  // HOROVOD_TIMELINE=DYNAMIC: no file until hvd.start_timeline().
  if (s.ok() && topology_.rank == 0 && !params.timeline_path.empty() &&
      !TimelineIsDynamic(params.timeline_path)) {
    std::string error;
    if (!GlobalTimeline().Start(params.timeline_path, params.timeline_mark_cycles, &error)) {
      TFHVD_LOG(WARNING) << error;
    }
  }
  if (!s.ok()) {
    if (liveness_) liveness_->Stop();  // its verdicts would reach the next init's queue
    for (auto& kv : parts_.sets->Snapshot()) kv.second->Close();
    parts_.sets->Clear();
    if (gpu_) gpu_->Close();
    return s;
  }
  wait_.reset(new IdleBackoff(CycleTime(params.cycle_time_ms)));
  StartTuning(*global);
  // A pinned background thread (HOROVOD_THREAD_AFFINITY) asks for the
  // collectives on its CPU. With more ranks on this host than CPUs, an op's
  // thread running rounds made single ops slower (docs/performance.md).
  rounds_in_op_threads_ = params.inline_rounds && !gpu_ && params.thread_affinity.empty() &&
                          topology_.local_size <= UsableCpus();
  return Status();
}

Status BackgroundLoop::StartLiveness(const std::vector<std::string>& hosts) {
  if (parts_.params.peer_timeout_s <= 0 || topology_.size < 2) return Status();
  LivenessMonitor::Config config;
  config.rank = topology_.rank;
  config.size = topology_.size;
  config.hosts = hosts;
  config.params = parts_.params;
  config.timeout_s = parts_.params.peer_timeout_s;
  FaultReporter* faults = faults_.get();
  TensorQueue* queue = parts_.queue;
  return LivenessMonitor::Start(
      parts_.transport, config,
      [faults, queue](int rank, const std::string& message) {
        DeclarePeerLost(rank, message);
        // Now, not when the background thread gets out of its wait: a wait in
        // one of Gloo's own collectives ends only at its op timeout.
        faults->Publish(FaultRecord{rank, "silent", message});
        queue->Notify();
      },
      &liveness_);
}

void BackgroundLoop::StartTuning(const ProcessSet& global) {
  if (!parts_.params.autotune || topology_.rank != 0) return;
  const bool hierarchical = global.allreduce && global.allreduce->hierarchical_ready();
  tuner_.reset(new ParameterManager(parts_.params, hierarchical));
  if (!tuner_->active()) return;
  std::string names;
  for (auto k : tuner_->tuned()) {
    names += (names.empty() ? "" : ", ") + std::string(ParameterManager::KnobName(k));
  }
  TFHVD_LOG(INFO) << "autotune: tuning " << names;
}

void BackgroundLoop::Tune(ProcessSet& global, const ResponseList& list) {
  ++global_rounds_;
  if (list.has_tuned) {
    // The controller switched fusion and cache at this round's end; the cycle
    // time and the allreduce algorithm switch here.
    wait_->SetCycle(CycleTime(list.tuned.cycle_time_ms));
    if (global.allreduce) global.allreduce->SetHierarchical(list.tuned.hierarchical_allreduce);
    {
      std::lock_guard<std::mutex> lock(history_mutex_);
      history_.push_back({global_rounds_, list.tuned});
    }
    if (tuner_) tuner_->Applied(SecondsNow());
    return;  // a round that switched values belongs to no sample
  }
  TunedParameters next;
  if (tuner_ && tuner_->Update(AllreducedBytes(list), SecondsNow(), &next)) {
    global.controller->ProposeTuning(next);
  }
}

namespace {

// Whether this thread runs rounds now: a collective's callback that starts the
// next op (TensorFlow may run it inline) must not run rounds within rounds.
thread_local bool t_in_rounds = false;

struct InRounds {
  InRounds() { t_in_rounds = true; }
  ~InRounds() { t_in_rounds = false; }
};

}  // namespace

bool BackgroundLoop::RunCycle() {
  bool several = false;
  std::vector<std::shared_ptr<ProcessSet>> sets = parts_.sets->MemberSets(&several);
  parts_.queue->WaitForWork(wait_->Next(QueuedEntries(sets) > 0, several));
  GlobalCpuBinding().Tick();  // gives HOROVOD_CPU_BIND's binding up while others need the CPUs
  std::lock_guard<std::mutex> lock(rounds_mutex_);
  if (ended_) return false;
  InRounds mark;
  if (!Rounds()) ended_ = true;
  return !ended_;
}

void BackgroundLoop::RunRoundsHereOrWake(size_t added) {
  // Other tensors queued: ops arrive together (many in one step), and the
  // background thread's round takes them all at once, fused; an op's own
  // round would take them one by one, each rank in its own order.
  if (!t_in_rounds && parts_.queue->size() <= added) {
    std::unique_lock<std::mutex> lock(rounds_mutex_, std::try_to_lock);
    if (lock.owns_lock() && !ended_) {
      bool several = false;
      const std::vector<std::shared_ptr<ProcessSet>> sets = parts_.sets->MemberSets(&several);
      // Without other sets, `sets` is the global set alone; its round waits
      // for late peers no longer than a spin (a TensorFlow thread held there
      // would hold up the rest of its step), then the loop continues it.
      if (!several && !sets.empty() && sets[0]->RoundsPause()) {
        bool paused = false;
        {
          InRounds mark;
          if (!Rounds(&paused)) ended_ = true;
        }
        if (!ended_ && !paused && parts_.queue->size() == 0) return;
      }
    }
  }
  parts_.queue->Notify();
}

bool BackgroundLoop::Rounds(bool* paused) {
  bool several = false;
  std::vector<std::shared_ptr<ProcessSet>> sets = parts_.sets->MemberSets(&several);
  GlobalTimeline().MarkCycle();
  bool progress = false, stop = false;
  if (PeerLost()) {
    failed_ = true;
    final_status_ = faults_->Failed(PeerLostError());
    TFHVD_LOG(ERROR) << "stopping: " << final_status_.message();
    return false;
  }
  for (const auto& set : sets) {
    if (set->removed) continue;  // removed in this cycle's global round
    ResponseList list;
    const auto leaving = set->id == 0 ? static_cast<Controller::Leaving>(parts_.leaving->load())
                                      : Controller::Leaving::NO;
    Status s = RunSetRound(*set, leaving, &list, paused);
    if (!s.ok()) {
      // After a peer was declared lost, whatever broke next is its consequence.
      failed_ = true;
      final_status_ = faults_->Failed(PeerLost() ? PeerLostError() : s);
      TFHVD_LOG(ERROR) << "negotiation or collective failed, stopping: "
                       << final_status_.message();
      stop = true;
      break;
    }
    if (paused != nullptr && *paused) return true;  // the global set's, and the only one
    if (set->id == 0) Tune(*set, list);
    progress |= !list.responses.empty();
    if (list.shutdown) {
      // Another rank shut down or is exiting while this one still runs.
      if (parts_.leaving->load() == 0) final_status_ = faults_->LeftByOthers(list);
      stop = true;
      break;
    }
  }
  if (progress) GlobalTimeline().Flush();
  if (stop) return false;
  wait_->AfterRound(progress);
  return true;
}

void BackgroundLoop::Stop() {
  // After a shutdown the peers learn this rank leaves (it is not lost); after a failure it
  // just falls silent: a peer still waiting on it must not take it for a clean farewell.
  if (liveness_) liveness_->Stop(/*announce=*/!failed_);
  GlobalTimeline().Stop();
  // The table stays (closed) until the next init: a peer's shutdown can end
  // this loop while this rank's hvd.init() still reads it.
  for (auto& kv : parts_.sets->Snapshot()) {
    if (kv.second->member()) kv.second->queue->FailAll(final_status_);
    kv.second->Close();
  }
  if (gpu_) gpu_->Close();
  parts_.transport->Finalize();
}

std::vector<AutotuneRecord> BackgroundLoop::autotune_history() const {
  std::lock_guard<std::mutex> lock(history_mutex_);
  return history_;
}

}  // namespace tfhvd
