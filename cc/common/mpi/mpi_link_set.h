// A link set (cc/common/transport/link_set.h) over an MPI communicator of its own, made
// with MPI_Comm_create_group (collective over the members only): its links
// are Isend/Irecv on that communicator and its backend allreduce is
// MPI_Allreduce over it. The communicator is freed with the set.
//
//   std::unique_ptr<LinkSet> set;
//   Status s = MpiLinkSet::Open(transport, comm, {0, 2}, spin_us, limit_s, &set);
#ifndef TFHVD_COMMON_MPI_MPI_LINK_SET_H_
#define TFHVD_COMMON_MPI_MPI_LINK_SET_H_

#include <mpi.h>

#include <memory>
#include <vector>

#include "cc/common/transport/link_set.h"
#include "cc/common/mpi/mpi_links.h"

namespace tfhvd {

class MpiTransport;

class MpiLinkSet : public LinkSet {
 public:
  // parent: the job's communicator; members: global ranks, as for
  // Transport::OpenLinkSet.
  static Status Open(MpiTransport* transport, MPI_Comm parent, const std::vector<int>& members,
                     int64_t spin_us, double limit_s, std::unique_ptr<LinkSet>* out);
  ~MpiLinkSet() override;

  Status Send(int to, const void* data, size_t bytes) override {
    return links_.Send(to, data, bytes);
  }
  Status Recv(int from, void* data, size_t bytes) override {
    return links_.Recv(from, data, bytes);
  }
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override {
    return links_.Exchange(to, send, send_bytes, from, recv, recv_bytes);
  }
  Status StartExchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                       size_t recv_bytes) override {
    return links_.StartExchange(to, send, send_bytes, from, recv, recv_bytes);
  }
  Status FinishExchange() override { return links_.FinishExchange(); }
  bool has_backend_allreduce() const override { return true; }
  Status BackendAllreduce(const void* input, void* output, int64_t count, DataType dtype,
                          ReduceOp op) override;

 private:
  MpiLinkSet(MpiTransport* transport, MPI_Comm comm, std::vector<int> members, int rank,
             int64_t spin_us, double limit_s);
  MpiTransport* transport_;
  MPI_Comm comm_;
  MpiLinks links_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_MPI_MPI_LINK_SET_H_
