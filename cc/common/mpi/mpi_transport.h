// Transport over MPI, used when the job was started by mpirun/mpiexec (or
// HOROVOD_CONTROLLER=mpi). MPI is initialised and used only by the core's
// background thread. Its links are Isend/Irecv pairs (mpi_links.h); it offers
// MPI_Allreduce to the selection table (algorithms/selection.h) as the
// backend's own allreduce.
#ifndef TFHVD_COMMON_MPI_MPI_TRANSPORT_H_
#define TFHVD_COMMON_MPI_MPI_TRANSPORT_H_

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "cc/common/mpi/mpi_links.h"
#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class MpiTransport : public Transport {
 public:
  explicit MpiTransport(const Parameters& params) : params_(params) {}
  // hvd.init(comm=...): the job is this communicator (a Fortran handle, as
  // mpi4py's Comm.py2f() gives), or these MPI_COMM_WORLD ranks in this order
  // (only they call init). Default: MPI_COMM_WORLD.
  void UseCommunicator(int64_t fortran_handle) { base_handle_ = fortran_handle; has_base_ = true; }
  void UseWorldRanks(std::vector<int> ranks) { world_ranks_ = std::move(ranks); }
  const char* name() const override { return "mpi"; }
  Status Init(Topology* topology) override;
  void Finalize() override;
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastBytes(std::string* data, int root) override;
  Status BitwiseOr(uint64_t* words, size_t n) override;
  Links* links() override { return &links_; }
  // MPI's allreduce: the selection table keeps it for what MPI does best.
  bool has_backend_allreduce() const override { return true; }
  Status BackendAllreduce(const void* input, void* output, int64_t count, DataType dtype,
                          ReduceOp op) override {
    return AllreduceOver(comm_, input, output, count, dtype, op);
  }
  // MPI's allreduce over comm (the job's or a link set's), any dtype and op.
  Status AllreduceOver(MPI_Comm comm, const void* input, void* output, int64_t count,
                       DataType dtype, ReduceOp op);
  // A communicator of the members' own (mpi_link_set.h).
  Status OpenLinkSet(const std::vector<int>& members, std::unique_ptr<LinkSet>* out) override;
  Status Allgatherv(const void* in, void* out,
                    const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buffer, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status Barrier() override;
  // True when MPI runs with MPI_THREAD_MULTIPLE (hvd.mpi_threads_supported()).
  static bool ThreadsMultiple();

 private:
  // Checks rc of a non-blocking MPI call and waits for its request (MpiWait).
  Status Finish(int rc, MPI_Request* request, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool has_base_ = false;
  int64_t base_handle_ = 0;
  std::vector<int> world_ranks_;
  MPI_Datatype float16_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_type_ = MPI_DATATYPE_NULL;
  // User-defined MPI_Ops for float16 [0] and bfloat16 [1], one per ReduceOp,
  // created on first use.
  MPI_Op ops16_[2][6];
  bool ops16_made_[2][6] = {};
  Parameters params_;
  MpiLinks links_;
  int rank_ = 0, size_ = 1;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_MPI_MPI_TRANSPORT_H_
