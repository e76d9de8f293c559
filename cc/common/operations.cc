#include "cc/common/operations.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>  // environ

#include "cc/common/algorithms/allreduce_runner.h"
#include "cc/common/collective_ops.h"
#include "cc/common/controller.h"
#include "cc/common/knobs.h"
#include "cc/common/local_transport.h"
#include "cc/common/logging.h"
#include "cc/common/malloc_tuning.h"
#include "cc/common/parameters.h"
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
  std::atomic<bool> shutdown_requested{false};
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
};

GlobalState& State() {
  static GlobalState* state = new GlobalState();  // never destroyed: see Shutdown
  return *state;
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

Status CreateTransport(const Parameters& params, std::unique_ptr<Transport>* out) {
  std::string choice = params.controller;
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

// The background loop: wait for work (or the cycle time), negotiate, perform.
void BackgroundLoop(GlobalState* st, std::shared_ptr<std::promise<Status>> ready) {
  Status s = st->transport->Init(&st->topology);
  if (s.ok()) SetLogRank(st->topology.rank);
  AllreduceRunner allreduce(st->transport.get(), st->topology, st->params);
  if (s.ok()) s = allreduce.Open();
  // The GPU backend (CUDA variant only); its NCCL communicators start at first use.
  std::unique_ptr<GpuBackend> gpu = CreateGpuBackend();
  if (s.ok() && gpu) s = gpu->Open(st->transport.get(), st->topology, st->params);
  if (s.ok() && st->topology.rank == 0 && !st->params.timeline_path.empty()) {
    std::string error;
    if (!GlobalTimeline().Start(st->params.timeline_path, st->params.timeline_mark_cycles,
                                &error)) {
      TFHVD_LOG(WARNING) << error;
    }
  }
  ready->set_value(s);
  if (!s.ok()) {
    if (gpu) gpu->Close();
    allreduce.Close();
    return;
  }
  TFHVD_LOG(DEBUG) << "background thread started: transport " << st->transport->name()
                   << ", rank " << st->topology.rank << " of " << st->topology.size;
  Controller controller(st->transport.get(), st->topology, st->params, st->queue.get());
  CollectiveOps ops(st->transport.get(), &allreduce, st->topology, gpu.get());
  auto cycle = std::chrono::microseconds(static_cast<int64_t>(st->params.cycle_time_ms * 1000));
  Status final_status = Status::Aborted(
      "Horovod has been shut down (hvd.shutdown() was called or a rank exited); "
      "this collective did not run");
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
    s = controller.ComputeResponseList(st->shutdown_requested.load(), &list);
    if (!s.ok()) {
      final_status = s;
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
        final_status = s;
        fatal = true;
        TFHVD_LOG(ERROR) << "collective failed, stopping: " << s.message();
        break;
      }
    }
    if (!list.responses.empty()) GlobalTimeline().Flush();
    if (fatal || list.shutdown) break;
    backoff = list.responses.empty()
                  ? std::min(cycle, std::max(backoff * 2, std::chrono::microseconds(20)))
                  : std::chrono::microseconds(0);
  }
  SetStopped(*st, final_status);
  st->running = false;
  GlobalTimeline().Stop();
  st->queue->FailAll(final_status);
  if (gpu) gpu->Close();
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
  WarnAboutUnknownKnobs();
  if (st.params.malloc_reuse) KeepLargeBuffersInHeap();
  st.queue.reset(new TensorQueue());
  st.shutdown_requested = false;
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
  static bool exit_hook = (std::atexit([] { Shutdown(); }), true);
  (void)exit_hook;
  return Status();
}

void Shutdown() {
  GlobalState& st = State();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.topology_known = false;
  if (st.background.joinable()) {
    st.shutdown_requested = true;
    st.queue->Notify();
    st.background.join();
  }
  SetStopped(st, Status::Aborted(
                     "Horovod has been shut down; call hvd.init() again to use collectives"));
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

const char* TransportName() {
  GlobalState& st = State();
  return st.transport ? st.transport->name() : "none";
}

namespace {

// Checks one entry's arguments on this rank (and fills alltoall's even splits).
Status CheckEntry(TensorTableEntry& entry) {
  GlobalState& st = State();
  entry.request.on_gpu = entry.gpu.on_gpu();
  const Request& q = entry.request;
  const int size = st.topology.size;
  if ((q.type == OpType::ALLGATHER || q.type == OpType::ALLTOALL ||
       q.type == OpType::REDUCESCATTER) && q.shape.empty()) {
    return Status::InvalidArgument("tensor '" + q.name + "': " + OpTypeName(q.type) +
                                   " needs a tensor of rank >= 1, got a scalar");
  }
  if (q.type == OpType::ALLREDUCE && q.reduce_op == ReduceOp::ADASUM) {
    return Status::InvalidArgument("tensor '" + q.name + "': Adasum is not supported yet");
  }
  if (q.type == OpType::REDUCESCATTER && q.reduce_op != ReduceOp::SUM &&
      q.reduce_op != ReduceOp::AVERAGE) {
    return Status::InvalidArgument("tensor '" + q.name +
                                   "': reducescatter supports only Sum and Average, got " +
                                   ReduceOpName(q.reduce_op));
  }
  if (q.type == OpType::BROADCAST && (q.root_rank < 0 || q.root_rank >= size)) {
    return Status::InvalidArgument("tensor '" + q.name + "': root_rank " +
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
