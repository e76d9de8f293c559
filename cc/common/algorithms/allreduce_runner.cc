#include "cc/common/algorithms/allreduce_runner.h"

#include <cstring>

#include "cc/common/algorithms/algorithm_counts.h"
#include "cc/common/transport/link_collectives.h"
#include "cc/common/autotune/parameter_manager.h"
#include "cc/common/logging.h"
#include "cc/common/kernels/reduce_kernels.h"

namespace tfhvd {

Status AllreduceRunner::OpenHierarchical() {
  Status s = OpenTopologyLinks(
      *transport_->links(), topology_,
      [this](const std::vector<int>& members, std::unique_ptr<LinkSet>* out) {
        return transport_->OpenLinkSet(members, out);
      },
      &topology_links_);
  if (!s.ok()) return s;
  if (!topology_links_.homogeneous) {
    if (topology_.rank == 0 &&
        (params_.hierarchical_allreduce || params_.hierarchical_allgather)) {
      const char* knobs = !params_.hierarchical_allgather ? "HOROVOD_HIERARCHICAL_ALLREDUCE"
                          : !params_.hierarchical_allreduce
                              ? "HOROVOD_HIERARCHICAL_ALLGATHER"
                              : "HOROVOD_HIERARCHICAL_ALLREDUCE/ALLGATHER";
      TFHVD_LOG(WARNING) << knobs << ": the hosts run different numbers of ranks; the flat "
                         << "algorithms are used";
    }
    return Status();
  }
  if (!params_.hierarchical_allreduce) {
    hierarchical_ready_ = true;  // the allgather needs no shared memory
    return Status();
  }
  LinkSet* local = topology_links_.local.get();
  // Shared memory among this host's ranks (every rank of the set is on it).
  s = local_shm_.OpenIfSingleHost(
      local->rank(), local->size(), local->size(), params_,
      [local](const std::string& mine, std::vector<std::string>* all) {
        return AllgatherStrings(*local, mine, all);
      },
      "the ring over the host's links");
  hierarchical_ready_ = s.ok();
  return s;
}

Status AllreduceRunner::Open() {
  const bool backend = transport_->has_backend_allreduce();
  // Autotune may switch hierarchical allreduce on later unless the user fixed it.
  const bool hierarchical = params_.hierarchical_allreduce || params_.hierarchical_allgather ||
                            ParameterManager::MayTuneHierarchical(params_);
  if (hierarchical && topology_.local_size < topology_.size) {
    Status s = OpenHierarchical();
    if (!s.ok()) return s;
  }
  return shm_.OpenIfSingleHost(
      topology_.rank, topology_.size, topology_.local_size, params_,
      [this](const std::string& mine, std::vector<std::string>* all) {
        return AllgatherStrings(*transport_->links(), mine, all);
      },
      backend ? "the backend's allreduce" : "the ring over the links");
}

AllreduceCase AllreduceRunner::Case(int64_t bytes, ReduceOp op) const {
  AllreduceCase c;
  c.op = op;
  c.bytes = bytes;
  c.ranks = topology_.size;
  c.one_host = topology_.local_size == topology_.size;
  c.shm_ready = shm_.active();
  c.backend_allreduce = transport_->has_backend_allreduce();
  c.hierarchical_ready = hierarchical_ready_;
  return c;
}

bool AllreduceRunner::TakesSegments(int64_t bytes, ReduceOp op) const {
  return SelectAllreduce(Case(bytes, op), params_) == AllreduceAlgorithm::SHARED_MEMORY;
}

Status AllreduceRunner::RunSegments(const std::vector<ShmCollectives::Segment>& segments,
                                    DataType dtype, ReduceOp op, double postscale) {
  CountAlgorithm("allreduce", AllreduceAlgorithmName(AllreduceAlgorithm::SHARED_MEMORY));
  return shm_.Allreduce(segments, dtype, op, postscale);
}

Status AllreduceRunner::Run(const void* input, void* output, int64_t count, DataType dtype,
                            ReduceOp op, const std::vector<int64_t>& tensor_counts) {
  const AllreduceCase c = Case(count * static_cast<int64_t>(DataTypeSize(dtype)), op);
  const AllreduceAlgorithm a = SelectAllreduce(c, params_);
  CountAlgorithm("allreduce", AllreduceAlgorithmName(a));
  switch (a) {
    case AllreduceAlgorithm::COPY:
      if (output != input && c.bytes > 0) std::memmove(output, input, static_cast<size_t>(c.bytes));
      return Status();
    case AllreduceAlgorithm::ADASUM:
      return adasum_.Run(*transport_->links(), input, output, count, dtype, tensor_counts);
    case AllreduceAlgorithm::HIERARCHICAL:
      return hierarchical_.Run(*topology_links_.local, *topology_links_.cross, &local_shm_,
                               params_.gloo_direct_max_bytes, input, output, count, dtype, op);
    case AllreduceAlgorithm::GATHER:
      return gather_.Run(*transport_->links(), input, output, count, dtype, op);
    case AllreduceAlgorithm::SHARED_MEMORY:
      return shm_.Allreduce(input, output, count, dtype, op);
    case AllreduceAlgorithm::BACKEND:
      return transport_->BackendAllreduce(input, output, count, dtype, op);
    case AllreduceAlgorithm::RING:
      return ring_.Run(*transport_->links(), input, output, count, dtype, op);
  }
  return Status::Unknown("no allreduce algorithm selected");
}

Status AllreduceRunner::ReduceScatter(const void* input, void* output,
                                      const std::vector<int64_t>& first,
                                      const std::vector<int64_t>& counts, DataType dtype,
                                      ReduceOp op, double postscale, void* scratch) {
  const size_t elem = DataTypeSize(dtype);
  const size_t me = static_cast<size_t>(topology_.rank);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const AllreduceCase c = Case(total * static_cast<int64_t>(elem), op);
  const AllreduceAlgorithm a = SelectAllreduce(c, params_);
  if (a == AllreduceAlgorithm::SHARED_MEMORY) {
    CountAlgorithm("reducescatter", "shared-memory");
    return shm_.ReduceScatter(input, output, first, counts, dtype, op, postscale);
  }
  // Latency-bound sizes keep the one-round allreduce the table picks (MPI's
  // own, or the gather) over the ring's n-1 steps, except on two ranks, where
  // the ring is one step too and sends half the bytes.
  const bool ring = a == AllreduceAlgorithm::RING ||
                    (a == AllreduceAlgorithm::GATHER && c.ranks == 2) ||
                    (a == AllreduceAlgorithm::BACKEND && c.bytes > params_.gloo_direct_max_bytes);
  const char* reduced = static_cast<const char*>(scratch);  // unscaled, every slice's place
  Status s;
  if (a == AllreduceAlgorithm::COPY) {
    CountAlgorithm("reducescatter", "copy");
    reduced = static_cast<const char*>(input);
  } else if (ring) {
    CountAlgorithm("reducescatter", "ring");
    s = ring_.ReduceScatter(*transport_->links(), input, scratch, first, counts, dtype, op);
  } else {
    CountAlgorithm("reducescatter", "allreduce");
    s = Run(input, scratch, total, dtype, op);
  }
  if (!s.ok()) return s;
  const size_t mine = static_cast<size_t>(counts[me]);
  const char* slice = reduced + first[me] * static_cast<int64_t>(elem);
  if (mine > 0 && output != slice) std::memcpy(output, slice, mine * elem);
  ScaleBuffer(dtype, output, mine, postscale);
  return Status();
}

}  // namespace tfhvd
