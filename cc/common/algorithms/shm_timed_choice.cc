#include "cc/common/algorithms/shm_timed_choice.h"

namespace tfhvd {

ShmTimedChoice::Mode ShmTimedChoice::ParseMode(const std::string& knob) {
  if (knob == "on") return Mode::kAlways;
  if (knob == "off") return Mode::kNever;
  return Mode::kAuto;
}

bool ShmTimedChoice::Choose(uint64_t unit) const {
  if (mode_ != Mode::kAuto) return mode_ == Mode::kAlways;
  return unit % schedule_.period < schedule_.trial ? !preferred_ : preferred_;
}

void ShmTimedChoice::Record(uint64_t unit, bool second, size_t bytes, double ns) {
  if (mode_ != Mode::kAuto || bytes < schedule_.min_bytes) return;
  const uint64_t phase = unit % schedule_.period;
  const uint64_t trial = schedule_.trial, settle = schedule_.settle;
  if (phase < settle || (phase >= trial && phase < trial + settle)) return;
  const int way = second ? 1 : 0;
  const double per_byte = ns / static_cast<double>(bytes);
  cost_[way] = samples_[way] == 0 ? per_byte : 0.75 * cost_[way] + 0.25 * per_byte;
  ++samples_[way];
  if (samples_[0] == 0 || samples_[1] == 0 || phase < trial + settle) return;
  // Outside a trial: switch only for a clear gain (the costs carry noise).
  const int kept = preferred_ ? 1 : 0;
  if (cost_[1 - kept] < schedule_.margin * cost_[kept]) preferred_ = !preferred_;
}

}  // namespace tfhvd
