// Allreduce between ranks of one host through shared memory.
//
// Over loopback TCP a rank's data is copied into the kernel and out again,
// and the socket caps a 2-core host at ~1.75 GB/s per direction. Here every
// rank maps every other rank's staging region, so a block travels with one
// memcpy in and one out. The transport that owns this object supplies the
// synchronisation (a barrier over its own connections), so a rank that dies
// is still reported by that transport, naming the rank.
//
// Per block (at most slot_bytes per rank), rank r owns chunk r:
//   1. copy the chunks other ranks own from the input into r's region;
//   2. barrier;
//   3. reduce chunk r over all ranks, in rank order, into r's region
//      (each chunk is reduced on one rank only: the same bits everywhere),
//      then copy it to the output;
//   4. barrier;
//   5. copy the other chunks from their owners' regions to the output.
// Regions hold two slots used alternately, so the next block's step 1 cannot
// overwrite a slot a slower rank is still reading in step 5 (it passed the
// step 2 barrier of the block in between).
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_ALLREDUCE_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_ALLREDUCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/parameters.h"

namespace tfhvd {

class ShmAllreduce {
 public:
  // Collects every rank's string (in rank order) on every rank.
  using AllgatherStrings =
      std::function<Status(const std::string& mine, std::vector<std::string>* all)>;
  using Barrier = std::function<Status()>;

  ShmAllreduce() = default;
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  // Collective: every rank of the job calls it, all on one host. Maps the
  // regions; if any rank cannot (no /dev/shm, no space), no rank uses shared
  // memory and *reason says why (the returned status is about the
  // synchronisation itself failing).
  Status Open(int rank, int size, size_t slot_bytes, const AllgatherStrings& allgather,
              const Barrier& barrier, std::string* reason);
  // Open() when it applies: more than one rank, all on this host, and
  // params.shm_allreduce. If some rank cannot map the regions, logs a warning
  // saying that `fallback` is used instead.
  Status OpenIfSingleHost(int rank, int size, int local_size, const Parameters& params,
                          const AllgatherStrings& allgather, const Barrier& barrier,
                          const char* fallback);
  void Close();
  bool active() const { return active_; }

  // input may equal output.
  Status Allreduce(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);

 private:
  Status Block(const char* in, char* out, size_t count, DataType dtype, ReduceOp op);

  int rank_ = 0, size_ = 1;
  size_t slot_bytes_ = 0;
  std::vector<char*> regions_;  // regions_[r]: rank r's two slots, mapped here
  std::string my_name_;
  Barrier barrier_;
  uint64_t blocks_done_ = 0;  // picks the slot: alternates across calls too
  bool active_ = false;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_ALLREDUCE_H_
