// The background thread's work: Start() connects the transport and opens the
// job's process sets, each RunCycle() waits for work (IdleBackoff) and runs
// one negotiation round per set this rank belongs to (the global set first),
// each performing the collectives it decided, and Stop() fails what is left
// and closes everything. It owns the autotune state (rank 0 tunes; every rank
// applies what the global round carries) and the fault blame.
//
// An op's thread may run a cycle's rounds itself (RunRoundsHereOrWake): a
// round is a collective that pairs with the peers' rounds whichever thread
// runs them, one thread at a time (rounds_mutex_). Waking the background
// thread and waking the op's waiter again cost more than a small collective
// on a host whose idle CPUs sleep (docs/performance.md). It does so only when
// the round will not wait for a peer: a TensorFlow thread held there would
// hold up the rest of its step.
//
//   BackgroundLoop loop(parts);              // on the background thread:
//   Status s = loop.Start();                 // Initialize() waits for this
//   while (s.ok() && loop.RunCycle()) {}
//   loop.Stop();                             // after the facade marked itself stopped
//   loop.RunRoundsHereOrWake(1);             // an op's thread, after a quiet Add of 1
#ifndef TFHVD_COMMON_CORE_BACKGROUND_LOOP_H_
#define TFHVD_COMMON_CORE_BACKGROUND_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/autotune/parameter_manager.h"
#include "cc/common/core/fault_reporter.h"
#include "cc/common/core/idle_backoff.h"
#include "cc/common/core/process_set_table.h"
#include "cc/common/gpu_backend.h"

namespace tfhvd {

class LivenessMonitor;  // core/liveness_monitor.h

// Autotune (HOROVOD_AUTOTUNE): the values this rank switched to, one record
// per switch, with the global negotiation round (counted from 1, the same on
// every rank) whose end it switched at.
struct AutotuneRecord {
  int64_t round = 0;
  TunedParameters values;
};

// What the loop runs on; owned by its caller (the operations facade).
struct LoopParts {
  Transport* transport = nullptr;
  TensorQueue* queue = nullptr;  // the global set's
  ProcessSetTable* sets = nullptr;
  Parameters params;
  std::vector<std::vector<int>> static_sets;  // hvd.init(process_sets=...)
  // The launcher's fault channels, once the topology is known.
  std::function<std::vector<std::unique_ptr<FaultChannel>>(const Topology&)> fault_channels;
  // Controller::Leaving, set by Shutdown() from another thread.
  const std::atomic<int>* leaving = nullptr;
};

class BackgroundLoop {
 public:
  explicit BackgroundLoop(LoopParts parts);
  ~BackgroundLoop();

  // Connects the transport, pins the thread (HOROVOD_THREAD_AFFINITY),
  // exchanges host names, opens the global set, the GPU backend and the
  // static sets, starts the timeline. On error everything opened is closed.
  Status Start();
  // One cycle; false once the loop must end (final_status() says why).
  bool RunCycle();
  // From an op's thread right after it queued `added` tensors without waking
  // this loop: if no thread runs rounds now, no other tensor is queued, and
  // the rounds can pause (one host, no other sets: ProcessSet::RoundsPause),
  // runs that cycle's round here (the op's collective may finish before the
  // call returns, and nobody sleeps or wakes for it). Wakes the loop when the
  // round paused for a late peer, when it could not run here, or when tensors
  // are left queued.
  void RunRoundsHereOrWake(size_t added = 1);
  // Fails every queued op with final_status(), closes the sets, the GPU
  // backend and the transport.
  void Stop();

  const Topology& topology() const { return topology_; }
  const Status& final_status() const { return final_status_; }
  int pinned_cpu() const { return pinned_cpu_.load(); }
  // Whether ops call RunRoundsHereOrWake (HOROVOD_INLINE_ROUNDS; not with a
  // GPU backend, whose CUDA device is per thread, nor with the thread pinned
  // by HOROVOD_THREAD_AFFINITY, nor with more ranks on this host than CPUs
  // this process may use); set by Start.
  bool rounds_in_op_threads() const { return rounds_in_op_threads_; }
  std::vector<AutotuneRecord> autotune_history() const;

 private:
  void StartTuning(const ProcessSet& global);
  // Starts the liveness monitor (collective); a peer it declares lost fails
  // every wait on the peers at once (transport/peer_loss.h), is reported to
  // the launcher at once, and wakes this loop.
  Status StartLiveness(const std::vector<std::string>& hosts);
  // The global round's autotune steps: switch to what it carries, or sample.
  void Tune(ProcessSet& global, const ResponseList& list);
  // The rounds of one cycle, under rounds_mutex_; false once the loop must end.
  // With `paused` (the global set alone, RoundsPause), a round whose peers are
  // late stays open and *paused says so.
  bool Rounds(bool* paused = nullptr);

  LoopParts parts_;
  Topology topology_;
  std::unique_ptr<GpuBackend> gpu_;
  std::unique_ptr<FaultReporter> faults_;
  std::unique_ptr<LivenessMonitor> liveness_;  // HOROVOD_PEER_TIMEOUT_SECONDS > 0, several ranks
  std::unique_ptr<IdleBackoff> wait_;
  std::unique_ptr<ParameterManager> tuner_;  // rank 0 with HOROVOD_AUTOTUNE
  int64_t global_rounds_ = 0;
  Status final_status_;
  bool failed_ = false;  // the loop ended on an error (not a shutdown): no farewell to peers
  std::atomic<int> pinned_cpu_{-1};  // as the thread's affinity mask says; -1: not one CPU
  // Held by whichever thread runs rounds (the loop's, or an op's).
  std::mutex rounds_mutex_;
  bool ended_ = false;  // under rounds_mutex_: a round failed or the job ended
  bool rounds_in_op_threads_ = false;
  mutable std::mutex history_mutex_;
  std::vector<AutotuneRecord> history_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_BACKGROUND_LOOP_H_
