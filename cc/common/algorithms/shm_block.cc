// One block of a shared-memory collective (shm_collectives.h): stage the
// chunks the other ranks own, reduce this rank's chunk, copy the others' out.
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

using shm::Counter;
using shm::kConsumed;
using shm::kReduced;
using shm::kSlots;
using shm::kStaged;
using Clock = std::chrono::steady_clock;

constexpr size_t kPieceBytes = 16 * 1024;  // reduced, then copied out, while in L1

}  // namespace

Status ShmCollectives::Block(const Span& span, const BlockChunks& chunks, Mode mode,
                           DataType dtype, ReduceOp op, double postscale, bool streaming) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  const uint64_t block = blocks_done_++;
  // Visits chunk c's span bytes: fn(input, output, offset in the slots, length).
  auto visit = [&](size_t c, auto fn) {
    const size_t from = chunks.from[c], slot_at = chunks.slot_at[c];
    span.Visit(from, from + chunks.bytes[c],
               [&](const char* in, char* out, size_t at, size_t len) {
                 fn(in, out, slot_at + (at - from), len);
               });
  };
  auto publish = [&](Counter which) { Publish(which, block + 1); };
  // Rank 0 decides whether readers flush this block; the others follow what it
  // last published (a block late at worst: it changes speed, never results).
  const auto began = rank_ == 0 ? Clock::now() : Clock::time_point();  // only rank 0 times
  ShmHeader* chooser = header(0);
  bool flush;
  if (rank_ == 0) {
    flush = flush_policy_.Choose(block);
    chooser->readers_flush.store(flush ? 1 : 0, std::memory_order_relaxed);
  } else {
    flush = chooser->readers_flush.load(std::memory_order_relaxed) != 0;
  }

  // 1. This slot last served block - kSlots: every peer must be done reading
  // it. Other ranks read only slots, never this rank's input, so an output
  // may alias its input.
  Status s;
  if (block >= kSlots) s = WaitFor(kConsumed, block + 1 - kSlots);
  if (!s.ok()) return s;
  char* mine = slot(me, block);
  if (mode == Mode::kAllgather) {
    // This rank's part is final already: into its slot and its output.
    visit(me, [&](const char* in, char* out, size_t offset, size_t len) {
      std::memcpy(mine + offset, in, len);
      if (out != in) std::memcpy(out, in, len);
    });
    publish(kReduced);
  } else {
    for (size_t c = 0; c < n; ++c) {
      if (c == me) continue;
      visit(c, [&](const char* in, char*, size_t offset, size_t len) {
        std::memcpy(mine + offset, in, len);
      });
    }
    publish(kStaged);

    // 2. Reduce this rank's chunk in rank order, piece by piece, and scale it.
    s = WaitFor(kStaged, block + 1);
    if (!s.ok()) return s;
    const size_t piece = std::max<size_t>(1, kPieceBytes / elem) * elem;
    visit(me, [&](const char* in, char* out, size_t offset, size_t len) {
      for (size_t done = 0; done < len; done += piece) {
        const size_t part = std::min(piece, len - done);
        auto source = [&](size_t r) {
          return r == me ? in + done : slot(r, block) + offset + done;
        };
        char* acc = mine + offset + done;
        const void* left = source(0);
        for (size_t r = 1; r + 1 < n; ++r) {
          ReduceBuffers(dtype, op, acc, left, source(r), part / elem);
          left = acc;
        }
        // The last rank's piece, the scale and the copy out in one pass
        // (streamed outputs are copied apart, past the cache).
        ReduceScaleStore(dtype, op, acc, streaming ? nullptr : out + done, left, source(n - 1),
                         part / elem, postscale);
        if (streaming) CopyOut(out + done, acc, part, streaming);
        if (flush) {
          for (size_t r = 0; r < n; ++r) {
            if (r != me) FlushLines(source(r), part);
          }
        }
      }
    });
    if (mode == Mode::kReduceScatter) {
      // Every chunk this rank reads is read: nothing to hand out.
      publish(kConsumed);
      return Status();
    }
    publish(kReduced);
  }

  // 3. The other chunks from their owners.
  for (size_t c = 0; c < n; ++c) {
    if (c == me) continue;
    s = WaitFor(kReduced, block + 1, static_cast<int>(c));
    if (!s.ok()) return s;
    const char* theirs = slot(c, block);
    visit(c, [&](const char*, char* out, size_t offset, size_t len) {
      CopyOut(out, theirs + offset, len, streaming);
      if (flush) FlushLines(theirs + offset, len);
    });
  }
  publish(kConsumed);
  if (rank_ == 0 && mode == Mode::kAllreduce) {
    size_t bytes = 0;
    for (size_t b : chunks.bytes) bytes += b;
    flush_policy_.Record(block, flush, bytes,
                         std::chrono::duration<double, std::nano>(Clock::now() - began).count());
  }
  return Status();
}


}  // namespace tfhvd
