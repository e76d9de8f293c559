#include "cc/common/algorithms/shm_timed_choice.h"

namespace tfhvd {

ShmTimedChoice::Mode ShmTimedChoice::ParseMode(const std::string& knob) {
  if (knob == "on") return Mode::kAlways;
  if (knob == "off") return Mode::kNever;
  return Mode::kAuto;
}

bool ShmTimedChoice::InTrial(uint64_t unit) const {
  // Four trials in the first period: a first trial that paid for a cold start
  // (pages first touched, lines not yet cached) is corrected within it.
  const uint64_t every = unit < schedule_.period ? schedule_.period / 4 : schedule_.period;
  return unit % every < schedule_.trial;
}

bool ShmTimedChoice::Choose(uint64_t unit) const {
  if (mode_ != Mode::kAuto) return mode_ == Mode::kAlways;
  return InTrial(unit) ? !preferred_ : preferred_;
}

void ShmTimedChoice::Record(uint64_t unit, bool second, size_t bytes, double ns) {
  if (mode_ != Mode::kAuto || bytes < schedule_.min_bytes) return;
  // The first units after a change of way pay for the change: not counted.
  run_ = second == last_ ? run_ + 1 : 0;
  last_ = second;
  if (run_ < schedule_.settle) return;
  const int way = second ? 1 : 0;
  const double per_byte = ns / static_cast<double>(bytes);
  // Each run of a way is judged afresh: what the host did before the last
  // change of way says little about now.
  const bool fresh = samples_[way] == 0 || run_ == schedule_.settle;
  cost_[way] = fresh ? per_byte : 0.75 * cost_[way] + 0.25 * per_byte;
  ++samples_[way];
  if (samples_[0] == 0 || samples_[1] == 0 || second != preferred_ || InTrial(unit)) return;
  // Outside a trial: switch only for a clear gain (the costs carry noise).
  const int kept = preferred_ ? 1 : 0;
  if (cost_[1 - kept] < schedule_.margin * cost_[kept]) preferred_ = !preferred_;
}

}  // namespace tfhvd
