// HOROVOD_CPU_BIND's binding, kept only while the rank has its CPUs to itself.
//
// hvd.init() binds each local rank to its own slice of the host's CPUs
// (tf_hvd/tf_threads.py): on a machine the job has to itself, that keeps a
// rank's compute from migrating onto the core where a peer is finishing its
// share of a step. When another process competes for a bound rank's CPUs, the
// rank gets only part of them while every synchronous step waits for it, and
// the scheduler may not move it to a CPU with room. So the background thread
// watches the slice once a second: when other processes took at least a
// quarter of it in two windows in a row, the rank may use every CPU it had
// before binding; after HOROVOD_CPU_BIND_RETRY_SECONDS (doubled, up to 8x,
// each time the contention is still there) it binds again and looks anew.
//
//   CpuBinding& binding = GlobalCpuBinding();
//   Status s = binding.Bind(/*bound=*/{1}, /*wide=*/{0, 1}, /*retry_s=*/30);  // hvd.init()
//   binding.Tick();  // the background loop, every cycle
#ifndef TFHVD_COMMON_HOST_CPU_BINDING_H_
#define TFHVD_COMMON_HOST_CPU_BINDING_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/common.h"

namespace tfhvd {

// When to give the binding up and when to try it again, from each window's
// share of the bound CPUs that other processes used. Pure: the tests drive it.
class BindingPolicy {
 public:
  static constexpr double kBusyShare = 0.25;  // of the bound CPUs' time, in one window
  static constexpr int kBusyWindows = 2;      // windows in a row before releasing
  static constexpr double kMaxRetryFactor = 8;

  enum class Action { KEEP, RELEASE, REBIND };

  // retry_s <= 0: never release.
  explicit BindingPolicy(double retry_s = 0) : base_retry_s_(retry_s), retry_s_(retry_s) {}

  // One window ending at `now_s`; foreign_share counts only while bound.
  Action Observe(double now_s, double foreign_share);

  bool bound() const { return bound_; }
  int releases() const { return releases_; }
  double retry_s() const { return retry_s_; }  // the wait of the current (or next) release

 private:
  double base_retry_s_, retry_s_;
  bool bound_ = true;
  bool trial_ = false;  // bound again after a release, no quiet window yet
  int busy_windows_ = 0;
  int releases_ = 0;
  double released_at_s_ = 0;
};

// Busy ticks (user + nice + system) and all ticks of `cpus` in /proc/stat's
// text; false if a CPU's line is missing or malformed.
bool ParseCpuTicks(const std::string& proc_stat, const std::vector<int>& cpus, uint64_t* busy,
                   uint64_t* total);
// utime + stime of /proc/<pid>/stat's text; false if malformed.
bool ParseProcessTicks(const std::string& proc_pid_stat, uint64_t* ticks);

// Other processes' share of `cpus` since the previous sample.
class ForeignShareMeter {
 public:
  // Restarts the window (the CPUs changed, or the process was unbound).
  void Reset() { have_ = false; }
  // False on the first call after Reset() or when /proc cannot be read.
  bool Sample(const std::vector<int>& cpus, double* share);
  // The same from the texts of /proc/stat and /proc/self/stat.
  bool Update(const std::string& proc_stat, const std::string& proc_self_stat,
              const std::vector<int>& cpus, double* share);

 private:
  bool have_ = false;
  uint64_t busy_ = 0, total_ = 0, self_ = 0;
};

// Sets the affinity of every thread of this process (threads started later
// inherit it from the thread that starts them).
Status SetProcessAffinity(const std::vector<int>& cpus);

class CpuBinding {
 public:
  struct State {
    bool active = false;      // Bind() ran and releasing is possible
    bool bound = false;       // on `bound` now (else on `wide`)
    int releases = 0;         // times the binding was given up
    std::vector<int> cpus;    // the CPUs the process is on now
  };

  // Binds every thread to `bound`; the background thread may later widen the
  // process to `wide` and back (retry_s <= 0 or wide == bound: never).
  Status Bind(const std::vector<int>& bound, const std::vector<int>& wide, double retry_s);
  // Called by the background thread every cycle; works once a second.
  void Tick();
  State state();

 private:
  void Window(double now_s);

  std::mutex mu_;
  std::atomic<bool> active_{false};
  std::atomic<double> next_window_s_{0};
  std::vector<int> bound_, wide_;
  BindingPolicy policy_;
  ForeignShareMeter meter_;
  double window_start_s_ = 0;
};

CpuBinding& GlobalCpuBinding();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_HOST_CPU_BINDING_H_
