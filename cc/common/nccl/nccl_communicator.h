// One NCCL communicator: created non-blocking (every wait is bounded and
// polls ncclCommGetAsyncError), its unique id sent from the group's first rank
// over the controller's transport, aborted on an error or a timeout.
//
//   std::unique_ptr<NcclCommunicator> comm;
//   Status s = NcclCommunicator::Create(transport, topology, device, timeout_s, &comm);
//   s = comm->Settle(ncclAllReduce(..., comm->get(), stream), "allreduce of 'x'");
#ifndef TFHVD_COMMON_NCCL_NCCL_COMMUNICATOR_H_
#define TFHVD_COMMON_NCCL_NCCL_COMMUNICATOR_H_

#include "cc/common/nccl/nccl_header.h"

#include <memory>
#include <string>

#include "cc/common/common.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class NcclCommunicator {
 public:
  ~NcclCommunicator();
  // The communicator of every rank of the job (this is topology.rank), on
  // `device`. Every rank calls it at the same point of the response order.
  static Status Create(Transport* transport, const Topology& topology, int device,
                       double timeout_s, std::unique_ptr<NcclCommunicator>* out);
  // A communicator of this rank alone: an allreduce on it with a PreMulSum
  // operator scales a buffer on the device (no exchange with other ranks).
  static Status CreateSelf(int device, int rank, double timeout_s,
                           std::unique_ptr<NcclCommunicator>* out);

  ncclComm_t get() const { return comm_; }
  int size() const { return size_; }
  // Turns the result of an NCCL call into a Status, waiting (bounded) while
  // the non-blocking communicator reports ncclInProgress. An error or a
  // timeout aborts the communicator; the message quotes NCCL and names the rank.
  Status Settle(ncclResult_t result, const std::string& what);
  // Non-blocking check of the communicator's asynchronous error state.
  Status AsyncError(const std::string& what);
  // ncclCommAbort (idempotent): NCCL kernels of this communicator stop.
  void Abort();
  bool aborted() const { return aborted_; }

 private:
  NcclCommunicator(int device, int rank, int size, double timeout_s)
      : device_(device), rank_(rank), size_(size), timeout_s_(timeout_s) {}
  static Status Init(const ncclUniqueId& id, NcclCommunicator* comm, int nccl_rank);
  Status Failure(ncclResult_t result, const std::string& what);

  ncclComm_t comm_ = nullptr;
  int device_;
  int rank_;  // the job's rank (for messages)
  int size_;
  double timeout_s_;
  bool aborted_ = false;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NCCL_NCCL_COMMUNICATOR_H_
