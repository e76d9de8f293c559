// Which of two ways of running shared-memory work is cheaper on this host
// now, by rank 0's own timing: it keeps the cheaper way, and tries the other
// for a few units of every period (the host moves its vCPUs; what was cheaper
// may not stay so). Two choices use it (shm_collectives.h):
//
// - Whether readers flush the slot lines they read (unit: a block). A rank
//   rewrites its slots one block after its peers read them. Where the host
//   keeps the two vCPUs "far" apart (a cache line's round trip several times
//   the near one's), taking each line back from the reader's cache is many
//   times slower than near; when the reader flushes (clflushopt) what it
//   read, the rewrite goes to memory instead, which costs the same on either
//   placement: about half of the far cost, about twice the near one (the
//   figures: docs/performance.md, "Figures behind the core's defaults";
//   python/benchmarks/overwrite_probe.c measures them).
// - Whether a large allreduce goes through the slots or reads the peers'
//   tensors in place (unit: a call; shm_single_copy.cc). The slots are about
//   twice as fast near; far, every slot line rewritten is taken back from the
//   peer, and the single copy, which rewrites no shared line, is about twice
//   as fast (experiments/single-op-time/).
//
//   ShmTimedChoice choice(ShmTimedChoice::Mode::kAuto, ShmTimedChoice::kFlush);
//   bool other = choice.Choose(block);       // rank 0, at the start of a unit
//   ...                                      // the unit, run the chosen way
//   choice.Record(block, other, bytes, ns);  // rank 0, at its end
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_TIMED_CHOICE_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_TIMED_CHOICE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfhvd {

class ShmTimedChoice {
 public:
  // kAlways: always the second way (true); kNever: always the first.
  enum class Mode { kAuto, kAlways, kNever };
  // A knob's "auto", "on" or "off".
  static Mode ParseMode(const std::string& knob);

  // Every `period` units (every quarter period in the first one), `trial`
  // units run the other way; the first `settle` units after a change of way
  // are not counted (they pay for the change: lines of the unit before, read
  // the old way). Units under min_bytes are too short to time. The other way must cost less than `margin` times the kept one's
  // (per byte, smoothed over the units of its latest run) to take over.
  struct Schedule {
    uint64_t period, trial, settle;
    size_t min_bytes;
    double margin;
  };
  static constexpr Schedule kFlush = {512, 8, 2, size_t(256) << 10, 0.85};
  static constexpr Schedule kSingleCopy = {64, 4, 1, size_t(1) << 20, 0.85};

  explicit ShmTimedChoice(Mode mode = Mode::kAuto, Schedule schedule = kFlush)
      : mode_(mode), schedule_(schedule) {}

  // Whether `unit` (counted from 0 on every rank alike) runs the second way.
  bool Choose(uint64_t unit) const;
  // Rank 0's time for `unit` (bytes in ns), run the second way or not.
  void Record(uint64_t unit, bool second, size_t bytes, double ns);
  // The way kept outside the trials.
  bool preferred() const { return preferred_; }
  const Schedule& schedule() const { return schedule_; }

 private:
  bool InTrial(uint64_t unit) const;

  Mode mode_;
  Schedule schedule_;
  bool preferred_ = false;
  double cost_[2] = {0, 0};  // ns per byte, latest run of each; [0] first way, [1] second
  int samples_[2] = {0, 0};
  bool last_ = false;  // the way of the last unit timed
  uint64_t run_ = 0;   // units timed that way since the change
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_TIMED_CHOICE_H_
