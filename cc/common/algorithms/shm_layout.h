// The layout of a rank's shared-memory region (shm_collectives.h), known to
// the collectives' files alone: a header page of progress counters, the
// negotiation's two word buffers, then the rank's slots.
//
//   region: [ShmHeader | pad to kHeaderBytes][OrWords buffer 0][buffer 1]
//           [single-copy table][slot 0]...[slot kSlots-1]
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_LAYOUT_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cc/common/algorithms/shm_collectives.h"

namespace tfhvd {
namespace shm {

// Slots per rank, used in turn: a rank stages up to kSlots blocks ahead of
// what its peers have consumed. Two made the ranks hand the CPU to each other
// at every block on a busy host; more leave more slots cold between calls
// (experiments/single-op-time/).
constexpr size_t kSlots = 4;
constexpr size_t kHeaderBytes = 4096;     // keeps the slots page-aligned
// The negotiation's words, two buffers used in turn (OrWords).
constexpr size_t kOrBufferBytes = 4096;
constexpr size_t kOrBytes = 2 * kOrBufferBytes;
// A single-copy call's addresses (shm_single_copy.cc): a count, then per
// segment its input and output addresses in the owner's process.
constexpr size_t kSizeClasses = ShmCollectives::kSizeClasses;
constexpr size_t kTableBytes = 64 * 1024;
constexpr size_t kTableSegments = (kTableBytes - sizeof(uint64_t)) / (2 * sizeof(uint64_t));
static_assert(ShmCollectives::kMaxOrWords * sizeof(uint64_t) <= kOrBufferBytes,
              "OrWords' words must fit one buffer");
// Blocks staged, reduced and consumed; negotiation rounds (OrWords); single-copy
// calls whose table is written, whose own part is reduced, and that are done.
enum Counter {
  kStaged = 0,
  kReduced = 1,
  kConsumed = 2,
  kRounds = 3,
  kTableWritten = 4,
  kPartReduced = 5,
  kCopyDone = 6,
  kCounters = 7
};

}  // namespace shm

// The start of every rank's region: its progress counters (blocks staged,
// reduced and consumed, counted since Open; each on its own cache line) and
// its process id, so a waiting peer can tell a dead rank from a slow one.
struct ShmHeader {
  struct alignas(64) Line {
    std::atomic<uint64_t> value;
  };
  Line counters[shm::kCounters];
  alignas(64) int32_t pid;
  // Bumped after every counter store: the futex word peers sleep on, and how
  // many of them do (the publisher wakes them only then).
  alignas(64) std::atomic<uint32_t> events;
  std::atomic<uint32_t> sleepers;
  // Rank 0's choice for the current block: peers flush the lines they read.
  alignas(64) std::atomic<uint32_t> readers_flush;
  // Where this rank's process maps its own region, and what it wrote at its
  // start: a peer that reads it back with process_vm_readv may read this
  // rank's memory (the single-copy calls).
  uint64_t self_address;
  uint64_t probe_word;
  // Rank 0's choice for large call m of a size class (shm_single_copy.cc), at
  // [class][m % 2]: written at the start of call m - 1 of the class, read by
  // the others at the start of call m.
  alignas(64) std::atomic<uint32_t> single_copy_way[shm::kSizeClasses][2];
};
static_assert(sizeof(ShmHeader) <= shm::kHeaderBytes, "the header must fit its page");

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_LAYOUT_H_
