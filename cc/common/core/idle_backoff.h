// How long the background thread waits before its next negotiation round.
// While this rank has tensors in flight it negotiates again at once, backing
// off (up to the cycle time) only while rounds make no progress; an idle rank
// polls less and less often (up to 20 ms, or the cycle time if longer): its
// peers do not need its rounds until it has work, and work wakes it at once.
// With process sets an idle rank's global round may be what members of
// another set wait for, so it polls every cycle time.
//
//   IdleBackoff wait(std::chrono::milliseconds(1));
//   queue.WaitForWork(wait.Next(/*busy=*/false, /*several_sets=*/false));  // 2 ms, 4 ms, ...
//   wait.AfterRound(/*progress=*/true);
#ifndef TFHVD_COMMON_CORE_IDLE_BACKOFF_H_
#define TFHVD_COMMON_CORE_IDLE_BACKOFF_H_

#include <algorithm>
#include <chrono>

namespace tfhvd {

class IdleBackoff {
 public:
  using Micros = std::chrono::microseconds;
  explicit IdleBackoff(Micros cycle) { SetCycle(cycle); idle_wait_ = cycle; }

  // HOROVOD_CYCLE_TIME, or what autotune switched it to.
  void SetCycle(Micros cycle) {
    cycle_ = cycle;
    max_idle_ = std::max(cycle, Micros(20000));
    idle_wait_ = std::min(idle_wait_, cycle);
  }
  // The wait before the next round: busy, this rank has tensors queued;
  // several_sets, the job has process sets besides the global one.
  Micros Next(bool busy, bool several_sets) {
    idle_wait_ = busy || several_sets ? cycle_ : std::min(max_idle_, idle_wait_ * 2);
    return busy ? backoff_ : idle_wait_;
  }
  // After a cycle's rounds: progress, some response was performed.
  void AfterRound(bool progress) {
    backoff_ = progress ? Micros(0) : std::min(cycle_, std::max(backoff_ * 2, Micros(20)));
  }

 private:
  Micros cycle_{0}, max_idle_{0}, idle_wait_{0}, backoff_{0};
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_IDLE_BACKOFF_H_
