// The collectives between ranks of one host through shared memory: the
// allreduce (one tensor, or a fused response's tensors straight from their
// inputs into their outputs), the reduce-scatter, the allgather, and the
// negotiation's bit vector (OrWords), so that on one host a cached
// collective needs no transport round trip at all.
//
// Over loopback TCP a rank's data is copied into the kernel and out again,
// and the socket caps a small host's bandwidth. Here every rank maps every
// other rank's region: a few small slots used in turn and a header of
// progress counters (shm_layout.h). Slots are small (HOROVOD_SHM_SLOT_BYTES)
// so that the ones in use stay in a core's L2: on a shared host, lines left
// alone for a few milliseconds (between training steps) leave the caches, and
// a copy into them runs several times slower (docs/performance.md, "Figures
// behind the core's defaults").
//
// Per block (at most slot_bytes per rank), rank r owns chunk r; the blocks
// of a call run as a pipeline (shm_block.cc): a rank takes whichever step of
// whichever block its peers allow and sleeps only when none is possible, so
// ranks that take turns on a busy host's CPUs hand over once per turn, not
// once per block:
//   1. wait until every peer has finished the block that last used this slot;
//      copy the chunks other ranks own from the input into r's slot;
//      publish "staged";
//   2. once every peer has staged: reduce chunk r over all ranks, in rank
//      order (each chunk is reduced on one rank only: the same bits
//      everywhere), piece by piece into r's slot; the last rank's piece,
//      the postscale and the store to the output are one pass
//      (ReduceScaleStore), so a piece is stored to the slot and the output
//      at once instead of reduced, scaled and copied; publish "reduced";
//   3. copy every other chunk from its owner's slot once the owner has
//      reduced it; publish "consumed".
// The reduce-scatter and the allgather run the same blocks over per-rank
// slices (a block carries the next piece of every rank's slice, rank c's
// piece reduced or owned by rank c): the reduce-scatter runs steps 1 and 2
// into the slice's owner's output only, the allgather only step 3 (each
// rank's part is final: copied into its slot, then out by the others). Each
// moves half of what the allreduce moves.
// Ranks wait on each other's counters in shared memory (shm_sync.cc:
// spinning briefly, then sleeping on a futex that the publisher wakes; never
// sched_yield, which on a busy machine hands the core away for a whole time
// slice), not on a transport barrier per block: a large allreduce takes
// hundreds of blocks. A call needs no transport barrier either: every rank
// reaches it through the same negotiated response.
// A peer that dies in the middle of a call is seen by its process id, and one
// that makes no progress for a minute is reported, naming the rank. Large
// collectives write their output with non-temporal stores: it is not read
// again soon and does not fit in the cache, and the stores skip reading every
// output line first.
//
// On hosts that place the two CPUs "far" apart, rewriting a slot's lines that
// a peer just read is slow; readers then flush what they read (clflushopt),
// chosen by rank 0 block by block from its timings (shm_timed_choice.h).
//
// Passes over memory, per rank, for D bytes on n ranks (what it costs: the
// copies are the allreduce's whole work on one host):
//   main memory: the input read once (D) and the output written once (D),
//     the least any allreduce that leaves the input intact can do; a fused
//     response reads its tensors and writes its outputs in place (Segment),
//     with no fusion-buffer copies in or out (2 x 2D saved);
//   shared cache (the slots): the staging copy writes (n-1)/n D, the reduce
//     reads (n-1)/n D of the peers' slots and writes D/n, and the consume
//     reads (n-1)/n D. The staging copy is the one pass a single-copy design
//     (reading the peer's input where it lies) avoids; TensorFlow's tensors
//     are not in shared memory, so that takes a system call that pins the
//     peer's pages (process_vm_readv, shm_single_copy.cc), which on a near
//     placement costs more than the staging copy and on a far one much less:
//     allreduces of 1 MiB and more take whichever way rank 0's timing finds
//     cheaper (HOROVOD_SHM_SINGLE_COPY).
//   The postscale (Average) and the output store ride on the last reduce
//     pass (no separate scale pass, no copy out of the slot).
// The transport-backed algorithms, for comparison: the gather reads D and
// writes n*D into a gather buffer (then reduces it into the output), the ring
// reads and writes 2(n-1)/n D through sockets (each a kernel copy in and out).
//
//   ShmCollectives shm;
//   Status s = shm.OpenIfSingleHost(rank, size, local_size, params, allgather, "the ring");
//   if (s.ok() && shm.active()) s = shm.Allreduce(in, out, n, dtype, ReduceOp::SUM);
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_COLLECTIVES_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_COLLECTIVES_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/common/algorithms/huge_pages.h"
#include "cc/common/algorithms/shm_timed_choice.h"
#include "cc/common/common.h"
#include "cc/common/parameters.h"

namespace tfhvd {

struct ShmHeader;  // shm_layout.h

class ShmCollectives {
 public:
  // Collects every rank's string (in rank order) on every rank.
  using AllgatherStrings =
      std::function<Status(const std::string& mine, std::vector<std::string>* all)>;

  ShmCollectives() = default;
  ~ShmCollectives();
  ShmCollectives(const ShmCollectives&) = delete;
  ShmCollectives& operator=(const ShmCollectives&) = delete;

  // Collective: every rank of the job calls it, all on one host. Maps the
  // regions; if any rank cannot (no /dev/shm, no space), no rank uses shared
  // memory and *reason says why (the returned status is about the
  // synchronisation itself failing).
  Status Open(int rank, int size, size_t slot_bytes, const AllgatherStrings& allgather,
              std::string* reason);
  // Open() when it applies: more than one rank, all on this host, and
  // params.shm_allreduce. If some rank cannot map the regions, logs a warning
  // saying that `fallback` is used instead.
  Status OpenIfSingleHost(int rank, int size, int local_size, const Parameters& params,
                          const AllgatherStrings& allgather, const char* fallback);
  void Close();
  bool active() const { return active_; }
  // Whether readers flush the slot lines they read (shm_timed_choice.h; rank 0
  // decides for every rank). kAuto without clflushopt on this CPU: never.
  void SetReaderFlush(ShmTimedChoice::Mode mode);
  // Whether allreduces of ShmTimedChoice::kSingleCopy.min_bytes and more may
  // read the peers' tensors where they lie (shm_single_copy.cc), before Open
  // (HOROVOD_SHM_SINGLE_COPY): kAuto, by rank 0's timing call by call;
  // kAlways, every such call; kNever. The ranks agree at Open: one rank's
  // kNever is every rank's, and kAlways needs every rank's.
  // min_bytes: smaller calls always take the slots (every rank the same).
  void SetSingleCopy(ShmTimedChoice::Mode mode,
                     size_t min_bytes = ShmTimedChoice::kSingleCopy.min_bytes) {
    single_copy_mode_ = mode;
    single_copy_min_bytes_ = min_bytes;
  }
  // Whether every rank could read every other's memory at Open (and none said kNever).
  bool single_copy_possible() const { return single_copy_; }
  // Calls since Open that could take the single copy, and those that did.
  uint64_t large_calls() const {
    uint64_t n = 0;
    for (uint64_t c : large_calls_) n += c;
    return n;
  }
  uint64_t single_copy_calls() const { return single_copy_calls_; }

  // input may equal output.
  Status Allreduce(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);

  // Several tensors reduced as one (a fused response) straight from their
  // inputs into their outputs, without a fusion buffer: the result is the
  // same as reducing their concatenation. Each input may equal its output.
  // A postscale other than 1 multiplies the result (as ScaleBuffer does),
  // applied by each chunk's owner while the reduced piece is in cache, so the
  // scaling costs no extra pass over the outputs.
  struct Segment {
    const void* input;
    void* output;
    int64_t count;
  };
  Status Allreduce(const std::vector<Segment>& segments, DataType dtype, ReduceOp op,
                   double postscale = 1.0);

  // Reduce-scatter: rank q receives, in output, the reduction of elements
  // [first[q], first[q] + counts[q]) of every rank's input, multiplied by
  // postscale. Only the slices move: each rank stages the others' slices and
  // reduces its own; no rank copies a result out of another's slot.
  Status ReduceScatter(const void* input, void* output, const std::vector<int64_t>& first,
                       const std::vector<int64_t>& counts, DataType dtype, ReduceOp op,
                       double postscale = 1.0);
  // Allgather: each rank's bytes_per_rank[rank] bytes of input, in rank order
  // in every rank's output (each rank writes its part to its slot once and
  // copies every other part out of its owner's slot).
  Status Allgather(const void* input, void* output, const std::vector<int64_t>& bytes_per_rank);

  // The negotiation's bit vector (Transport::BitwiseOr) through the region:
  // each rank writes its words, publishes a round number and ORs in its
  // peers' words once they have published the same round. Two buffers used
  // in turn: a rank that reached round k+2 knows every peer finished reading
  // round k. At most kMaxOrWords words.
  static constexpr size_t kMaxOrWords = 500;
  // Calls that may take the single copy are told apart by size (from the
  // threshold: under 4x, under 16x, the rest), each class with its own timing
  // and choice: which way is cheaper changes with the size.
  static constexpr size_t kSizeClasses = 3;
  // How long a waiting rank spins before it sleeps (HOROVOD_SPIN_US, at most 50 us;
  // none where the host's ranks outnumber the CPUs a rank may use).
  std::chrono::microseconds spin() const { return spin_; }
  // With a wait_limit (>= 0), a round whose peers have not all published
  // within it returns with *waiting set and this rank's words published; the
  // next call, with the same words, continues that round (from any thread,
  // one at a time) instead of starting another.
  Status OrWords(uint64_t* words, size_t n,
                 std::chrono::microseconds wait_limit = std::chrono::microseconds(-1),
                 bool* waiting = nullptr);

 private:
  class Span;
  // A block's steps: the allreduce runs all three (stage, reduce, copy
  // out), the reduce-scatter the first two, the allgather the last (each
  // rank's part is final already).
  enum class Mode { kAllreduce, kReduceScatter, kAllgather };
  // Chunk c of a block, reduced (or owned) by rank c: span bytes [from[c],
  // from[c] + bytes[c]), kept at slot_at[c] in every rank's slot.
  struct BlockChunks {
    std::vector<size_t> from, bytes, slot_at;
  };
  // What every block of one call shares.
  struct BlockRun {
    const Span& span;
    Mode mode;
    DataType dtype;
    ReduceOp op;
    double postscale;
    bool streaming;
  };
  // Fills the chunks of the call's i-th block.
  using ChunksOf = std::function<void(uint64_t i, BlockChunks* chunks)>;
  // Runs a call's blocks as a pipeline over the slots (shm_block.cc): a rank
  // takes whichever step of whichever block its peers allow, and waits only
  // when none is possible.
  Status RunBlocks(const BlockRun& run, uint64_t blocks, const ChunksOf& chunks_of);
  // A block's steps (global block number, its chunks).
  void Stage(const BlockRun& run, uint64_t block, const BlockChunks& chunks);
  void Reduce(const BlockRun& run, uint64_t block, const BlockChunks& chunks, bool flush);
  void Consume(const BlockRun& run, uint64_t block, const BlockChunks& chunks, bool flush);
  // Whether counter `which` of every other rank is at least target.
  bool PeersReached(int which, uint64_t target) const;
  // Runs per-rank slices (reduce-scatter, allgather) block by block.
  Status Slices(const Span& span, const std::vector<int64_t>& first,
                const std::vector<int64_t>& counts, size_t elem, Mode mode, DataType dtype,
                ReduceOp op, double postscale);
  // The slots' allreduce (all three block steps).
  Status SlotsAllreduce(const Span& span, DataType dtype, ReduceOp op, double postscale);
  // The single-copy allreduce (shm_single_copy.cc): whether a call of `bytes`
  // in `segments` tensors could take it (then *size_class and *call number
  // it and *single says which way it goes, the same on every rank), the
  // collective check at Open that every rank may read every other's memory,
  // and the call.
  bool LargeCall(size_t bytes, size_t segments, size_t* size_class, uint64_t* call,
                 bool* single);
  Status ProbeSingleCopy(const AllgatherStrings& allgather);
  Status SingleCopyAllreduce(const Span& span, DataType dtype, ReduceOp op, double postscale);
  // Reads bytes [from, to) of rank peer's range (its inputs, or its outputs)
  // to `into` (contiguous), or, with into null, to this rank's outputs there.
  Status ReadPeer(int peer, bool outputs, const Span& span, size_t from, size_t to, char* into);
  // Waits until counter `which` of rank `peer` (of every other rank when
  // peer is -1) is at least target.
  // stall_limit: fail when the peer makes no progress for a minute.
  // any_event: return as soon as the peer publishes anything (the target
  // reached or not), so that the caller can take another step of its pipeline.
  Status WaitFor(int which, uint64_t target, int peer = -1, bool stall_limit = true,
                 bool any_event = false);
  // Stores counter `which` of this rank and wakes the peers asleep on it.
  void Publish(int which, uint64_t value);
  ShmHeader* header(size_t r) const;
  uint64_t* or_buffer(size_t r, uint64_t round) const;  // rank r's OrWords words of a round
  char* slot(size_t r, uint64_t block) const;
  uint64_t* table(size_t r) const;  // rank r's single-copy table (shm_layout.h)
  size_t region_bytes() const;

  int rank_ = 0, size_ = 1;
  size_t slot_bytes_ = 0;
  std::chrono::microseconds spin_{50};  // how long a waiting rank spins before it sleeps
  std::vector<char*> regions_;  // regions_[r]: rank r's header and slots, mapped here
  std::string my_name_;
  uint64_t blocks_done_ = 0;  // the same on every rank; picks the slot, counts progress
  uint64_t rounds_done_ = 0;  // negotiation rounds through OrWords, the same on every rank
  bool or_published_ = false;  // round rounds_done_ is published, its peers not yet ORed
  ShmTimedChoice flush_policy_;  // rank 0's
  bool single_copy_ = false;  // every rank may read every other's memory
  ShmTimedChoice::Mode single_copy_mode_ = ShmTimedChoice::Mode::kNever;
  size_t single_copy_min_bytes_ = ShmTimedChoice::kSingleCopy.min_bytes;
  // Per size class (shm_layout.h): rank 0's timing, the calls that could take
  // the single copy (the same on every rank), and rank 0's published choice
  // for the next one.
  ShmTimedChoice single_copy_choice_[kSizeClasses];
  uint64_t large_calls_[kSizeClasses] = {};
  bool next_way_[kSizeClasses] = {};
  uint64_t single_copy_calls_ = 0;     // the same on every rank
  std::vector<char> scratch_;          // the peers' pieces of this rank's part
  HugePages huge_pages_;               // this rank's tensors the peers read
  bool active_ = false;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_COLLECTIVES_H_
