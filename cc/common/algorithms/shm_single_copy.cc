// The single-copy allreduce of ranks on one host (shm_collectives.h): each
// rank reads its peers' tensors where they lie, with process_vm_readv (Linux's
// cross-memory attach), instead of the peers staging them in their slots.
//
// Through the slots every byte is written by one rank and read by another;
// where the host places the ranks' CPUs far apart, each rewrite of a slot line
// must first take it back from the reader's cache, and a large call ran about
// three times slower than near (experiments/single-op-time/). Here no shared
// line is ever written: the kernel copies from the peer's pages into this
// rank's memory, the way MPI libraries move large messages on one host.
//
// Per call, for n ranks, rank r owning the r-th n-th of the byte range:
//   1. every rank writes the addresses of its inputs and outputs into its
//      region's table and publishes it (each buffer, the first time it is
//      seen, is moved onto 2 MiB pages: huge_pages.h);
//   2. rank r reads its part of every peer's input, piece by piece into its
//      scratch, and reduces the part in rank order (the same bits on every
//      rank: one rank reduces each element), scaling on the last step, into
//      its output; publishes;
//   3. once every part is reduced, rank r reads every other part from its
//      owner's output straight into its own output; publishes, and returns
//      when every peer has read its part (TensorFlow may free the buffers).
// An output may alias its input: a rank rewrites its input's part r only in
// step 2, which no peer reads, and the other parts only in step 3, after
// every peer has read them.
// Whether the ranks may read each other's memory (same user; Yama's ptrace
// scope; a container's seccomp profile) is tried once at Open; if any rank
// cannot, none uses this path.
#include <errno.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <climits>
#include <cstring>
#include <string>

#include "cc/common/algorithms/huge_pages.h"
#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/algorithms/shm_layout.h"
#include "cc/common/algorithms/shm_span.h"
#include "cc/common/kernels/reduce_kernels.h"
#include "cc/common/kernels/reduce_last_step.h"
#include "cc/common/logging.h"

namespace tfhvd {

namespace {

using shm::kCopyDone;
using shm::kPartReduced;
using shm::kTableSegments;
using shm::kTableWritten;

// Read and reduced while it stays in a core's L2.
constexpr size_t kPieceBytes = 128 * 1024;
constexpr uint64_t kProbeMagic = 0x74666876642d636dULL;

#ifdef IOV_MAX
constexpr size_t kMaxIov = IOV_MAX;
#else
constexpr size_t kMaxIov = 1024;
#endif

// The first byte of part c of `bytes` (elements of elem bytes) on n ranks.
size_t PartStart(size_t bytes, size_t elem, size_t n, size_t c) {
  return bytes / elem * c / n * elem;
}

}  // namespace

bool ShmCollectives::LargeCall(size_t bytes, size_t segments, size_t* size_class,
                               uint64_t* call, bool* single) {
  if (!single_copy_ || bytes < single_copy_min_bytes_ || segments > kTableSegments) {
    return false;
  }
  const size_t c = bytes < 4 * single_copy_min_bytes_ ? 0
                   : bytes < 16 * single_copy_min_bytes_ ? 1 : 2;
  const uint64_t m = large_calls_[c]++;
  *size_class = c;
  *call = m;
  ShmHeader* chooser = header(0);
  if (m == 0) {
    // Nothing timed yet: every rank's choice object says the same.
    *single = single_copy_choice_[c].Choose(0);
  } else if (rank_ == 0) {
    *single = next_way_[c];
  } else {
    // Rank 0 wrote it at the start of the class's call m - 1, before its
    // first publish there, and this rank finished that call only after
    // reading one of those publishes (a large call has a part on every
    // rank). Rank 0 cannot rewrite [m % 2] (at the start of call m + 1)
    // before this rank has taken part in call m.
    *single = chooser->single_copy_way[c][m % 2].load(std::memory_order_relaxed) != 0;
  }
  if (rank_ == 0) {
    next_way_[c] = single_copy_choice_[c].Choose(m + 1);
    chooser->single_copy_way[c][(m + 1) % 2].store(next_way_[c] ? 1 : 0,
                                                   std::memory_order_relaxed);
  }
  return true;
}

Status ShmCollectives::ProbeSingleCopy(const AllgatherStrings& allgather) {
  const size_t me = static_cast<size_t>(rank_);
  ShmHeader* mine = header(me);
  using M = ShmTimedChoice::Mode;
  if (single_copy_mode_ != M::kNever) {
    // Under Yama's ptrace scope 1 only an ancestor may read a process's
    // memory unless the process allows it; the ranks are siblings.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  }
  mine->self_address = reinterpret_cast<uint64_t>(regions_[me]);
  mine->probe_word = kProbeMagic ^ static_cast<uint64_t>(getpid());
  // Every rank's mode; the allgather is also the barrier after which every
  // header holds its owner's address.
  const char* names[] = {"auto", "on", "off"};
  std::vector<std::string> modes, verdicts;
  Status s = allgather(names[static_cast<int>(single_copy_mode_)], &modes);
  if (!s.ok()) return s;
  bool off = false, all_on = true;
  for (const auto& m : modes) {
    off |= m == "off";
    all_on &= m == "on";
  }
  std::string why;
  for (size_t r = 0; r < static_cast<size_t>(size_) && !off && why.empty(); ++r) {
    if (r == me) continue;
    const ShmHeader* peer = header(r);
    uint64_t word = 0;
    struct iovec local = {&word, sizeof(word)};
    // The peer's probe word, at its address in the peer's process.
    struct iovec remote = {
        reinterpret_cast<void*>(peer->self_address + offsetof(ShmHeader, probe_word)),
        sizeof(word)};
    const ssize_t n = process_vm_readv(peer->pid, &local, 1, &remote, 1, 0);
    if (n != static_cast<ssize_t>(sizeof(word))) {
      why = "rank " + std::to_string(rank_) + " cannot read rank " + std::to_string(r) +
            "'s memory (process_vm_readv: " + std::string(n < 0 ? strerror(errno) : "short read") +
            ")";
    } else if (word != peer->probe_word) {
      why = "rank " + std::to_string(r) + "'s memory read back wrong";
    }
  }
  s = allgather(why, &verdicts);
  if (!s.ok()) return s;
  single_copy_ = !off;
  for (const auto& v : verdicts) {
    if (v.empty()) continue;
    if (single_copy_ && rank_ == 0) {
      TFHVD_LOG(INFO) << "shared-memory single-copy reads unavailable (" << v
                      << "); large allreduces go through the slots";
    }
    single_copy_ = false;
  }
  for (auto& choice : single_copy_choice_) {
    choice = ShmTimedChoice(all_on ? M::kAlways : M::kAuto, ShmTimedChoice::kSingleCopy);
  }
  return Status();
}

Status ShmCollectives::ReadPeer(int peer, bool outputs, const Span& span, size_t from, size_t to,
                                char* into) {
  const uint64_t* theirs = table(static_cast<size_t>(peer));
  std::vector<struct iovec> remote, local;
  span.Visit(from, to, [&](const char*, char* out, size_t at, size_t len) {
    const size_t i = span.index(at);
    const uint64_t base = theirs[1 + 2 * i + (outputs ? 1 : 0)];
    remote.push_back({reinterpret_cast<void*>(base + (at - span.start(i))), len});
    local.push_back({into != nullptr ? into + (at - from) : out, len});
  });
  const pid_t pid = header(static_cast<size_t>(peer))->pid;
  for (size_t done = 0; done < remote.size(); done += kMaxIov) {
    const size_t count = std::min(kMaxIov, remote.size() - done);
    size_t want = 0;
    for (size_t i = 0; i < count; ++i) want += remote[done + i].iov_len;
    const ssize_t got = process_vm_readv(pid, &local[done], count, &remote[done], count, 0);
    if (got != static_cast<ssize_t>(want)) {
      const std::string why = got < 0 ? strerror(errno)
                                       : std::to_string(got) + " of " + std::to_string(want) +
                                             " bytes";
      return Status::Unavailable("reading rank " + std::to_string(peer) + "'s " +
                                 (outputs ? "output" : "input") +
                                 " in a shared-memory allreduce failed (" + why +
                                 "): that rank may have exited")
          .WithPeer(peer);
    }
  }
  return Status();
}

Status ShmCollectives::SingleCopyAllreduce(const Span& span, DataType dtype, ReduceOp op,
                                           double postscale) {
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  const size_t elem = DataTypeSize(dtype), total = span.bytes();
  const uint64_t call = ++single_copy_calls_;
  // 1. The table. Peers finished reading the last call's before it returned.
  uint64_t* mine = table(me);
  mine[0] = span.segments();
  for (size_t i = 0; i < span.segments(); ++i) {
    const Segment& seg = span.segment(i);
    huge_pages_.Collapse(seg.input, span.start(i + 1) - span.start(i));
    mine[1 + 2 * i] = reinterpret_cast<uint64_t>(seg.input);
    mine[2 + 2 * i] = reinterpret_cast<uint64_t>(seg.output);
  }
  Publish(kTableWritten, call);
  Status s = WaitFor(kTableWritten, call);
  if (!s.ok()) return s;

  // 2. This rank's part, piece by piece: the peers' pieces into the scratch,
  // then reduced in rank order into the output.
  const size_t piece = std::max<size_t>(1, kPieceBytes / elem) * elem;
  scratch_.resize(n * piece);
  const size_t lo = PartStart(total, elem, n, me), hi = PartStart(total, elem, n, me + 1);
  for (size_t a = lo; a < hi && s.ok(); a += piece) {
    const size_t b = std::min(hi, a + piece);
    for (size_t q = 0; q < n && s.ok(); ++q) {
      if (q != me) s = ReadPeer(static_cast<int>(q), /*outputs=*/false, span, a, b,
                                scratch_.data() + q * piece);
    }
    if (!s.ok()) break;
    span.Visit(a, b, [&](const char* in, char* out, size_t at, size_t len) {
      const size_t off = at - a, count = len / elem;
      auto source = [&](size_t q) -> const void* {
        return q == me ? static_cast<const void*>(in) : scratch_.data() + q * piece + off;
      };
      // In place, rank 2 and up would overwrite their input before adding it.
      if (in == out && me >= 2) {
        std::memcpy(scratch_.data() + me * piece + off, in, len);
        in = scratch_.data() + me * piece + off;
      }
      if (n == 2) {
        ReduceScaleStore(dtype, op, out, nullptr, source(0), source(1), count, postscale);
        return;
      }
      ReduceBuffers(dtype, op, out, source(0), source(1), count);
      for (size_t q = 2; q + 1 < n; ++q) ReduceBuffers(dtype, op, out, out, source(q), count);
      ReduceScaleStore(dtype, op, out, nullptr, out, source(n - 1), count, postscale);
    });
  }
  if (!s.ok()) return s;
  Publish(kPartReduced, call);
  s = WaitFor(kPartReduced, call);
  if (!s.ok()) return s;

  // 3. Every other part, from its owner's output into this rank's.
  for (size_t q = 0; q < n && s.ok(); ++q) {
    if (q == me) continue;
    s = ReadPeer(static_cast<int>(q), /*outputs=*/true, span, PartStart(total, elem, n, q),
                 PartStart(total, elem, n, q + 1), nullptr);
  }
  if (!s.ok()) return s;
  Publish(kCopyDone, call);
  s = WaitFor(kCopyDone, call);
  // The outputs now, once this call has written them: the kernel collapses
  // only pages that exist, and TensorFlow tends to hand the same buffer to
  // the next call's output.
  for (size_t i = 0; i < span.segments() && s.ok(); ++i) {
    const Segment& seg = span.segment(i);
    if (seg.output != seg.input) {
      huge_pages_.Collapse(seg.output, span.start(i + 1) - span.start(i));
    }
  }
  return s;
}

}  // namespace tfhvd
