// Autotune (HOROVOD_AUTOTUNE): rank 0's tuner. It measures the bytes
// allreduced per second over samples of HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
// background-loop cycles that reduced something, discards the first
// HOROVOD_AUTOTUNE_WARMUP_SAMPLES samples, and after each scored sample asks
// a Bayesian optimizer (bayesian_optimizer.h) for the next values to try.
// After HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES scored samples it proposes the
// best values seen and stops. Knobs set in the environment stay fixed.
//
// Tuned together in one Gaussian process over the unit cube: the fusion
// threshold (0-64 MiB, steps of 256 KiB), the cycle time (1-25 ms, steps of
// 0.1 ms), the response cache (on/off) and, where the job spans several
// hosts and its hierarchical links are open, hierarchical allreduce (on/off);
// the on/off dimensions only take the values 0 and 1.
//
//   ParameterManager tuner(params, /*hierarchical_tunable=*/false);
//   TunedParameters next;
//   // after every global round, on rank 0:
//   if (tuner.Update(bytes_allreduced, now_seconds, &next)) controller.ProposeTuning(next);
//   // once every rank applied them (the round that carried them):
//   tuner.Applied(now_seconds);
#ifndef TFHVD_COMMON_AUTOTUNE_PARAMETER_MANAGER_H_
#define TFHVD_COMMON_AUTOTUNE_PARAMETER_MANAGER_H_

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "cc/common/autotune/bayesian_optimizer.h"
#include "cc/common/autotune/tuned_parameters.h"
#include "cc/common/parameters.h"

namespace tfhvd {

class ParameterManager {
 public:
  enum class Knob { FUSION_THRESHOLD, CYCLE_TIME, RESPONSE_CACHE, HIERARCHICAL_ALLREDUCE };

  static constexpr int64_t kMaxFusionBytes = 64 * 1024 * 1024;
  static constexpr int64_t kFusionStepBytes = 256 * 1024;
  static constexpr double kMinCycleMs = 1.0;
  static constexpr double kMaxCycleMs = 25.0;

  // params: the job's knobs (start values, autotune settings, set_knobs).
  // hierarchical_tunable: every rank can switch hierarchical allreduce at
  // any round (several hosts, links open).
  ParameterManager(const Parameters& params, bool hierarchical_tunable, uint64_t seed = 20);

  // Still tuning (false once the best values were proposed, or when every
  // tunable knob is fixed).
  bool active() const { return active_; }
  const std::vector<Knob>& tuned() const { return knobs_; }
  const TunedParameters& current() const { return current_; }
  int scored_samples() const { return static_cast<int>(optimizer_.size()); }
  // Text of the log file's problems ("" when fine).
  const std::string& log_error() const { return log_error_; }

  // After every global round on rank 0, with the bytes allreduced in it
  // and the time (seconds, any fixed origin). Returns true with *next filled
  // when every rank should switch to new values; measuring then pauses until
  // Applied().
  bool Update(int64_t bytes, double now_s, TunedParameters* next);
  // The round that carried the values ended (the new sample starts now).
  void Applied(double now_s);

  // The values a point of the unit cube stands for, and back (for the tests).
  TunedParameters ValuesAt(const std::vector<double>& x) const;
  std::vector<double> PointOf(const TunedParameters& values) const;

  static const char* KnobName(Knob knob);
  // Autotune may switch hierarchical allreduce on later (HOROVOD_AUTOTUNE set,
  // HOROVOD_HIERARCHICAL_ALLREDUCE not): its links must be opened at start.
  static bool MayTuneHierarchical(const Parameters& params) {
    return params.autotune && !params.set_knobs.count(KnobName(Knob::HIERARCHICAL_ALLREDUCE));
  }

 private:
  void WriteLogRow(double score);

  int64_t steps_per_sample_;
  int64_t warmup_left_;
  int64_t max_samples_;
  std::vector<Knob> knobs_;
  BayesianOptimizer optimizer_;
  TunedParameters current_;
  std::vector<double> point_;  // current_ in the unit cube
  bool active_ = true;
  bool paused_ = false;
  double start_s_ = -1;  // < 0: the first sample starts at the first reducing cycle
  int64_t bytes_ = 0;
  int64_t cycles_ = 0;
  int64_t samples_seen_ = 0;  // warmup included
  std::ofstream log_;
  std::string log_error_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_AUTOTUNE_PARAMETER_MANAGER_H_
