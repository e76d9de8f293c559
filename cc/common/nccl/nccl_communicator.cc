#include "cc/common/nccl/nccl_communicator.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "cc/common/transport/peer_loss.h"

namespace tfhvd {

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  if (aborted_) return;  // ncclCommAbort already freed it
  cudaSetDevice(device_);
  // Non-blocking communicators finalize asynchronously; bounded, else abort.
  Status s = Settle(ncclCommFinalize(comm_), "finalizing the NCCL communicator");
  if (s.ok()) ncclCommDestroy(comm_);
}

Status NcclCommunicator::Failure(ncclResult_t result, const std::string& what) {
  std::string detail = ncclGetErrorString(result);
  const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') detail += ": " + std::string(last);
  Abort();
  return Status::Aborted("NCCL error in " + what + " on rank " + std::to_string(rank_) +
                         " (device " + std::to_string(device_) + "): " + detail +
                         "; the NCCL communicator was aborted");
}

void NcclCommunicator::Abort() {
  if (comm_ != nullptr && !aborted_) {
    ncclCommAbort(comm_);
    aborted_ = true;
  }
}

Status NcclCommunicator::AsyncError(const std::string& what) {
  if (aborted_) {
    return Status::Aborted("the NCCL communicator of rank " + std::to_string(rank_) +
                           " was aborted after an earlier error");
  }
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) return Failure(r, what);
  if (state != ncclSuccess && state != ncclInProgress) return Failure(state, what);
  return Status();
}

Status NcclCommunicator::Settle(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status();
  if (result != ncclInProgress) return Failure(result, what);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return Failure(r, what);
    if (state == ncclSuccess) return Status();
    if (state != ncclInProgress) return Failure(state, what);
    if (PeerLost()) {  // that rank never joins: abort now, not at the timeout
      Abort();
      return PeerLostError();
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) {
      Abort();
      return Status::DeadlineExceeded(
          what + " on rank " + std::to_string(rank_) + " did not finish within " +
          std::to_string(timeout_s_) +
          " s (HOROVOD_NCCL_TIMEOUT_SECONDS); a rank may have exited or crashed; "
          "the NCCL communicator was aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status NcclCommunicator::Init(const ncclUniqueId& id, NcclCommunicator* comm, int nccl_rank) {
  if (cudaSetDevice(comm->device_) != cudaSuccess) {
    return Status::Unknown("cudaSetDevice(" + std::to_string(comm->device_) + ") failed on rank " +
                           std::to_string(comm->rank_));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait is ours to bound
  ncclResult_t r = ncclCommInitRankConfig(&comm->comm_, comm->size_, id, nccl_rank, &config);
  if (comm->comm_ == nullptr && r != ncclSuccess && r != ncclInProgress) {
    return comm->Failure(r, "ncclCommInitRankConfig");
  }
  return comm->Settle(r, "creating the NCCL communicator of " + std::to_string(comm->size_) +
                             " ranks");
}

Status NcclCommunicator::Create(Transport* transport, const Topology& topology, int device,
                                double timeout_s, std::unique_ptr<NcclCommunicator>* out) {
  std::unique_ptr<NcclCommunicator> comm(
      new NcclCommunicator(device, topology.rank, topology.size, timeout_s));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  // Rank 0 makes the id; everyone gets it over the controller's transport.
  // A rank whose ncclGetUniqueId fails still sends (an empty id) so that no
  // rank waits forever; the receivers see it and fail too.
  std::string bytes;
  if (topology.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  Status s = transport->BroadcastBytes(&bytes, 0);
  if (!s.ok()) return s;
  if (bytes.size() != sizeof(id)) {
    return Status::Unknown("rank 0 could not create an NCCL unique id (ncclGetUniqueId failed)");
  }
  std::memcpy(&id, bytes.data(), sizeof(id));
  s = Init(id, comm.get(), topology.rank);
  if (s.ok()) *out = std::move(comm);
  return s;
}

Status NcclCommunicator::CreateSelf(int device, int rank, double timeout_s,
                                    std::unique_ptr<NcclCommunicator>* out) {
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(device, rank, 1, timeout_s));
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return comm->Failure(r, "ncclGetUniqueId");
  Status s = Init(id, comm.get(), 0);
  if (s.ok()) *out = std::move(comm);
  return s;
}

}  // namespace tfhvd
