#include "cc/common/autotune/parameter_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cc/common/logging.h"

namespace tfhvd {

namespace {

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

std::string ValuesText(const TunedParameters& v) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "fusion threshold %.2f MiB, cycle time %.1f ms, response cache %s, "
                "hierarchical allreduce %s",
                static_cast<double>(v.fusion_threshold_bytes) / (1024.0 * 1024.0),
                v.cycle_time_ms, v.response_cache ? "on" : "off",
                v.hierarchical_allreduce ? "on" : "off");
  return buf;
}

}  // namespace

const char* ParameterManager::KnobName(Knob knob) {
  switch (knob) {
    case Knob::FUSION_THRESHOLD: return "HOROVOD_FUSION_THRESHOLD";
    case Knob::CYCLE_TIME: return "HOROVOD_CYCLE_TIME";
    case Knob::RESPONSE_CACHE: return "HOROVOD_CACHE_CAPACITY";
    case Knob::HIERARCHICAL_ALLREDUCE: return "HOROVOD_HIERARCHICAL_ALLREDUCE";
  }
  return "?";
}

ParameterManager::ParameterManager(const Parameters& params, bool hierarchical_tunable,
                                   uint64_t seed)
    : steps_per_sample_(std::max<int64_t>(1, params.autotune_steps_per_sample)),
      warmup_left_(std::max<int64_t>(0, params.autotune_warmup_samples)),
      max_samples_(std::max<int64_t>(1, params.autotune_bayes_opt_max_samples)),
      optimizer_(0, params.autotune_gaussian_process_noise, seed) {
  current_.fusion_threshold_bytes = params.fusion_threshold_bytes;
  current_.cycle_time_ms = params.cycle_time_ms;
  current_.response_cache = params.cache_capacity > 0;
  current_.hierarchical_allreduce = params.hierarchical_allreduce;
  auto fixed = [&params](Knob k) { return params.set_knobs.count(KnobName(k)) > 0; };
  for (Knob k : {Knob::FUSION_THRESHOLD, Knob::CYCLE_TIME, Knob::RESPONSE_CACHE,
                 Knob::HIERARCHICAL_ALLREDUCE}) {
    if (fixed(k)) continue;
    if (k == Knob::HIERARCHICAL_ALLREDUCE && !hierarchical_tunable) continue;
    knobs_.push_back(k);
  }
  optimizer_ = BayesianOptimizer(knobs_.size(), params.autotune_gaussian_process_noise, seed);
  for (size_t i = 0; i < knobs_.size(); ++i) {
    if (knobs_[i] == Knob::RESPONSE_CACHE || knobs_[i] == Knob::HIERARCHICAL_ALLREDUCE) {
      optimizer_.SetBinary(i);
    }
  }
  point_ = PointOf(current_);
  if (knobs_.empty()) {
    active_ = false;
    TFHVD_LOG(WARNING) << "HOROVOD_AUTOTUNE: every tunable knob is set explicitly; nothing "
                          "to tune";
    return;
  }
  if (!params.autotune_log.empty()) {
    log_.open(params.autotune_log, std::ios::out | std::ios::trunc);
    if (!log_) {
      log_error_ = "HOROVOD_AUTOTUNE_LOG: cannot write " + params.autotune_log;
      TFHVD_LOG(WARNING) << log_error_;
    } else {
      log_ << "sample,fusion_threshold_bytes,cycle_time_ms,response_cache,"
              "hierarchical_allreduce,score_bytes_per_second\n";
      log_.flush();
    }
  }
}

TunedParameters ParameterManager::ValuesAt(const std::vector<double>& x) const {
  TunedParameters v = current_;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const double u = Clamp01(x[i]);
    switch (knobs_[i]) {
      case Knob::FUSION_THRESHOLD:
        v.fusion_threshold_bytes =
            static_cast<int64_t>(std::llround(u * kMaxFusionBytes / kFusionStepBytes)) *
            kFusionStepBytes;
        break;
      case Knob::CYCLE_TIME:
        v.cycle_time_ms = std::round((kMinCycleMs + u * (kMaxCycleMs - kMinCycleMs)) * 10) / 10;
        break;
      case Knob::RESPONSE_CACHE: v.response_cache = u >= 0.5; break;
      case Knob::HIERARCHICAL_ALLREDUCE: v.hierarchical_allreduce = u >= 0.5; break;
    }
  }
  return v;
}

std::vector<double> ParameterManager::PointOf(const TunedParameters& v) const {
  std::vector<double> x(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) {
    switch (knobs_[i]) {
      case Knob::FUSION_THRESHOLD:
        x[i] = Clamp01(static_cast<double>(v.fusion_threshold_bytes) / kMaxFusionBytes);
        break;
      case Knob::CYCLE_TIME:
        x[i] = Clamp01((v.cycle_time_ms - kMinCycleMs) / (kMaxCycleMs - kMinCycleMs));
        break;
      case Knob::RESPONSE_CACHE: x[i] = v.response_cache ? 1.0 : 0.0; break;
      case Knob::HIERARCHICAL_ALLREDUCE: x[i] = v.hierarchical_allreduce ? 1.0 : 0.0; break;
    }
  }
  return x;
}

void ParameterManager::WriteLogRow(double score) {
  if (!log_.is_open()) return;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%d,%lld,%.1f,%d,%d,%.1f\n", scored_samples(),
                static_cast<long long>(current_.fusion_threshold_bytes), current_.cycle_time_ms,
                current_.response_cache ? 1 : 0, current_.hierarchical_allreduce ? 1 : 0, score);
  log_ << buf;
  log_.flush();
}

bool ParameterManager::Update(int64_t bytes, double now_s, TunedParameters* next) {
  if (!active_ || paused_ || bytes <= 0) return false;
  if (start_s_ < 0) {
    start_s_ = now_s;  // this cycle's bytes moved before the clock started
    return false;
  }
  bytes_ += bytes;
  if (++cycles_ < steps_per_sample_) return false;
  const double score = static_cast<double>(bytes_) / std::max(now_s - start_s_, 1e-9);
  bytes_ = 0;
  cycles_ = 0;
  start_s_ = now_s;
  ++samples_seen_;
  if (warmup_left_ > 0) {
    --warmup_left_;
    return false;
  }
  optimizer_.AddSample(point_, score);
  WriteLogRow(score);
  TFHVD_LOG(DEBUG) << "autotune sample " << scored_samples() << ": " << ValuesText(current_)
                   << ": " << score / 1e6 << " MB/s";
  if (scored_samples() >= max_samples_) {
    active_ = false;
    point_ = optimizer_.Best();
    current_ = ValuesAt(point_);
    TFHVD_LOG(INFO) << "autotune done after " << scored_samples() << " samples: keeping "
                    << ValuesText(current_) << " (" << optimizer_.BestScore() / 1e6
                    << " MB/s)";
    *next = current_;
    return true;
  }
  point_ = optimizer_.NextSample();
  current_ = ValuesAt(point_);
  point_ = PointOf(current_);  // the rounded values are what gets measured
  paused_ = true;
  *next = current_;
  return true;
}

void ParameterManager::Applied(double now_s) {
  paused_ = false;
  start_s_ = now_s;
  bytes_ = 0;
  cycles_ = 0;
}

}  // namespace tfhvd
