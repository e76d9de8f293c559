#include "cc/common/mpi/mpi_link_set.h"

#include "cc/common/mpi/mpi_transport.h"

namespace tfhvd {

namespace {
// Tag of MPI_Comm_create_group: concurrent calls over disjoint member lists
// (every host's set at once) need no distinct tags.
constexpr int kCreateTag = 4711;
}  // namespace

MpiLinkSet::MpiLinkSet(MpiTransport* transport, MPI_Comm comm, std::vector<int> members,
                       int rank, int64_t spin_us, double limit_s)
    : LinkSet(std::move(members), rank), transport_(transport), comm_(comm) {
  links_.Reset(comm_, rank, size(), spin_us, limit_s);
}

MpiLinkSet::~MpiLinkSet() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

Status MpiLinkSet::Open(MpiTransport* transport, MPI_Comm parent, const std::vector<int>& members,
                        int64_t spin_us, double limit_s, std::unique_ptr<LinkSet>* out) {
  int rank = 0, size = 0, index = 0;
  MPI_Comm_rank(parent, &rank);
  MPI_Comm_size(parent, &size);
  Status s = FindMember(members, size, rank, &index);
  if (!s.ok()) return s;
  MPI_Group all, group;
  MPI_Comm_group(parent, &all);
  MPI_Group_incl(all, static_cast<int>(members.size()), members.data(), &group);
  MPI_Comm comm = MPI_COMM_NULL;
  s = MpiCheck(MPI_Comm_create_group(parent, group, kCreateTag, &comm), "MPI_Comm_create_group");
  MPI_Group_free(&group);
  MPI_Group_free(&all);
  if (!s.ok()) return s;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  out->reset(new MpiLinkSet(transport, comm, members, index, spin_us, limit_s));
  return Status();
}

Status MpiLinkSet::BackendAllreduce(const void* input, void* output, int64_t count,
                                    DataType dtype, ReduceOp op) {
  return transport_->AllreduceOver(comm_, input, output, count, dtype, op);
}

}  // namespace tfhvd
