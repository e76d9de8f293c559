#include "cc/common/algorithms/shm_collectives.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cc/common/algorithms/shm_copies.h"
#include "cc/common/algorithms/shm_layout.h"
#include "cc/common/algorithms/shm_region.h"
#include "cc/common/algorithms/shm_span.h"
#include "cc/common/host/thread_affinity.h"
#include "cc/common/logging.h"

namespace tfhvd {

namespace {

using shm::kHeaderBytes;
using shm::kOrBytes;
using shm::kTableBytes;
using shm::kSlots;

// A waiting rank spins at most this long (HOROVOD_SPIN_US if shorter), then sleeps.
constexpr int64_t kMaxSpinUs = 50;

// How long a waiting rank spins: where this host's ranks outnumber the CPUs a
// rank may run on, not at all. A spinning rank would hold the CPU that the
// peer it waits for needs; a sleeper is woken by the peer's publish
// (experiments/single-op-np3/).
std::chrono::microseconds SpinFor(int64_t spin_us, int local_size) {
  if (local_size > UsableCpus()) return std::chrono::microseconds(0);
  return std::chrono::microseconds(std::min<int64_t>(spin_us, kMaxSpinUs));
}

}  // namespace

ShmHeader* ShmCollectives::header(size_t r) const {
  return reinterpret_cast<ShmHeader*>(regions_[r]);
}

char* ShmCollectives::slot(size_t r, uint64_t block) const {
  return regions_[r] + kHeaderBytes + kOrBytes + kTableBytes + (block % kSlots) * slot_bytes_;
}

uint64_t* ShmCollectives::table(size_t r) const {
  return reinterpret_cast<uint64_t*>(regions_[r] + kHeaderBytes + kOrBytes);
}

size_t ShmCollectives::region_bytes() const {
  return kHeaderBytes + kOrBytes + kTableBytes + kSlots * slot_bytes_;
}

ShmCollectives::~ShmCollectives() { Close(); }

Status ShmCollectives::Open(int rank, int size, size_t slot_bytes,
                          const AllgatherStrings& allgather, std::string* reason) {
  Close();
  rank_ = rank;
  size_ = size;
  slot_bytes_ = slot_bytes;
  blocks_done_ = 0;
  rounds_done_ = 0;
  single_copy_calls_ = 0;
  for (size_t c = 0; c < kSizeClasses; ++c) {
    large_calls_[c] = 0;
    next_way_[c] = false;
  }
  single_copy_ = false;
  SetReaderFlush(ShmTimedChoice::Mode::kAuto);  // OpenIfSingleHost applies the knob after
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
  return ProbeSingleCopy(allgather);
}

Status ShmCollectives::OpenIfSingleHost(int rank, int size, int local_size,
                                      const Parameters& params,
                                      const AllgatherStrings& allgather,
                                      const char* fallback) {
  if (size < 2 || local_size != size || !params.shm_allreduce) return Status();
  std::string reason;
  single_copy_mode_ = ShmTimedChoice::ParseMode(params.shm_single_copy);
  Status s = Open(rank, size, static_cast<size_t>(params.shm_slot_bytes), allgather, &reason);
  spin_ = SpinFor(params.spin_us, local_size);
  SetReaderFlush(ShmTimedChoice::ParseMode(params.shm_reader_flush));
  if (s.ok() && !reason.empty()) {
    TFHVD_LOG(WARNING) << "shared-memory allreduce unavailable, using " << fallback << ": "
                       << reason;
  }
  return s;
}

void ShmCollectives::SetReaderFlush(ShmTimedChoice::Mode mode) {
  static const bool can_flush = CpuCanFlushOpt();
  flush_policy_ = ShmTimedChoice(can_flush ? mode : ShmTimedChoice::Mode::kNever);
}

void ShmCollectives::Close() {
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

Status ShmCollectives::Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                               ReduceOp op) {
  return Allreduce({Segment{input, output, count}}, dtype, op);
}

Status ShmCollectives::Allreduce(const std::vector<Segment>& segments, DataType dtype,
                               ReduceOp op, double postscale) {
  // No transport round trip: every rank reaches this call through the same
  // negotiated response, and ranks pace each other through the counters in
  // shared memory (a peer that dies is seen by its process id in WaitFor).
  const Span span(segments, DataTypeSize(dtype));
  size_t size_class = 0;
  uint64_t call = 0;
  bool single = false;
  if (!LargeCall(span.bytes(), segments.size(), &size_class, &call, &single)) {
    return SlotsAllreduce(span, dtype, op, postscale);
  }
  const auto start = std::chrono::steady_clock::now();
  Status s = single ? SingleCopyAllreduce(span, dtype, op, postscale)
                    : SlotsAllreduce(span, dtype, op, postscale);
  if (rank_ == 0 && s.ok()) {
    single_copy_choice_[size_class].Record(
        call, single, span.bytes(),
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
            .count());
  }
  return s;
}

Status ShmCollectives::SlotsAllreduce(const Span& span, DataType dtype, ReduceOp op,
                                      double postscale) {
  const size_t elem = DataTypeSize(dtype);
  const size_t per_block = std::max<size_t>(1, slot_bytes_ / elem) * elem;
  static const size_t streaming_bytes = StreamingThreshold();
  const bool streaming = span.bytes() >= streaming_bytes;
  const size_t n = static_cast<size_t>(size_);
  const size_t total = span.bytes();
  auto chunks_of = [&](uint64_t i, BlockChunks* chunks) {
    const size_t done = static_cast<size_t>(i) * per_block;
    const size_t count = std::min(per_block, total - done) / elem;
    // Chunk c of the block: its c-th n-th, at the same offset in the slots.
    for (size_t c = 0; c < n; ++c) {
      chunks->slot_at[c] = count * c / n * elem;
      chunks->from[c] = done + chunks->slot_at[c];
      chunks->bytes[c] = count * (c + 1) / n * elem - chunks->slot_at[c];
    }
  };
  const BlockRun run{span, Mode::kAllreduce, dtype, op, postscale, streaming};
  return RunBlocks(run, (total + per_block - 1) / per_block, chunks_of);
}

// Rank c's slice [first[c], first[c] + counts[c]) (elements of elem bytes)
// is cut into pieces of at most `step` elements; block b carries piece b of
// every rank's slice, rank c's at c * step in the slots.
Status ShmCollectives::Slices(const Span& span, const std::vector<int64_t>& first,
                            const std::vector<int64_t>& counts, size_t elem, Mode mode,
                            DataType dtype, ReduceOp op, double postscale) {
  const size_t n = static_cast<size_t>(size_);
  // A multiple of a cache line per rank, so the ranks' pieces never share one.
  const size_t step = std::max<size_t>(1, slot_bytes_ / n / 64 * 64 / elem);
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  static const size_t streaming_bytes = StreamingThreshold();
  const bool streaming = span.bytes() >= streaming_bytes;
  auto chunks_of = [&](uint64_t i, BlockChunks* chunks) {
    const size_t at = static_cast<size_t>(i) * step;
    for (size_t c = 0; c < n; ++c) {
      const size_t count = static_cast<size_t>(counts[c]);
      const size_t lo = std::min(at, count), hi = std::min(at + step, count);
      chunks->from[c] = (static_cast<size_t>(first[c]) + lo) * elem;
      chunks->bytes[c] = (hi - lo) * elem;
      chunks->slot_at[c] = c * step * elem;
    }
  };
  const BlockRun run{span, mode, dtype, op, postscale, streaming};
  return RunBlocks(run, (static_cast<size_t>(longest) + step - 1) / step, chunks_of);
}

Status ShmCollectives::ReduceScatter(const void* input, void* output,
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

Status ShmCollectives::Allgather(const void* input, void* output,
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

}  // namespace tfhvd
