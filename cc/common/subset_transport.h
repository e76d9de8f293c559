// A transport over a subset of the job's ranks (a process set), built on the
// links of the global transport: set rank i is global rank ranks[i], and every
// collective is made of point-to-point transfers between the members only.
// Nothing is connected anew, so a set costs no start-up; MPI sub-communicators
// or a subset's own Gloo pairs can replace it later behind the same interface.
//
//   SubsetTransport set(global, {0, 2}, my_global_rank);
//   set.links()->Send(1, data, n);          // goes to global rank 2
//   set.Allgatherv(in, out, bytes_per_member);
#ifndef TFHVD_COMMON_SUBSET_TRANSPORT_H_
#define TFHVD_COMMON_SUBSET_TRANSPORT_H_

#include <string>
#include <vector>

#include "cc/common/links.h"
#include "cc/common/transport.h"

namespace tfhvd {

// Links to the members of a subset, numbered by position in `ranks`.
class SubsetLinks : public Links {
 public:
  SubsetLinks(Links* global, std::vector<int> ranks, int my_index)
      : global_(global), ranks_(std::move(ranks)), me_(my_index) {}
  int rank() const override { return me_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  Status Send(int to, const void* data, size_t bytes) override;
  Status Recv(int from, void* data, size_t bytes) override;
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override;

 private:
  Status CheckPeer(int peer) const;
  Links* global_;
  std::vector<int> ranks_;
  int me_;
};

class SubsetTransport : public Transport {
 public:
  // ranks: the members' global ranks, sorted; my_index: this rank's position.
  SubsetTransport(Transport* global, std::vector<int> ranks, int my_index)
      : global_(global), links_(global->links(), std::move(ranks), my_index) {}
  const char* name() const override { return global_->name(); }
  Status Init(Topology*) override { return Status(); }
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastBytes(std::string* data, int root) override;
  Status BitwiseOr(uint64_t* words, size_t n) override;
  Links* links() override { return &links_; }
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;

 private:
  Transport* global_;
  SubsetLinks links_;
  std::vector<char> scratch_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_SUBSET_TRANSPORT_H_
