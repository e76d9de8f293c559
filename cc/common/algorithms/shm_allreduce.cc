#include "cc/common/algorithms/shm_allreduce.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "cc/common/logging.h"
#include "cc/common/reduce_kernels.h"

namespace tfhvd {

namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Creates and maps a region only this job knows the name of. Space is
// reserved up front: a tmpfs that runs out later would kill the process with
// SIGBUS in the middle of a copy.
char* CreateRegion(size_t bytes, std::string* name, std::string* error) {
  std::random_device rd;
  *name = "/tfhvd." + std::to_string(getpid()) + "." + std::to_string(rd()) +
          std::to_string(rd());
  int fd = shm_open(name->c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    *error = Errno("shm_open(" + *name + ")");
    name->clear();
    return nullptr;
  }
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    errno = rc;
    *error = Errno("reserving " + std::to_string(bytes) + " bytes in /dev/shm");
    close(fd);
    shm_unlink(name->c_str());
    name->clear();
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = Errno("mmap of " + *name);
    shm_unlink(name->c_str());
    name->clear();
    return nullptr;
  }
  return static_cast<char*>(p);
}

char* OpenRegion(const std::string& name, size_t bytes, std::string* error) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    *error = Errno("shm_open(" + name + ")");
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    *error = name + " is smaller than expected";
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = Errno("mmap of " + name);
    return nullptr;
  }
  return static_cast<char*>(p);
}

}  // namespace

ShmAllreduce::~ShmAllreduce() { Close(); }

Status ShmAllreduce::Open(int rank, int size, size_t slot_bytes,
                          const AllgatherStrings& allgather, const Barrier& barrier,
                          std::string* reason) {
  Close();
  rank_ = rank;
  size_ = size;
  slot_bytes_ = slot_bytes;
  barrier_ = barrier;
  const size_t region_bytes = 2 * slot_bytes_;
  regions_.assign(static_cast<size_t>(size_), nullptr);

  std::string error;
  regions_[static_cast<size_t>(rank_)] = CreateRegion(region_bytes, &my_name_, &error);
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
          OpenRegion(names[static_cast<size_t>(r)], region_bytes, &error);
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
                                      const AllgatherStrings& allgather, const Barrier& barrier,
                                      const char* fallback) {
  if (size < 2 || local_size != size || !params.shm_allreduce) return Status();
  std::string reason;
  Status s = Open(rank, size, static_cast<size_t>(params.shm_slot_bytes), allgather, barrier,
                  &reason);
  if (s.ok() && !reason.empty()) {
    TFHVD_LOG(WARNING) << "shared-memory allreduce unavailable, using " << fallback << ": "
                       << reason;
  }
  return s;
}

void ShmAllreduce::Close() {
  for (char*& region : regions_) {
    if (region != nullptr) munmap(region, 2 * slot_bytes_);
    region = nullptr;
  }
  regions_.clear();
  if (!my_name_.empty()) shm_unlink(my_name_.c_str());
  my_name_.clear();
  active_ = false;
}

Status ShmAllreduce::Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                               ReduceOp op) {
  const size_t elem = DataTypeSize(dtype);
  const size_t per_block = std::max<size_t>(1, slot_bytes_ / elem);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  for (size_t done = 0, total = static_cast<size_t>(count); done < total;) {
    size_t k = std::min(per_block, total - done);
    Status s = Block(in + done * elem, out + done * elem, k, dtype, op);
    if (!s.ok()) return s;
    done += k;
  }
  return Status();
}

Status ShmAllreduce::Block(const char* in, char* out, size_t count, DataType dtype,
                           ReduceOp op) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  const size_t slot_offset = (blocks_done_++ % 2) * slot_bytes_;
  auto begin = [&](size_t c) { return count * c / n * elem; };  // byte offset of chunk c
  auto slot = [&](size_t r) { return regions_[r] + slot_offset; };

  // 1. Stage the chunks the other ranks reduce. Other ranks read only regions,
  // never this rank's input, so output may alias input.
  for (size_t c = 0; c < n; ++c) {
    if (c != me) std::memcpy(slot(me) + begin(c), in + begin(c), begin(c + 1) - begin(c));
  }
  Status s = barrier_();
  if (!s.ok()) return s;

  // 3. Reduce this rank's chunk in rank order into its own slot, then output.
  const size_t first = begin(me), len = begin(me + 1) - first;
  const size_t elems = len / elem;
  auto source = [&](size_t r) { return r == me ? in + first : slot(r) + first; };
  char* acc = slot(me) + first;
  if (elems > 0) {
    ReduceBuffers(dtype, op, acc, source(0), source(1), elems);
    for (size_t r = 2; r < n; ++r) ReduceBuffers(dtype, op, acc, acc, source(r), elems);
  }
  s = barrier_();
  if (!s.ok()) return s;

  // 5. Every chunk from its owner (this rank's own included).
  for (size_t c = 0; c < n; ++c) {
    std::memcpy(out + begin(c), slot(c) + begin(c), begin(c + 1) - begin(c));
  }
  return Status();
}

}  // namespace tfhvd
