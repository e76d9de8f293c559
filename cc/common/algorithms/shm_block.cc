// The blocks of a shared-memory collective (shm_collectives.h) as a pipeline
// over the slots: stage the chunks the other ranks own, reduce this rank's
// chunk, copy the others' out. A rank takes whichever step of whichever
// block its peers allow, oldest first, and sleeps only when none is possible:
// when the ranks share their cores with other work (one runs while the other
// waits for the CPU), a rank that runs stages up to kSlots blocks ahead and
// its peer then finds that much work ready, instead of the two handing the
// CPU to each other once per block.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/algorithms/shm_copies.h"
#include "cc/common/algorithms/shm_layout.h"
#include "cc/common/algorithms/shm_span.h"
#include "cc/common/kernels/reduce_kernels.h"
#include "cc/common/kernels/reduce_last_step.h"

namespace tfhvd {

namespace {

using shm::kConsumed;
using shm::kReduced;
using shm::kSlots;
using shm::kStaged;
using Clock = std::chrono::steady_clock;

constexpr size_t kPieceBytes = 16 * 1024;  // reduced, then copied out, while in L1

// Visits chunk c's span bytes: fn(input, output, offset in the slots, length).
template <typename Span, typename Chunks, typename Fn>
void VisitChunk(const Span& span, const Chunks& chunks, size_t c, Fn fn) {
  const size_t from = chunks.from[c], slot_at = chunks.slot_at[c];
  span.Visit(from, from + chunks.bytes[c], [&](const char* in, char* out, size_t at, size_t len) {
    fn(in, out, slot_at + (at - from), len);
  });
}

}  // namespace

bool ShmCollectives::PeersReached(int which, uint64_t target) const {
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    if (header(r)->counters[which].value.load(std::memory_order_acquire) < target) return false;
  }
  return true;
}

// 1. Into this rank's slot: the chunks other ranks own (the allgather: this
// rank's own part, final already, also to its output). Other ranks read only
// slots, never this rank's input, so an output may alias its input.
void ShmCollectives::Stage(const BlockRun& run, uint64_t block, const BlockChunks& chunks) {
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  char* mine = slot(me, block);
  if (run.mode == Mode::kAllgather) {
    VisitChunk(run.span, chunks, me, [&](const char* in, char* out, size_t offset, size_t len) {
      std::memcpy(mine + offset, in, len);
      if (out != in) std::memcpy(out, in, len);
    });
    return;
  }
  for (size_t c = 0; c < n; ++c) {
    if (c == me) continue;
    VisitChunk(run.span, chunks, c, [&](const char* in, char*, size_t offset, size_t len) {
      std::memcpy(mine + offset, in, len);
    });
  }
}

// 2. This rank's chunk reduced in rank order, piece by piece, and scaled.
void ShmCollectives::Reduce(const BlockRun& run, uint64_t block, const BlockChunks& chunks,
                            bool flush) {
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  const size_t elem = DataTypeSize(run.dtype);
  const size_t piece = std::max<size_t>(1, kPieceBytes / elem) * elem;
  char* mine = slot(me, block);
  VisitChunk(run.span, chunks, me, [&](const char* in, char* out, size_t offset, size_t len) {
    for (size_t done = 0; done < len; done += piece) {
      const size_t part = std::min(piece, len - done);
      auto source = [&](size_t r) {
        return r == me ? in + done : slot(r, block) + offset + done;
      };
      char* acc = mine + offset + done;
      const void* left = source(0);
      for (size_t r = 1; r + 1 < n; ++r) {
        ReduceBuffers(run.dtype, run.op, acc, left, source(r), part / elem);
        left = acc;
      }
      // The last rank's piece, the scale and the copy out in one pass
      // (streamed outputs are copied apart, past the cache).
      ReduceScaleStore(run.dtype, run.op, acc, run.streaming ? nullptr : out + done, left,
                       source(n - 1), part / elem, run.postscale);
      if (run.streaming) CopyOut(out + done, acc, part, run.streaming);
      if (flush) {
        for (size_t r = 0; r < n; ++r) {
          if (r != me) FlushLines(source(r), part);
        }
      }
    }
  });
}

// 3. The other chunks from their owners' slots.
void ShmCollectives::Consume(const BlockRun& run, uint64_t block, const BlockChunks& chunks,
                             bool flush) {
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  for (size_t c = 0; c < n; ++c) {
    if (c == me) continue;
    const char* theirs = slot(c, block);
    VisitChunk(run.span, chunks, c, [&](const char*, char* out, size_t offset, size_t len) {
      CopyOut(out, theirs + offset, len, run.streaming);
      if (flush) FlushLines(theirs + offset, len);
    });
  }
}

// Each block's steps, in order, each published by its counter:
//   stage   needs every peer done with the block that last used this slot
//           (kConsumed); publishes kStaged (the allgather: kReduced);
//   reduce  needs every peer's kStaged; publishes kReduced (the
//           reduce-scatter: nothing, the allgather has no reduce);
//   consume needs every peer's kReduced; publishes kConsumed (the
//           reduce-scatter reads nothing more: kConsumed at once).
// Counters count blocks since Open, the same on every rank; a block's slot is
// its number modulo kSlots, so consecutive small calls take turns over the
// slots and a rank may stage the next call while its peers still read the
// last one.
Status ShmCollectives::RunBlocks(const BlockRun& run, uint64_t count, const ChunksOf& chunks_of) {
  const uint64_t first = blocks_done_, end = first + count;
  blocks_done_ = end;
  // A slot is free once every peer is done with the block that last used it.
  auto slot_free_at = [](uint64_t block) { return block >= kSlots ? block + 1 - kSlots : 0; };
  const bool gather = run.mode == Mode::kAllgather;
  const bool scatter = run.mode == Mode::kReduceScatter;
  const size_t n = static_cast<size_t>(size_);
  BlockChunks chunks{std::vector<size_t>(n), std::vector<size_t>(n), std::vector<size_t>(n)};
  // Rank 0 decides whether readers flush a block when it stages it; the
  // others follow what it last published (a block late at worst: it changes
  // speed, never results). Kept per slot for the block's later steps.
  bool flush[kSlots] = {};
  Clock::time_point began[kSlots];  // rank 0 times its blocks for the policy
  ShmHeader* chooser = header(0);
  uint64_t staged = first, reduced = first, consumed = first;  // each step's next block
  while (consumed < end) {
    if (consumed < reduced && (scatter || PeersReached(kReduced, consumed + 1))) {
      const size_t at = consumed % kSlots;
      if (!scatter) {
        chunks_of(consumed - first, &chunks);
        Consume(run, consumed, chunks, flush[at]);
      }
      Publish(kConsumed, consumed + 1);
      if (rank_ == 0 && run.mode == Mode::kAllreduce) {
        size_t bytes = 0;
        for (size_t b : chunks.bytes) bytes += b;
        flush_policy_.Record(
            consumed, flush[at], bytes,
            std::chrono::duration<double, std::nano>(Clock::now() - began[at]).count());
      }
      ++consumed;
      continue;
    }
    if (reduced < staged && (gather || PeersReached(kStaged, reduced + 1))) {
      if (!gather) {
        chunks_of(reduced - first, &chunks);
        Reduce(run, reduced, chunks, flush[reduced % kSlots]);
        if (!scatter) Publish(kReduced, reduced + 1);
      }
      ++reduced;
      continue;
    }
    if (staged < end && staged < consumed + kSlots &&
        PeersReached(kConsumed, slot_free_at(staged))) {
      const size_t at = staged % kSlots;
      if (rank_ == 0) {
        began[at] = Clock::now();
        flush[at] = flush_policy_.Choose(staged);
        chooser->readers_flush.store(flush[at] ? 1 : 0, std::memory_order_relaxed);
      } else {
        flush[at] = chooser->readers_flush.load(std::memory_order_relaxed) != 0;
      }
      chunks_of(staged - first, &chunks);
      Stage(run, staged, chunks);
      Publish(gather ? kReduced : kStaged, staged + 1);
      ++staged;
      continue;
    }
    // No step is possible: wait for the oldest one's peers, or for any
    // publish of theirs (another step may have become possible).
    Status s;
    if (consumed < reduced) {
      s = WaitFor(kReduced, consumed + 1, -1, true, /*any_event=*/true);
    } else if (reduced < staged) {
      s = WaitFor(kStaged, reduced + 1, -1, true, /*any_event=*/true);
    } else {
      s = WaitFor(kConsumed, slot_free_at(staged), -1, true, /*any_event=*/true);
    }
    if (!s.ok()) return s;
  }
  return Status();
}

}  // namespace tfhvd
