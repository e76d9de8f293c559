// Whether the shared-memory allreduce's readers flush the slot lines they read.
//
// A rank rewrites its slots one block after its peers read them. Where the
// host keeps the two vCPUs "far" apart (a cache line's round trip several
// times the near one's), taking each line back from the reader's cache is
// many times slower than near; when the reader flushes (clflushopt) what it
// read, the rewrite goes to memory instead, which costs the same on either
// placement: about half of the far cost, about twice the near one (the
// figures: docs/performance.md, "Figures behind the core's defaults";
// python/benchmarks/overwrite_probe.c measures them). The host moves the
// vCPUs between the two every few minutes, so neither choice is right for a
// whole job: rank 0 times its blocks both ways and keeps the cheaper, trying
// the other for a few blocks of every kPeriod.
//
//   ShmFlushPolicy policy(ShmFlushPolicy::Mode::kAuto);
//   bool flush = policy.Choose(block);        // rank 0, at the start of a block
//   ...                                        // the block, readers flushing or not
//   policy.Record(block, flush, bytes, ns);   // rank 0, at its end
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_FLUSH_POLICY_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_FLUSH_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfhvd {

class ShmFlushPolicy {
 public:
  enum class Mode { kAuto, kAlways, kNever };
  // HOROVOD_SHM_READER_FLUSH: "auto", "on" or "off".
  static Mode ParseMode(const std::string& knob);

  // Every kPeriod blocks, kTrial blocks run the other way; the first kSettle
  // blocks after a switch are not counted (the lines of the block before were
  // read the old way). Blocks under kMinBytes are too short to time.
  static constexpr uint64_t kPeriod = 512;
  static constexpr uint64_t kTrial = 8;
  static constexpr uint64_t kSettle = 2;
  static constexpr size_t kMinBytes = size_t(256) << 10;
  // The other way must be this much cheaper per byte to take over.
  static constexpr double kMargin = 0.85;

  explicit ShmFlushPolicy(Mode mode = Mode::kAuto) : mode_(mode) {}

  // Whether readers flush in `block` (blocks count from 0 on every rank alike).
  bool Choose(uint64_t block) const;
  // Rank 0's time for `block` (bytes in ns), run with readers flushing or not.
  void Record(uint64_t block, bool flushed, size_t bytes, double ns);
  // The way kept outside the trials.
  bool preferred() const { return preferred_; }

 private:
  Mode mode_;
  bool preferred_ = false;
  double cost_[2] = {0, 0};  // ns per byte, smoothed; [0] plain, [1] flushing
  int samples_[2] = {0, 0};
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_FLUSH_POLICY_H_
