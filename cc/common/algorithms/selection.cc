#include "cc/common/algorithms/selection.h"

namespace tfhvd {

namespace {

struct Row {
  AllreduceAlgorithm algorithm;
  bool (*applies)(const AllreduceCase& c, const Parameters& knobs);
};

// The allreduce table: first match wins. Knobs: HOROVOD_GLOO_DIRECT_MAX_BYTES
// (gloo_direct_max_bytes), HOROVOD_SHM_ALLREDUCE / HOROVOD_SHM_MIN_BYTES.
const Row kAllreduceTable[] = {
    // Nothing to combine.
    {AllreduceAlgorithm::COPY, [](const AllreduceCase& c, const Parameters&) {
       return c.ranks <= 1 || c.bytes == 0;
     }},
    // Adasum is its own operation, not a sum: only its algorithm computes it.
    {AllreduceAlgorithm::ADASUM, [](const AllreduceCase& c, const Parameters&) {
       return c.op == ReduceOp::ADASUM;
     }},
    // Several hosts, HOROVOD_HIERARCHICAL_ALLREDUCE: each byte crosses the
    // network once per host, spread over the host's ranks.
    {AllreduceAlgorithm::HIERARCHICAL, [](const AllreduceCase& c, const Parameters& k) {
       return k.hierarchical_allreduce && c.hierarchical_ready;
     }},
    // One host: one memcpy in and out instead of sockets or MPICH's staging, at
    // every size: no kernel round trip (figures: docs/performance.md, "Figures
    // behind the core's defaults").
    {AllreduceAlgorithm::SHARED_MEMORY, [](const AllreduceCase& c, const Parameters& k) {
       return c.one_host && c.shm_ready && c.bytes >= k.shm_min_bytes;
     }},
    // Latency-bound: one round beats the ring's 2(n-1). MPI's own allreduce
    // already does this for small messages.
    {AllreduceAlgorithm::GATHER, [](const AllreduceCase& c, const Parameters& k) {
       return !c.backend_allreduce && c.bytes <= k.gloo_direct_max_bytes;
     }},
    // MPI: MPI_Allreduce is tuned for the job's network.
    {AllreduceAlgorithm::BACKEND, [](const AllreduceCase& c, const Parameters&) {
       return c.backend_allreduce;
     }},
    {AllreduceAlgorithm::RING, [](const AllreduceCase&, const Parameters&) { return true; }},
};

struct AllgatherRow {
  AllgatherAlgorithm algorithm;
  bool (*applies)(const AllgatherCase& c, const Parameters& knobs);
};

// The allgather table: first match wins.
const AllgatherRow kAllgatherTable[] = {
    // Several hosts with the same number of ranks, HOROVOD_HIERARCHICAL_ALLGATHER.
    {AllgatherAlgorithm::HIERARCHICAL, [](const AllgatherCase& c, const Parameters& k) {
       return k.hierarchical_allgather && c.hierarchical_ready && c.ranks > 1;
     }},
    // One host: each rank's part is copied into shared memory once and out by
    // every other rank, instead of through loopback sockets.
    {AllgatherAlgorithm::SHARED_MEMORY, [](const AllgatherCase& c, const Parameters& k) {
       return c.shm_ready && c.bytes >= k.shm_min_bytes;
     }},
    // Gloo: the pipelined ring over the links the allreduce uses reaches the
    // link's rate; Gloo's own allgatherv runs well below it.
    {AllgatherAlgorithm::RING, [](const AllgatherCase& c, const Parameters&) {
       return !c.backend_tuned && c.ranks > 1;
     }},
    {AllgatherAlgorithm::BACKEND, [](const AllgatherCase&, const Parameters&) { return true; }},
};

}  // namespace

AllgatherAlgorithm SelectAllgather(const AllgatherCase& c, const Parameters& knobs) {
  for (const AllgatherRow& row : kAllgatherTable) {
    if (row.applies(c, knobs)) return row.algorithm;
  }
  return AllgatherAlgorithm::BACKEND;
}

const char* AllgatherAlgorithmName(AllgatherAlgorithm a) {
  switch (a) {
    case AllgatherAlgorithm::HIERARCHICAL: return "hierarchical";
    case AllgatherAlgorithm::SHARED_MEMORY: return "shared-memory";
    case AllgatherAlgorithm::RING: return "ring";
    case AllgatherAlgorithm::BACKEND: return "backend";
  }
  return "?";
}

AllreduceAlgorithm SelectAllreduce(const AllreduceCase& c, const Parameters& knobs) {
  for (const Row& row : kAllreduceTable) {
    if (row.applies(c, knobs)) return row.algorithm;
  }
  return AllreduceAlgorithm::RING;
}

const char* AllreduceAlgorithmName(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::COPY: return "copy";
    case AllreduceAlgorithm::ADASUM: return "adasum";
    case AllreduceAlgorithm::HIERARCHICAL: return "hierarchical";
    case AllreduceAlgorithm::GATHER: return "gather";
    case AllreduceAlgorithm::SHARED_MEMORY: return "shared-memory";
    case AllreduceAlgorithm::BACKEND: return "backend";
    case AllreduceAlgorithm::RING: return "ring";
  }
  return "?";
}

}  // namespace tfhvd
