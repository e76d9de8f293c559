// A transport over a subset of the job's ranks (a process set), built on a
// link set among them (link_set.h: Transport::OpenLinkSet, a view of the job's
// links on Gloo, a communicator of their own under MPI, whose MPI_Allreduce the
// selection table may pick): set rank i is global rank members[i], and every
// collective is made of point-to-point transfers between the members only.
//
//   std::unique_ptr<LinkSet> links;
//   Status s = global->OpenLinkSet({0, 2}, &links);    // members only
//   SubsetTransport set(global, std::move(links));
//   set.links()->Send(1, data, n);                      // goes to global rank 2
//   set.Allgatherv(in, out, bytes_per_member);
#ifndef TFHVD_COMMON_TRANSPORT_SUBSET_TRANSPORT_H_
#define TFHVD_COMMON_TRANSPORT_SUBSET_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/common/transport/link_set.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class SubsetTransport : public Transport {
 public:
  SubsetTransport(Transport* global, std::unique_ptr<LinkSet> links)
      : global_(global), links_(std::move(links)) {}
  const char* name() const override { return global_->name(); }
  Status Init(Topology*) override { return Status(); }
  Links* links() override { return links_.get(); }
  bool has_backend_allreduce() const override { return links_->has_backend_allreduce(); }
  Status BackendAllreduce(const void* input, void* output, int64_t count, DataType dtype,
                          ReduceOp op) override {
    return links_->BackendAllreduce(input, output, count, dtype, op);
  }
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;

 private:
  Transport* global_;
  std::unique_ptr<LinkSet> links_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_SUBSET_TRANSPORT_H_
