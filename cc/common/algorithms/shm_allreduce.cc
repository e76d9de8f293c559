#include "cc/common/algorithms/shm_allreduce.h"

#include <signal.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "cc/common/algorithms/shm_copies.h"
#include "cc/common/algorithms/shm_region.h"
#include "cc/common/logging.h"
#include "cc/common/kernels/reduce_kernels.h"
#include "cc/common/kernels/reduce_last_step.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfhvd {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSlots = 2;                // per rank, used in turn
constexpr size_t kHeaderBytes = 4096;       // keeps the slots page-aligned
// The negotiation's words, two buffers used in turn (OrWords).
constexpr size_t kOrBufferBytes = 4096;
constexpr size_t kOrBytes = 2 * kOrBufferBytes;
static_assert(ShmAllreduce::kMaxOrWords * sizeof(uint64_t) <= kOrBufferBytes,
              "OrWords' words must fit one buffer");
constexpr size_t kPieceBytes = 16 * 1024;   // reduced, then copied out, while in L1
constexpr auto kNoProgressLimit = std::chrono::seconds(60);
// A waiting rank spins at most this long (HOROVOD_SPIN_US if shorter), then sleeps.
constexpr int64_t kMaxSpinUs = 50;
// Blocks staged, reduced and consumed; negotiation rounds (OrWords).
enum Counter { kStaged = 0, kReduced = 1, kConsumed = 2, kRounds = 3, kCounters = 4 };

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

// The start of every rank's region: its progress counters (blocks staged,
// reduced and consumed, counted since Open; each on its own cache line) and
// its process id, so a waiting peer can tell a dead rank from a slow one.
struct ShmAllreduce::Header {
  struct alignas(64) Line {
    std::atomic<uint64_t> value;
  };
  Line counters[kCounters];
  alignas(64) int32_t pid;
  // Bumped after every counter store: the futex word peers sleep on, and how
  // many of them do (the publisher wakes them only then).
  alignas(64) std::atomic<uint32_t> events;
  std::atomic<uint32_t> sleepers;
  // Rank 0's choice for the current block: peers flush the lines they read.
  alignas(64) std::atomic<uint32_t> readers_flush;
};

ShmAllreduce::Header* ShmAllreduce::header(size_t r) const {
  static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit its page");
  return reinterpret_cast<Header*>(regions_[r]);
}

char* ShmAllreduce::slot(size_t r, uint64_t block) const {
  return regions_[r] + kHeaderBytes + kOrBytes + (block % kSlots) * slot_bytes_;
}

size_t ShmAllreduce::region_bytes() const {
  return kHeaderBytes + kOrBytes + kSlots * slot_bytes_;
}

ShmAllreduce::~ShmAllreduce() { Close(); }

Status ShmAllreduce::Open(int rank, int size, size_t slot_bytes,
                          const AllgatherStrings& allgather, std::string* reason) {
  Close();
  rank_ = rank;
  size_ = size;
  slot_bytes_ = slot_bytes;
  blocks_done_ = 0;
  rounds_done_ = 0;
  SetReaderFlush(ShmFlushPolicy::Mode::kAuto);  // OpenIfSingleHost applies the knob after
  regions_.assign(static_cast<size_t>(size_), nullptr);

  std::string error;
  char* mine = CreateRegion(region_bytes(), &my_name_, &error);
  regions_[static_cast<size_t>(rank_)] = mine;
  if (mine != nullptr) {
    // A fresh region reads as zeros: every counter starts at 0.
    header(static_cast<size_t>(rank_))->pid = static_cast<int32_t>(getpid());
  }
  std::vector<std::string> names;
  Status s = allgather(my_name_, &names);
  if (!s.ok()) {
    Close();
    return s;
  }
  for (int r = 0; r < size_ && error.empty(); ++r) {
    if (names[static_cast<size_t>(r)].empty()) {
      error = "rank " + std::to_string(r) + " could not create its shared-memory region";
    } else if (r != rank_) {
      regions_[static_cast<size_t>(r)] =
          OpenRegion(names[static_cast<size_t>(r)], region_bytes(), &error);
    }
  }
  // Everyone must agree: one rank without shared memory means none uses it.
  std::vector<std::string> errors;
  s = allgather(error, &errors);
  // Every rank has mapped (or failed to map) every region: the names can go,
  // so nothing is left in /dev/shm whatever happens to the job later.
  if (!my_name_.empty()) shm_unlink(my_name_.c_str());
  my_name_.clear();
  if (!s.ok()) {
    Close();
    return s;
  }
  for (int r = 0; r < size_; ++r) {
    if (!errors[static_cast<size_t>(r)].empty()) {
      *reason = "rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)];
      Close();
      return Status();
    }
  }
  active_ = true;
  return Status();
}

Status ShmAllreduce::OpenIfSingleHost(int rank, int size, int local_size,
                                      const Parameters& params,
                                      const AllgatherStrings& allgather,
                                      const char* fallback) {
  if (size < 2 || local_size != size || !params.shm_allreduce) return Status();
  std::string reason;
  Status s = Open(rank, size, static_cast<size_t>(params.shm_slot_bytes), allgather, &reason);
  spin_ = std::chrono::microseconds(std::min<int64_t>(params.spin_us, kMaxSpinUs));
  SetReaderFlush(ShmFlushPolicy::ParseMode(params.shm_reader_flush));
  if (s.ok() && !reason.empty()) {
    TFHVD_LOG(WARNING) << "shared-memory allreduce unavailable, using " << fallback << ": "
                       << reason;
  }
  return s;
}

void ShmAllreduce::SetReaderFlush(ShmFlushPolicy::Mode mode) {
  static const bool can_flush = CpuCanFlushOpt();
  flush_policy_ = ShmFlushPolicy(can_flush ? mode : ShmFlushPolicy::Mode::kNever);
}

void ShmAllreduce::Close() {
  for (char*& region : regions_) {
    if (region != nullptr) munmap(region, region_bytes());
    region = nullptr;
  }
  regions_.clear();
  if (!my_name_.empty()) shm_unlink(my_name_.c_str());
  my_name_.clear();
  active_ = false;
}

// The segments of one allreduce seen as one byte range: Visit(from, to, fn)
// calls fn(input, output, offset, bytes) for each piece of [from, to) that
// lies in one segment, offset counting from the start of the range.
class ShmAllreduce::Span {
 public:
  Span(const std::vector<Segment>& segments, size_t elem) : segments_(segments) {
    starts_.reserve(segments.size() + 1);
    size_t at = 0;
    for (const Segment& seg : segments) {
      starts_.push_back(at);
      at += static_cast<size_t>(seg.count) * elem;
    }
    starts_.push_back(at);
  }
  size_t bytes() const { return starts_.back(); }

  template <typename Fn>
  void Visit(size_t from, size_t to, Fn fn) const {
    if (from >= to) return;
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), from) -
                                   starts_.begin()) - 1;
    for (; from < to; ++i) {
      const size_t end = std::min(to, starts_[i + 1]);
      if (end <= from) continue;  // an empty segment
      const size_t skip = from - starts_[i];
      fn(static_cast<const char*>(segments_[i].input) + skip,
         static_cast<char*>(segments_[i].output) + skip, from, end - from);
      from = end;
    }
  }

 private:
  const std::vector<Segment>& segments_;
  std::vector<size_t> starts_;  // byte offset of each segment, then the total
};

Status ShmAllreduce::Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                               ReduceOp op) {
  return Allreduce({Segment{input, output, count}}, dtype, op);
}

Status ShmAllreduce::Allreduce(const std::vector<Segment>& segments, DataType dtype,
                               ReduceOp op, double postscale) {
  // No transport round trip: every rank reaches this call through the same
  // negotiated response, and ranks pace each other through the counters in
  // shared memory (a peer that dies is seen by its process id in WaitFor).
  const size_t elem = DataTypeSize(dtype);
  const Span span(segments, elem);
  const size_t per_block = std::max<size_t>(1, slot_bytes_ / elem) * elem;
  static const size_t streaming_bytes = StreamingThreshold();
  const bool streaming = span.bytes() >= streaming_bytes;
  const size_t n = static_cast<size_t>(size_);
  BlockChunks chunks{std::vector<size_t>(n), std::vector<size_t>(n), std::vector<size_t>(n)};
  for (size_t done = 0; done < span.bytes();) {
    const size_t bytes = std::min(per_block, span.bytes() - done);
    // Chunk c of the block: its c-th n-th, at the same offset in the slots.
    const size_t count = bytes / elem;
    for (size_t c = 0; c < n; ++c) {
      chunks.slot_at[c] = count * c / n * elem;
      chunks.from[c] = done + chunks.slot_at[c];
      chunks.bytes[c] = count * (c + 1) / n * elem - chunks.slot_at[c];
    }
    Status s = Block(span, chunks, Mode::kAllreduce, dtype, op, postscale, streaming);
    if (!s.ok()) return s;
    done += bytes;
  }
  return Status();
}

// Rank c's slice [first[c], first[c] + counts[c]) (elements of elem bytes)
// is cut into pieces of at most `step` elements; block b carries piece b of
// every rank's slice, rank c's at c * step in the slots.
Status ShmAllreduce::Slices(const Span& span, const std::vector<int64_t>& first,
                            const std::vector<int64_t>& counts, size_t elem, Mode mode,
                            DataType dtype, ReduceOp op, double postscale) {
  const size_t n = static_cast<size_t>(size_);
  // A multiple of a cache line per rank, so the ranks' pieces never share one.
  const size_t step = std::max<size_t>(1, slot_bytes_ / n / 64 * 64 / elem);
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  static const size_t streaming_bytes = StreamingThreshold();
  const bool streaming = span.bytes() >= streaming_bytes;
  BlockChunks chunks{std::vector<size_t>(n), std::vector<size_t>(n), std::vector<size_t>(n)};
  for (size_t at = 0; at < static_cast<size_t>(longest); at += step) {
    for (size_t c = 0; c < n; ++c) {
      const size_t count = static_cast<size_t>(counts[c]);
      const size_t lo = std::min(at, count), hi = std::min(at + step, count);
      chunks.from[c] = (static_cast<size_t>(first[c]) + lo) * elem;
      chunks.bytes[c] = (hi - lo) * elem;
      chunks.slot_at[c] = c * step * elem;
    }
    Status s = Block(span, chunks, mode, dtype, op, postscale, streaming);
    if (!s.ok()) return s;
  }
  return Status();
}

Status ShmAllreduce::ReduceScatter(const void* input, void* output,
                                   const std::vector<int64_t>& first,
                                   const std::vector<int64_t>& counts, DataType dtype,
                                   ReduceOp op, double postscale) {
  const size_t elem = DataTypeSize(dtype);
  const size_t me = static_cast<size_t>(rank_);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  // Only this rank's slice is written (to output); the others' outputs are
  // never touched, so they point at the input.
  const char* in = static_cast<const char*>(input);
  char* unused = const_cast<char*>(in);
  const int64_t mine = first[me], end = mine + counts[me];
  const std::vector<Segment> segments = {
      {in, unused, mine},
      {in + mine * static_cast<int64_t>(elem), output, counts[me]},
      {in + end * static_cast<int64_t>(elem), unused + end * static_cast<int64_t>(elem),
       total - end}};
  return Slices(Span(segments, elem), first, counts, elem, Mode::kReduceScatter, dtype, op,
                postscale);
}

Status ShmAllreduce::Allgather(const void* input, void* output,
                               const std::vector<int64_t>& bytes_per_rank) {
  const size_t me = static_cast<size_t>(rank_);
  std::vector<int64_t> first(bytes_per_rank.size());
  int64_t total = 0;
  for (size_t c = 0; c < bytes_per_rank.size(); ++c) {
    first[c] = total;
    total += bytes_per_rank[c];
  }
  // This rank's part is read from input (and written to its place in output),
  // the others' parts are written to output.
  char* out = static_cast<char*>(output);
  const int64_t end = first[me] + bytes_per_rank[me];
  const std::vector<Segment> segments = {{out, out, first[me]},
                                         {input, out + first[me], bytes_per_rank[me]},
                                         {out + end, out + end, total - end}};
  return Slices(Span(segments, 1), first, bytes_per_rank, 1, Mode::kAllgather, DataType::UINT8,
                ReduceOp::SUM, 1.0);
}

Status ShmAllreduce::WaitFor(int which, uint64_t target, int peer, bool stall_limit) {
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
    if (static_cast<int>(r) == rank_ || (peer >= 0 && static_cast<int>(r) != peer)) continue;
    Header* h = header(r);
    auto reached = [&] {
      return h->counters[which].value.load(std::memory_order_acquire) >= target;
    };
    if (reached()) continue;
    // Spin briefly (the peer is usually a few microseconds behind), then
    // sleep on the peer's futex until it publishes: a sleeper that is woken
    // preempts whatever else runs on its core at once.
    const auto start = Clock::now();
    const auto spin_until = start + spin_;
    while (!reached() && Clock::now() < spin_until) {
      for (int i = 0; i < 64; ++i) CpuRelax();
    }
    uint64_t last_seen = h->counters[which].value.load(std::memory_order_relaxed);
    auto last_progress = start;
    while (!reached()) {
      h->sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t event = h->events.load(std::memory_order_seq_cst);
      if (!reached()) {
        // Woken by the peer's next publish, or after 100 ms to check on it.
        struct timespec nap = {0, 100 * 1000 * 1000};
        syscall(SYS_futex, &h->events, FUTEX_WAIT, event, &nap, nullptr, 0);
      }
      h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (reached()) break;
      const auto now = Clock::now();
      const int32_t pid = h->pid;
      if (kill(pid, 0) != 0 && errno == ESRCH) {
        return Status::Unavailable("rank " + std::to_string(r) + " (pid " +
                                   std::to_string(pid) + ") exited during " +
                                   (which == kRounds ? "negotiation"
                                                     : "a shared-memory allreduce") +
                                   ": a rank may have exited or crashed, or stopped after "
                                   "another rank's failure")
            .WithPeer(static_cast<int>(r));
      }
      const uint64_t seen = h->counters[which].value.load(std::memory_order_relaxed);
      if (seen != last_seen) {
        last_seen = seen;
        last_progress = now;
      } else if (stall_limit && now - last_progress > kNoProgressLimit) {
        return Status::Unavailable(
            "no progress with rank " + std::to_string(r) + " for " +
            std::to_string(kNoProgressLimit.count()) +
            " s in a shared-memory allreduce: that rank is stalled")
            .WithPeer(static_cast<int>(r));
      }
    }
  }
  return Status();
}

Status ShmAllreduce::OrWords(uint64_t* words, size_t n) {
  if (n > kMaxOrWords) {
    return Status::InvalidArgument("OrWords: " + std::to_string(n) + " words, at most " +
                                   std::to_string(kMaxOrWords));
  }
  const size_t me = static_cast<size_t>(rank_);
  const uint64_t round = ++rounds_done_;
  auto buffer = [&](size_t r) {
    return reinterpret_cast<uint64_t*>(regions_[r] + kHeaderBytes + (round % 2) * kOrBufferBytes);
  };
  std::memcpy(buffer(me), words, n * sizeof(uint64_t));
  Publish(kRounds, round);
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
    if (r == me) continue;
    // Rounds grow by one per call on every rank, and a peer cannot finish the
    // next round without this rank: it is at most one round ahead. A peer may
    // idle for its whole poll interval: no stall limit here.
    Status s = WaitFor(kRounds, round, static_cast<int>(r), /*stall_limit=*/false);
    if (!s.ok()) return s;
    const uint64_t* theirs = buffer(r);
    for (size_t i = 0; i < n; ++i) words[i] |= theirs[i];
  }
  return Status();
}

void ShmAllreduce::Publish(int which, uint64_t value) {
  Header* mine = header(static_cast<size_t>(rank_));
  mine->counters[which].value.store(value, std::memory_order_seq_cst);
  mine->events.fetch_add(1, std::memory_order_seq_cst);
  // A peer that registered as a sleeper before the bump is woken here; one
  // that registers after it reads the new value before sleeping (every step
  // on both sides is seq_cst, so one of the two always sees the other).
  if (mine->sleepers.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, &mine->events, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

Status ShmAllreduce::Block(const Span& span, const BlockChunks& chunks, Mode mode,
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
  Header* chooser = header(0);
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
