// Every HOROVOD_* knob the library reads, parsed once at hvd.init() (the list
// of knobs, their types, defaults and meanings is cc/common/knobs.cc) and
// handed down: the core, the transports and logging read these fields, never
// the environment.
#ifndef TFHVD_COMMON_PARAMETERS_H_
#define TFHVD_COMMON_PARAMETERS_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "cc/common/common.h"

namespace tfhvd {

// Each rank's core proves it is alive to its peers this often
// (core/liveness_monitor.h); HOROVOD_PEER_TIMEOUT_SECONDS must allow at least
// kMinPeerTimeoutProofs proofs to be missed in a row.
constexpr double kLivenessProofPeriodS = 1.0;
constexpr double kMinPeerTimeoutProofs = 2;
// Short enough that a frozen or cut-off rank ends the job within 30 s of the
// moment it stopped answering (the bound, one period, the launcher's teardown).
constexpr double kDefaultPeerTimeoutS = 20.0;

struct Parameters {
  // --- the core ---
  int64_t fusion_threshold_bytes = 64 * 1024 * 1024;  // HOROVOD_FUSION_THRESHOLD; 0 = off
  double cycle_time_ms = 1.0;                          // HOROVOD_CYCLE_TIME
  bool inline_rounds = true;                           // HOROVOD_INLINE_ROUNDS (background_loop.h)
  int64_t cache_capacity = 1024;                       // HOROVOD_CACHE_CAPACITY; 0 = off
  bool stall_check_disable = false;                    // HOROVOD_STALL_CHECK_DISABLE
  bool stall_check = true;                             // = !stall_check_disable
  double stall_warning_s = 60.0;                       // HOROVOD_STALL_CHECK_TIME_SECONDS
  double stall_shutdown_s = 600.0;                     // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS
  double peer_timeout_s = kDefaultPeerTimeoutS;        // HOROVOD_PEER_TIMEOUT_SECONDS; 0 = off
  bool malloc_reuse = true;                            // HOROVOD_MALLOC_REUSE (malloc_tuning.h)
  std::string timeline_path;                           // HOROVOD_TIMELINE; "" = off
  bool timeline_mark_cycles = false;                   // HOROVOD_TIMELINE_MARK_CYCLES
  std::string log_level = "warning";                   // HOROVOD_LOG_LEVEL (lower case)
  std::string controller;                              // HOROVOD_CONTROLLER; "" = auto
  // How long a rank waiting for its peers (Gloo socket-mesh transfers, the MPI
  // per-round exchange) keeps retrying, yielding the core, before it sleeps.
  int64_t spin_us = 5000;                              // HOROVOD_SPIN_US
  // Allreduces of at least shm_min_bytes between ranks that all share one host
  // go through shared memory (shm_collectives.h) in blocks of shm_slot_bytes.
  bool shm_allreduce = true;                           // HOROVOD_SHM_ALLREDUCE
  int64_t shm_min_bytes = 0;                           // HOROVOD_SHM_MIN_BYTES
  int64_t shm_slot_bytes = 128 * 1024;                 // HOROVOD_SHM_SLOT_BYTES (>= 4096)
  // Whether large shared-memory allreduces may read the peers' tensors in
  // place (shm_single_copy.cc): auto, on, off.
  std::string shm_single_copy = "auto";                // HOROVOD_SHM_SINGLE_COPY
  std::string shm_reader_flush = "auto";               // HOROVOD_SHM_READER_FLUSH
  // Horovod's CPU knobs (docs/knobs.md):
  // CPU ids for the background thread, one per local rank ("0,2") or one base id
  // (local rank r: base + r); "" = not pinned. Checked at init (thread_affinity.h).
  std::string thread_affinity;                         // HOROVOD_THREAD_AFFINITY
  bool mpi_threads_disable = false;                    // HOROVOD_MPI_THREADS_DISABLE
  std::string mpi_library;                             // HOROVOD_MPI_LIBRARY; "" = search
  std::string cpu_operations;                          // HOROVOD_CPU_OPERATIONS; "" = auto
  bool disable_group_fusion = false;                   // HOROVOD_DISABLE_GROUP_FUSION
  bool log_hide_time = false;                          // HOROVOD_LOG_HIDE_TIME
  double start_timeout_s = 0;                          // HOROVOD_START_TIMEOUT; 0 = as Gloo's
  // hvd.add_process_set/remove_process_set after init (process_set.h).
  bool dynamic_process_sets = false;                   // HOROVOD_DYNAMIC_PROCESS_SETS
  // Hierarchical collectives over the ranks of each host and across hosts
  // (algorithms/hierarchical_*.h; selection.h decides when they apply).
  bool hierarchical_allreduce = false;                 // HOROVOD_HIERARCHICAL_ALLREDUCE
  bool hierarchical_allgather = false;                 // HOROVOD_HIERARCHICAL_ALLGATHER
  // Autotune (autotune/parameter_manager.h): rank 0 tunes the fusion
  // threshold, cycle time, response cache and hierarchical allreduce online.
  bool autotune = false;                               // HOROVOD_AUTOTUNE
  std::string autotune_log;                            // HOROVOD_AUTOTUNE_LOG; "" = none
  int64_t autotune_warmup_samples = 3;                 // HOROVOD_AUTOTUNE_WARMUP_SAMPLES
  int64_t autotune_steps_per_sample = 10;              // HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
  int64_t autotune_bayes_opt_max_samples = 20;         // HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES
  double autotune_gaussian_process_noise = 0.8;        // HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE

  // horovodrun's NCCL-topology flags, accepted so command lines run unchanged; no effect here.
  bool torus_allreduce = false;  // HOROVOD_TORUS_ALLREDUCE
  int64_t num_nccl_streams = 1;  // HOROVOD_NUM_NCCL_STREAMS

  // --- the job's shape, set by the launcher (tfhvdrun); -1 = not set ---
  int64_t rank = -1;        // HOROVOD_RANK (set: the Gloo transport is used)
  int64_t size = 1;         // HOROVOD_SIZE
  int64_t local_rank = -1;  // HOROVOD_LOCAL_RANK; unset: = rank
  int64_t local_size = -1;  // HOROVOD_LOCAL_SIZE; unset: = size
  int64_t cross_rank = 0;   // HOROVOD_CROSS_RANK
  int64_t cross_size = 1;   // HOROVOD_CROSS_SIZE

  // --- Gloo ---
  std::string hostname = "127.0.0.1";  // HOROVOD_HOSTNAME
  std::string slot_hostname;           // HOROVOD_SLOT_HOSTNAME; "" = gethostname()
  int64_t elastic_round = -1;          // HOROVOD_ELASTIC_ROUND; -1 = not elastic
  bool elastic = false;                // HOROVOD_ELASTIC (set by the launcher)
  double elastic_timeout_s = 600;      // HOROVOD_ELASTIC_TIMEOUT (read by the launcher)
  std::string gloo_iface;              // HOROVOD_GLOO_IFACE
  std::string rendezvous_addr;         // HOROVOD_GLOO_RENDEZVOUS_ADDR
  int64_t rendezvous_port = 0;         // HOROVOD_GLOO_RENDEZVOUS_PORT
  std::string rendezvous_secret;       // HOROVOD_GLOO_RENDEZVOUS_SECRET
  double gloo_timeout_s = 0;           // HOROVOD_GLOO_TIMEOUT_SECONDS; 0 = 120 start, 30 per op
  double gloo_op_timeout_s = 0;        // HOROVOD_GLOO_OP_TIMEOUT_SECONDS; 0 = as above
  int64_t gloo_direct_max_bytes = 256 * 1024;  // HOROVOD_GLOO_DIRECT_MAX_BYTES
  // What carries Gloo's links: "mesh" (the own socket mesh, gloo/tcp_mesh.h),
  // "pairs" (Gloo's TCP pairs in synchronous mode) or "pairs_busy_poll".
  // Default mesh: python/benchmarks/links_bench.py (docs/performance.md).
  std::string gloo_links = "mesh";     // HOROVOD_GLOO_LINKS

  // --- GPU tensors (the CUDA variant; cc/common/nccl/) ---
  // What carries each collective on GPU tensors: "nccl", or "mpi"/"gloo" for
  // host staging through the job's CPU transport; "" = HOROVOD_GPU_OPERATIONS.
  // Every rank must set the same values.
  std::string gpu_operations = "nccl";  // HOROVOD_GPU_OPERATIONS
  std::string gpu_allreduce;      // HOROVOD_GPU_ALLREDUCE (also grouped allreduce)
  std::string gpu_allgather;      // HOROVOD_GPU_ALLGATHER
  std::string gpu_broadcast;      // HOROVOD_GPU_BROADCAST
  std::string gpu_alltoall;       // HOROVOD_GPU_ALLTOALL
  std::string gpu_reducescatter;  // HOROVOD_GPU_REDUCESCATTER
  // How long one NCCL operation (or communicator set-up) may take before the
  // communicator is aborted and its ops fail.
  double nccl_timeout_s = 300.0;  // HOROVOD_NCCL_TIMEOUT_SECONDS
  // A fused response's copies into and out of the device fusion buffer as one
  // kernel launch (cc/common/gpu/batched_copy.h) instead of one copy per tensor.
  bool batch_d2d_memcopies = true;  // HOROVOD_BATCH_D2D_MEMCOPIES

  // The knobs set (non-empty) in the environment: autotune leaves these fixed.
  std::set<std::string> set_knobs;

  // --- read by the Python package at hvd.init() ---
  bool tf_threads = true;              // HOROVOD_TF_THREADS (tf_hvd/tf_threads.py)
  bool cpu_bind = true;                // HOROVOD_CPU_BIND (tf_hvd/tf_threads.py)
  double cpu_bind_retry_s = 30.0;      // HOROVOD_CPU_BIND_RETRY_SECONDS (cpu_binding.h)

  // Parses every knob from the environment (unset or empty: the default).
  // A malformed value fails with a message naming the variable, the value
  // and what was expected.
  static Status FromEnvironment(Parameters* out);
  // The same from any lookup (name -> value or nullptr); used by the tests.
  static Status FromLookup(const std::function<const char*(const char*)>& lookup,
                           Parameters* out);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_PARAMETERS_H_
