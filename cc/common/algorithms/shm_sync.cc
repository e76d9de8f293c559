// The shared-memory collectives' waits and wake-ups (shm_collectives.h): a
// rank publishes its progress counters and wakes the peers asleep on them, and
// waits for its peers' counters; the negotiation's bit vector (OrWords) rides
// on the same counters.
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <thread>

#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/algorithms/shm_layout.h"
#include "cc/common/transport/peer_loss.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfhvd {

namespace {

using shm::kHeaderBytes;
using shm::kOrBufferBytes;
using shm::kRounds;
using Clock = std::chrono::steady_clock;

constexpr auto kNoProgressLimit = std::chrono::seconds(60);

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

Status ShmCollectives::WaitFor(int which, uint64_t target, int peer, bool stall_limit,
                               bool any_event) {
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
    if (static_cast<int>(r) == rank_ || (peer >= 0 && static_cast<int>(r) != peer)) continue;
    ShmHeader* h = header(r);
    const uint32_t seen_events = h->events.load(std::memory_order_seq_cst);
    auto reached = [&] {
      return h->counters[which].value.load(std::memory_order_acquire) >= target;
    };
    // With any_event, any publish of the peer ends the wait: the caller has
    // other steps that it may now take.
    auto moved = [&] {
      return any_event && h->events.load(std::memory_order_acquire) != seen_events;
    };
    if (reached()) continue;
    // Spin briefly (the peer is usually a few microseconds behind), then
    // sleep on the peer's futex until it publishes: a sleeper that is woken
    // preempts whatever else runs on its core at once.
    const auto start = Clock::now();
    const auto spin_until = start + spin_;
    while (!reached() && !moved() && Clock::now() < spin_until) {
      for (int i = 0; i < 64; ++i) CpuRelax();
    }
    if (moved()) return Status();
    uint64_t last_seen = h->counters[which].value.load(std::memory_order_relaxed);
    auto last_progress = start;
    while (!reached()) {
      h->sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t event = h->events.load(std::memory_order_seq_cst);
      if (!reached() && !(any_event && event != seen_events)) {
        // Woken by the peer's next publish, or after 100 ms to check on it.
        struct timespec nap = {0, 100 * 1000 * 1000};
        syscall(SYS_futex, &h->events, FUTEX_WAIT, event, &nap, nullptr, 0);
      }
      h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (reached()) break;
      if (moved()) return Status();
      if (PeerLost()) return PeerLostError();  // a stopped peer passes the kill(pid, 0) below
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

Status ShmCollectives::OrWords(uint64_t* words, size_t n, std::chrono::microseconds wait_limit,
                               bool* waiting) {
  if (n > kMaxOrWords) {
    return Status::InvalidArgument("OrWords: " + std::to_string(n) + " words, at most " +
                                   std::to_string(kMaxOrWords));
  }
  if (waiting != nullptr) *waiting = false;
  const size_t me = static_cast<size_t>(rank_);
  if (!or_published_) {
    ++rounds_done_;
    std::memcpy(or_buffer(me, rounds_done_), words, n * sizeof(uint64_t));
    Publish(kRounds, rounds_done_);
    or_published_ = true;
  }
  const uint64_t round = rounds_done_;
  if (wait_limit.count() >= 0 && !PeersReached(kRounds, round)) {
    // A bounded wait never sleeps: it spins, and leaves the round published
    // for whoever continues it.
    const auto until = Clock::now() + wait_limit;
    while (!PeersReached(kRounds, round)) {
      if (Clock::now() >= until) {
        if (waiting != nullptr) *waiting = true;
        return Status();
      }
      for (int i = 0; i < 64; ++i) CpuRelax();
    }
  }
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
    if (r == me) continue;
    // Rounds grow by one per call on every rank, and a peer cannot finish the
    // next round without this rank: it is at most one round ahead. A peer may
    // idle for its whole poll interval: no stall limit here.
    Status s = WaitFor(kRounds, round, static_cast<int>(r), /*stall_limit=*/false);
    if (!s.ok()) return s;
    const uint64_t* theirs = or_buffer(r, round);
    for (size_t i = 0; i < n; ++i) words[i] |= theirs[i];
  }
  or_published_ = false;
  return Status();
}

uint64_t* ShmCollectives::or_buffer(size_t r, uint64_t round) const {
  return reinterpret_cast<uint64_t*>(regions_[r] + kHeaderBytes + (round % 2) * kOrBufferBytes);
}

void ShmCollectives::Publish(int which, uint64_t value) {
  ShmHeader* mine = header(static_cast<size_t>(rank_));
  mine->counters[which].value.store(value, std::memory_order_seq_cst);
  mine->events.fetch_add(1, std::memory_order_seq_cst);
  // A peer that registered as a sleeper before the bump is woken here; one
  // that registers after it reads the new value before sleeping (every step
  // on both sides is seq_cst, so one of the two always sees the other).
  if (mine->sleepers.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, &mine->events, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

}  // namespace tfhvd
