#include "cc/common/algorithms/shm_flush_policy.h"

namespace tfhvd {

ShmFlushPolicy::Mode ShmFlushPolicy::ParseMode(const std::string& knob) {
  if (knob == "on") return Mode::kAlways;
  if (knob == "off") return Mode::kNever;
  return Mode::kAuto;
}

bool ShmFlushPolicy::Choose(uint64_t block) const {
  if (mode_ != Mode::kAuto) return mode_ == Mode::kAlways;
  return block % kPeriod < kTrial ? !preferred_ : preferred_;
}

void ShmFlushPolicy::Record(uint64_t block, bool flushed, size_t bytes, double ns) {
  if (mode_ != Mode::kAuto || bytes < kMinBytes) return;
  const uint64_t phase = block % kPeriod;
  if (phase < kSettle || (phase >= kTrial && phase < kTrial + kSettle)) return;
  const int way = flushed ? 1 : 0;
  const double per_byte = ns / static_cast<double>(bytes);
  cost_[way] = samples_[way] == 0 ? per_byte : 0.75 * cost_[way] + 0.25 * per_byte;
  ++samples_[way];
  if (samples_[0] == 0 || samples_[1] == 0 || phase < kTrial + kSettle) return;
  // Outside a trial: switch only for a clear gain (the costs carry noise).
  const int kept = preferred_ ? 1 : 0;
  if (cost_[1 - kept] < kMargin * cost_[kept]) preferred_ = !preferred_;
}

}  // namespace tfhvd
