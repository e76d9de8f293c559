#include "cc/common/knobs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tfhvd {

namespace {

constexpr const char* kUser = "user";
constexpr const char* kLauncher = "launcher";
constexpr double kMaxSeconds = 1e6;

using P = Parameters;
using T = KnobType;

// Columns: name, type, field, default, min, max, enum values, set by, tfhvdrun flag, meaning.
const std::vector<KnobSpec>& Table() {
  static const std::vector<KnobSpec> table = {
      // --- the core ---
      {"HOROVOD_FUSION_THRESHOLD", T::BYTES, &P::fusion_threshold_bytes, "67108864", 0, kNoMax,
       "", kUser, "--fusion-threshold-mb",
       "Bytes of allreduces fused into one collective (64 MiB); 0 disables fusion."},
      {"HOROVOD_CYCLE_TIME", T::MILLISECONDS, &P::cycle_time_ms, "1", 0, kMaxSeconds, "",
       kUser, "--cycle-time-ms",
       "Longest idle wait between negotiation rounds (work wakes the thread at once)."},
      {"HOROVOD_INLINE_ROUNDS", T::BOOL, &P::inline_rounds, "1", 0, 0, "", kUser, "",
       "An op runs the next negotiation round, and the collectives it decides, on its own "
       "thread when no other thread runs one (every rank on one host, or a job of one rank; "
       "no process set besides the global one) instead of waking the background thread: a "
       "small op then costs no thread hand-off. It waits for late peers no longer than a "
       "spin (`HOROVOD_SPIN_US`, at most 50 us); then the background thread continues the "
       "round. Off in the CUDA build, with more ranks on a host than CPUs, and with "
       "`HOROVOD_THREAD_AFFINITY`. 0: every round on the background thread."},
      {"HOROVOD_CACHE_CAPACITY", T::INT, &P::cache_capacity, "1024", 0, kNoMax, "", kUser,
       "--cache-capacity", "Response cache entries; 0 disables the cache."},
      {"HOROVOD_TIMELINE", T::STRING, &P::timeline_path, "", 0, 0, "", kUser,
       "--timeline-filename",
       "Rank 0 writes a Chrome-trace timeline to this file from `hvd.init()`; `DYNAMIC`: no "
       "file until `hvd.start_timeline(path, mark_cycles)`; empty: off (`start_timeline` "
       "works then too)."},
      {"HOROVOD_TIMELINE_MARK_CYCLES", T::BOOL, &P::timeline_mark_cycles, "0", 0, 0, "", kUser,
       "--timeline-mark-cycles",
       "Marks the start of each background-loop cycle in the timeline (`CYCLE_START`)."},
      {"HOROVOD_LOG_LEVEL", T::ENUM, &P::log_level, "warning", 0, 0,
       "trace,debug,info,warning,error,fatal", kUser, "--log-level",
       "Core log level (stderr, rank-prefixed)."},
      {"HOROVOD_LOG_HIDE_TIME", T::BOOL, &P::log_hide_time, "0", 0, 0, "", kUser,
       "--log-without-timestamp", "Leaves the date and time out of the core's log lines."},
      {"HOROVOD_STALL_CHECK_DISABLE", T::BOOL, &P::stall_check_disable, "0", 0, 0, "", kUser,
       "--no-stall-check", "Disables the stall inspector."},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", T::SECONDS, &P::stall_warning_s, "60", 0,
       kMaxSeconds, "", kUser, "--stall-check-warning-time-seconds",
       "Rank 0 warns about tensors that some ranks have not submitted, naming them."},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", T::SECONDS, &P::stall_shutdown_s, "600", 0,
       kMaxSeconds, "", kUser, "--stall-check-shutdown-time-seconds",
       "Turns such a stall into an error on every rank after this long (10 minutes; unlike "
       "Horovod, where it is off), so that a job never hangs without an end; the same bound "
       "ends an MPI transfer that makes no progress. 0: never (the stall check must be on)."},
      {"HOROVOD_PEER_TIMEOUT_SECONDS", T::SECONDS, &P::peer_timeout_s, "20", 0, kMaxSeconds,
       "", kUser, "",
       "A rank whose core sends no liveness proof (one a second, apart from the collectives) "
       "for this long is declared lost: every pending op on the other ranks fails naming it "
       "and its host, and the launcher ends the job (an elastic job goes on without it). "
       "Catches ranks that are frozen (SIGSTOP, a hung VM) or cut off by the network; a "
       "rank whose Python is only slow keeps proving it is alive. At least 2 (two proofs); "
       "0: off."},
      {"HOROVOD_CONTROLLER", T::ENUM, &P::controller, "(auto)", 0, 0, "gloo,mpi", kUser, "",
       "The transport; by default MPI under mpirun/mpiexec, Gloo under tfhvdrun "
       "(HOROVOD_RANK set), else a job of one process. tfhvdrun sets it."},
      {"HOROVOD_SPIN_US", T::INT, &P::spin_us, "5000", 0, 10e6, "", kUser, "",
       "Microseconds a rank that waits for its peers (Gloo socket-mesh transfers, every MPI "
       "collective) keeps retrying, yielding the core (`sched_yield`), before it "
       "sleeps (poll, or 50 us naps under MPI); 0 sleeps at once. Measured at np=2 "
       "on 2 cores: 200 us cost 5-15% of Keras fit throughput against 5 ms, and longer "
       "gained nothing. On one host (shared memory) a rank spins at most 50 us without "
       "yielding, then sleeps on a futex its peer wakes; it sleeps at once where the "
       "host's ranks outnumber the CPUs a rank may use."},
      {"HOROVOD_SHM_ALLREDUCE", T::BOOL, &P::shm_allreduce, "1", 0, 0, "", kUser, "",
       "When every rank is on one host, allreduces, reduce-scatters and allgathers of at "
       "least `HOROVOD_SHM_MIN_BYTES` go through shared memory (`/dev/shm`) instead of "
       "loopback TCP or MPI; 0 turns this off. If a rank cannot map the regions, every "
       "rank falls back (with a warning)."},
      {"HOROVOD_SHM_MIN_BYTES", T::BYTES, &P::shm_min_bytes, "0", 0, kNoMax, "", kUser, "",
       "Smallest allreduce, reduce-scatter or allgather that takes the shared-memory path "
       "(0: every size); smaller ones run the gather or the ring (Gloo) or MPI's own."},
      {"HOROVOD_SHM_SLOT_BYTES", T::BYTES, &P::shm_slot_bytes, "131072", 4096,
       4294967296.0, "", kUser, "",
       "Block size of the shared-memory collectives (per rank, four slots used in turn). "
       "Small enough that the slots in use fit a core's L2: slots left idle between "
       "training steps go cold, and a call pays for that only in its first blocks."},
      {"HOROVOD_SHM_SINGLE_COPY", T::ENUM, &P::shm_single_copy, "auto", 0, 0, "auto,on,off",
       kUser, "",
       "Whether shared-memory allreduces of 1 MiB and more may have each rank read the "
       "others' tensors where they lie (`process_vm_readv`, one copy, as MPI libraries move "
       "large messages on one host) instead of passing them through the slots: about twice "
       "as fast where the host places the CPUs far apart, half as fast near. auto: rank 0 "
       "times its calls both ways and keeps the cheaper, trying the other for 4 calls in 64. "
       "Each rank then lets processes of its user read its memory where Yama's ptrace scope "
       "is 1 (`PR_SET_PTRACER_ANY`); where one rank cannot read another's (another user, a "
       "container's seccomp profile), all use the slots. on: every such call (when every "
       "rank says on); off: never, and the ptrace setting is left alone."},
      {"HOROVOD_SHM_READER_FLUSH", T::ENUM, &P::shm_reader_flush, "auto", 0, 0, "auto,on,off",
       kUser, "",
       "Whether ranks flush (clflushopt) the shared-memory slot lines they read, so that the "
       "slot's owner rewrites them from memory instead of taking each one back from the "
       "reader's cache: 1.3-1.5x faster where the host places the two CPUs far apart, 2.2x slower "
       "near. auto: rank 0 times its blocks both ways and keeps the cheaper, trying the "
       "other for 8 blocks in 512. Without clflushopt: off."},
      {"HOROVOD_DYNAMIC_PROCESS_SETS", T::BOOL, &P::dynamic_process_sets, "0", 0, 0, "", kUser,
       "", "Allows `hvd.add_process_set`/`hvd.remove_process_set` after `hvd.init()` (every "
       "rank adds and removes the same sets in the same order); `hvd.init(process_sets="
       "\"dynamic\")` sets it."},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", T::BOOL, &P::hierarchical_allreduce, "0", 0, 0, "",
       kUser, "--hierarchical-allreduce",
       "On several hosts with the same number of ranks each: allreduce within each host "
       "(shared memory when it maps), then across hosts among the ranks of one local rank, "
       "then share within the host; every rank gets the same bits. Off, or on one host or "
       "uneven hosts: the flat algorithms."},
      {"HOROVOD_HIERARCHICAL_ALLGATHER", T::BOOL, &P::hierarchical_allgather, "0", 0, 0, "",
       kUser, "--hierarchical-allgather",
       "On several hosts with the same number of ranks each: each rank exchanges its block "
       "with the ranks of its local rank on the other hosts, then the ranks of each host "
       "share what they received; the result is byte for byte the flat allgather's (rank "
       "order, ragged first dimensions). Off, or on one host or uneven hosts: the "
       "backend's allgather."},
      {"HOROVOD_AUTOTUNE", T::BOOL, &P::autotune, "0", 0, 0, "", kUser, "--autotune",
       "Rank 0 tunes the fusion threshold (0-64 MiB), cycle time (1-25 ms), response cache "
       "on/off and (on several hosts) hierarchical allreduce online, by Bayesian "
       "optimisation of the bytes allreduced per second; every rank switches at the same "
       "round. Knobs set explicitly stay fixed. docs/autotune.md."},
      {"HOROVOD_AUTOTUNE_LOG", T::STRING, &P::autotune_log, "", 0, 0, "", kUser,
       "--autotune-log-file",
       "Rank 0 writes one CSV row per autotune sample (the values tried and their score, "
       "bytes allreduced per second) to this file; empty: no log."},
      {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", T::INT, &P::autotune_warmup_samples, "3", 0, 1e6, "",
       kUser, "--autotune-warmup-samples",
       "Samples discarded at the start of autotuning (start-up is slower than steady state)."},
      {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", T::INT, &P::autotune_steps_per_sample, "10", 1, 1e6,
       "", kUser, "--autotune-steps-per-sample",
       "Background-loop cycles that allreduce something per autotune sample."},
      {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", T::INT, &P::autotune_bayes_opt_max_samples,
       "20", 1, 1e4, "", kUser, "--autotune-bayes-opt-max-samples",
       "Scored samples before autotuning stops and keeps the best values for the rest of the "
       "job."},
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", T::NUMBER,
       &P::autotune_gaussian_process_noise, "0.8", 0, 1e6, "", kUser,
       "--autotune-gaussian-process-noise",
       "Noise of the Gaussian process (added to its kernel's diagonal, in units of the "
       "scores' variance): higher trusts single measurements less."},
      {"HOROVOD_MALLOC_REUSE", T::BOOL, &P::malloc_reuse, "1", 0, 0, "", kUser, "",
       "Raises glibc's mmap/trim thresholds at init (unless `MALLOC_MMAP_THRESHOLD_`/"
       "`MALLOC_TRIM_THRESHOLD_` are set) so large freed buffers are reused instead of "
       "mapped afresh."},
      {"HOROVOD_TF_THREADS", T::BOOL, &P::tf_threads, "1", 0, 0, "", kUser, "",
       "When several ranks share a host and no TensorFlow op has run before `hvd.init()`: "
       "split the cores between the local ranks (intra-op threads = cores / local ranks, "
       "unless the script set them with `tf.config.threading`) and turn off TensorFlow's "
       "thread spinning (spinning workers take the cores the collectives need). 0 leaves "
       "TensorFlow's defaults."},
      {"HOROVOD_CPU_BIND", T::BOOL, &P::cpu_bind, "1", 0, 0, "", kUser, "",
       "With `HOROVOD_TF_THREADS`, when it splits the cores: also binds each local rank (every "
       "thread of the process) to its own slice of the CPUs it may use, the way `mpirun` "
       "binds ranks to cores, so that a rank's compute does not migrate onto the core where a "
       "peer is finishing its share of a step. Not done when `HOROVOD_THREAD_AFFINITY` is "
       "set or there are fewer CPUs than local ranks. 0: the scheduler places the threads."},
      {"HOROVOD_CPU_BIND_RETRY_SECONDS", T::SECONDS, &P::cpu_bind_retry_s, "30", 0, kMaxSeconds,
       "", kUser, "",
       "A bound rank whose CPUs other processes use (a quarter of their time or more, two "
       "seconds in a row) may run on every CPU it had before binding for this long, then binds "
       "again; the wait doubles, up to 8x, while the contention lasts. On a shared machine "
       "that keeps a rank from waiting for its share of one core while another sits idle. 0: "
       "the binding is kept whatever else runs."},
      // --- Horovod's CPU knobs ---
      {"HOROVOD_THREAD_AFFINITY", T::STRING, &P::thread_affinity, "", 0, 0, "", kUser,
       "--thread-affinity",
       "Pins each rank's background thread to a CPU: a comma-separated list with one CPU id "
       "per local rank (`0,2`: local rank 1 on CPU 2), or one id N (local rank r on CPU "
       "N + r); empty: not pinned. A CPU this process may not use fails `hvd.init()`."},
      {"HOROVOD_MPI_THREADS_DISABLE", T::BOOL, &P::mpi_threads_disable, "0", 0, 0, "", kUser,
       "--mpi-threads-disable",
       "MPI jobs: initialise MPI with `MPI_THREAD_SERIALIZED` (tf_hvd's threads call MPI "
       "one at a time) instead of `MPI_THREAD_MULTIPLE`, which other MPI users of the process "
       "(mpi4py) need (`hvd.mpi_threads_supported()`). Has no effect when MPI was "
       "initialised before `hvd.init()`."},
      {"HOROVOD_MPI_LIBRARY", T::STRING, &P::mpi_library, "(search)", 0, 0, "", kUser, "",
       "MPI jobs: the MPICH-ABI MPI library to load (a path, or a file name the loader "
       "finds), e.g. your site's `libmpi.so.12` (MPICH, Intel MPI, MVAPICH, Cray MPICH). "
       "Unset: the Python environment's `lib/` (the `mpich` wheel), then `libmpi.so.12` and "
       "`libmpich.so.12` on the loader's path (`LD_LIBRARY_PATH`). tf_hvd links no MPI: "
       "Gloo jobs need none."},
      {"HOROVOD_CPU_OPERATIONS", T::ENUM, &P::cpu_operations, "(HOROVOD_CONTROLLER)", 0, 0,
       "gloo,mpi,ccl", kUser, "",
       "Library for collectives on CPU tensors. tf_hvd runs negotiation and CPU collectives "
       "on one transport, so this picks the transport when `HOROVOD_CONTROLLER` is unset, "
       "and must agree with it when set; `ccl` fails `hvd.init()` (no oneCCL in tf_hvd)."},
      {"HOROVOD_DISABLE_GROUP_FUSION", T::BOOL, &P::disable_group_fusion, "0", 0, 0, "", kUser,
       "", "Tensors of a grouped allreduce are fused only with each other, never with "
       "tensors outside their group."},
      {"HOROVOD_START_TIMEOUT", T::SECONDS, &P::start_timeout_s,
       "(HOROVOD_GLOO_TIMEOUT_SECONDS, else 120)", 0, kMaxSeconds, "", kUser,
       "--start-timeout",
       "Seconds the ranks of a Gloo job wait at `hvd.init()` for all of them to check in; "
       "also the launcher's own start-up timeout (default 30 there); 0: as the default."},
      // --- Gloo ---
      {"HOROVOD_GLOO_TIMEOUT_SECONDS", T::SECONDS, &P::gloo_timeout_s, "(30 per collective)",
       0, kMaxSeconds, "", kUser, "--gloo-timeout-seconds",
       "Bounds every Gloo collective (and the rendezvous, unless `HOROVOD_START_TIMEOUT` is "
       "set); 0: the defaults."},
      {"HOROVOD_GLOO_OP_TIMEOUT_SECONDS", T::SECONDS, &P::gloo_op_timeout_s,
       "(HOROVOD_GLOO_TIMEOUT_SECONDS, else 30)", 0, kMaxSeconds, "", kUser, "",
       "Bounds every Gloo collective alone (a frozen peer fails the job instead of hanging "
       "it); 0: as above."},
      {"HOROVOD_GLOO_DIRECT_MAX_BYTES", T::BYTES, &P::gloo_direct_max_bytes, "262144", 0,
       kNoMax, "", kUser, "",
       "Gloo: allreduces up to this size are one gather over the links (latency-bound); "
       "larger ones run a ring (or shared memory)."},
      {"HOROVOD_GLOO_LINKS", T::ENUM, &P::gloo_links, "mesh", 0, 0,
       "mesh,pairs,pairs_busy_poll", kUser, "",
       "What carries Gloo's point-to-point links: the own socket mesh, or Gloo's TCP "
       "pairs in synchronous mode (optionally busy-polling); see docs/performance.md."},
      {"HOROVOD_GLOO_IFACE", T::STRING, &P::gloo_iface, "", 0, 0, "", kUser,
       "--network-interface", "Network interface Gloo binds and publishes; empty: "
       "`HOROVOD_HOSTNAME`."},
      // --- GPU tensors (the CUDA variant: tools/build/build_lib.sh --cuda) ---
      {"HOROVOD_GPU_OPERATIONS", T::ENUM, &P::gpu_operations, "nccl", 0, 0, "nccl,mpi,gloo",
       kUser, "",
       "What runs collectives on GPU tensors: NCCL, or host staging through the job's CPU "
       "transport (mpi/gloo: copied to host memory and back); the per-op knobs below win."},
      {"HOROVOD_GPU_ALLREDUCE", T::ENUM, &P::gpu_allreduce, "(HOROVOD_GPU_OPERATIONS)", 0, 0,
       "nccl,mpi,gloo", kUser, "", "As HOROVOD_GPU_OPERATIONS, for allreduce and grouped allreduce."},
      {"HOROVOD_GPU_ALLGATHER", T::ENUM, &P::gpu_allgather, "(HOROVOD_GPU_OPERATIONS)", 0, 0,
       "nccl,mpi,gloo", kUser, "", "As HOROVOD_GPU_OPERATIONS, for allgather."},
      {"HOROVOD_GPU_BROADCAST", T::ENUM, &P::gpu_broadcast, "(HOROVOD_GPU_OPERATIONS)", 0, 0,
       "nccl,mpi,gloo", kUser, "", "As HOROVOD_GPU_OPERATIONS, for broadcast."},
      {"HOROVOD_GPU_ALLTOALL", T::ENUM, &P::gpu_alltoall, "(HOROVOD_GPU_OPERATIONS)", 0, 0,
       "nccl,mpi,gloo", kUser, "", "As HOROVOD_GPU_OPERATIONS, for alltoall."},
      {"HOROVOD_GPU_REDUCESCATTER", T::ENUM, &P::gpu_reducescatter, "(HOROVOD_GPU_OPERATIONS)",
       0, 0, "nccl,mpi,gloo", kUser, "", "As HOROVOD_GPU_OPERATIONS, for reducescatter."},
      {"HOROVOD_NCCL_TIMEOUT_SECONDS", T::SECONDS, &P::nccl_timeout_s, "300", 0.001,
       kMaxSeconds, "", kUser, "",
       "Bounds each NCCL operation and communicator set-up: past it (or on an NCCL error) the "
       "communicator is aborted and every pending GPU op fails, naming the rank."},
      {"HOROVOD_BATCH_D2D_MEMCOPIES", T::BOOL, &P::batch_d2d_memcopies, "1", 0, 0, "", kUser, "",
       "A fused GPU allreduce copies its tensors into and out of the fusion buffer with one "
       "kernel launch (compiled at first use with NVRTC, from TensorFlow's "
       "nvidia-cuda-nvrtc-cu12) instead of one `cudaMemcpyAsync` per tensor; 0 keeps the "
       "separate copies. Without NVRTC the copies are separate, with a warning."},
      // --- set by the launcher ---
      {"HOROVOD_RANK", T::INT, &P::rank, "(unset)", 0, 1 << 24, "", kLauncher, "",
       "This process's rank; set: the job runs on Gloo."},
      {"HOROVOD_SIZE", T::INT, &P::size, "1", 1, 1 << 24, "", kLauncher, "",
       "Number of processes in the job."},
      {"HOROVOD_LOCAL_RANK", T::INT, &P::local_rank, "(HOROVOD_RANK)", 0, 1 << 24, "",
       kLauncher, "", "Rank among the processes on this host."},
      {"HOROVOD_LOCAL_SIZE", T::INT, &P::local_size, "(HOROVOD_SIZE)", 1, 1 << 24, "",
       kLauncher, "", "Number of processes on this host."},
      {"HOROVOD_CROSS_RANK", T::INT, &P::cross_rank, "0", 0, 1 << 24, "", kLauncher, "",
       "Index of this host among the hosts."},
      {"HOROVOD_CROSS_SIZE", T::INT, &P::cross_size, "1", 1, 1 << 24, "", kLauncher, "",
       "Number of hosts."},
      {"HOROVOD_HOSTNAME", T::STRING, &P::hostname, "127.0.0.1", 0, 0, "", kLauncher, "",
       "Address this rank binds and publishes for Gloo's connections."},
      {"HOROVOD_GLOO_RENDEZVOUS_ADDR", T::STRING, &P::rendezvous_addr, "", 0, 0, "",
       kLauncher, "", "Address of the launcher's rendezvous server."},
      {"HOROVOD_GLOO_RENDEZVOUS_PORT", T::INT, &P::rendezvous_port, "0", 0, 65535, "",
       kLauncher, "", "Port of the launcher's rendezvous server."},
      // --- fault tolerance (who failed, restarts, elastic) ---
      {"HOROVOD_SLOT_HOSTNAME", T::STRING, &P::slot_hostname, "(the host name)", 0, 0, "",
       kLauncher, "",
       "The host this rank runs on, as the launcher's host list names it; errors that name "
       "another rank say where it runs."},
      {"HOROVOD_ELASTIC_ROUND", T::INT, &P::elastic_round, "(unset)", 0, 1 << 30, "",
       kLauncher, "",
       "Set by tf_hvd.elastic when it re-forms a job: the ranks of one round meet under "
       "their own rendezvous prefix."},
      {"HOROVOD_TORUS_ALLREDUCE", T::BOOL, &P::torus_allreduce, "0", 0, 0, "", kUser,
       "--torus-allreduce",
       "Accepted as horovodrun's (a 2-D torus allreduce for NCCL); no effect in tf_hvd, "
       "whose allreduce algorithm is chosen per response (docs/architecture.md)."},
      {"HOROVOD_NUM_NCCL_STREAMS", T::INT, &P::num_nccl_streams, "1", 1, 1024, "", kUser,
       "--num-nccl-streams",
       "Accepted as horovodrun's; no effect in tf_hvd: its NCCL backend runs on one stream."},
      {"HOROVOD_ELASTIC", T::BOOL, &P::elastic, "0", 0, 0, "", kLauncher, "",
       "1 in every rank of an elastic job (tfhvdrun --min-np or --host-discovery-script), "
       "as horovodrun sets it."},
      {"HOROVOD_ELASTIC_TIMEOUT", T::SECONDS, &P::elastic_timeout_s, "600", 0, kMaxSeconds,
       "", kUser, "--elastic-timeout",
       "Elastic jobs: how long the launcher waits for --min-np slots or ranks, and how long "
       "the ranks may take to re-form (tfhvdrun reads it as the default of the flag)."},
      {"HOROVOD_GLOO_RENDEZVOUS_SECRET", T::STRING, &P::rendezvous_secret, "", 0, 0, "",
       kLauncher, "",
       "The job's secret: signs rendezvous requests and authenticates the ranks' "
       "connections."},
  };
  return table;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A number as docs/knobs.md writes it: 4096, 1.5, 4294967296 (no exponent).
std::string NumberText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

bool IsIntegerType(KnobType t) { return t == KnobType::INT || t == KnobType::BYTES; }

const char* UnitOf(KnobType t) {
  switch (t) {
    case KnobType::BYTES: return "bytes";
    case KnobType::SECONDS: return "seconds";
    case KnobType::MILLISECONDS: return "milliseconds";
    default: return "";
  }
}

// What a valid value looks like, for the error message.
std::string Expected(const KnobSpec& spec) {
  if (spec.type == KnobType::BOOL) return "one of 1, 0, true, false, yes, no";
  if (spec.type == KnobType::ENUM) {
    std::string v = spec.values;
    std::string out;
    for (char c : v) out += (c == ',') ? std::string(", ") : std::string(1, c);
    return "one of " + out;
  }
  std::string unit = UnitOf(spec.type);
  std::string what;
  bool open_max = spec.max >= kNoMax;
  if (spec.min == 0) {
    what = "a non-negative number" + (unit.empty() ? "" : " of " + unit);
    if (!open_max) what += " up to " + NumberText(spec.max);
  } else {
    what = (unit.empty() ? std::string("a number") : "a number of " + unit) + " from " +
           NumberText(spec.min) + " to " + NumberText(spec.max);
  }
  if (IsIntegerType(spec.type)) what += ", written as a plain integer (no suffix such as 1M)";
  return what;
}

Status Invalid(const KnobSpec& spec, const std::string& text) {
  return Status::InvalidArgument(std::string(spec.name) + "='" + text +
                                 "' is not a valid value: expected " + Expected(spec));
}

}  // namespace

const std::vector<KnobSpec>& Knobs() { return Table(); }

const KnobSpec* FindKnob(const std::string& name) {
  for (const auto& k : Table()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

const char* KnobTypeName(KnobType type) {
  switch (type) {
    case KnobType::BOOL: return "bool";
    case KnobType::INT: return "int";
    case KnobType::BYTES: return "bytes";
    case KnobType::SECONDS: return "seconds";
    case KnobType::MILLISECONDS: return "milliseconds";
    case KnobType::NUMBER: return "number";
    case KnobType::STRING: return "string";
    case KnobType::ENUM: return "enum";
  }
  return "?";
}

Status ParseKnob(const KnobSpec& spec, const std::string& raw, Parameters* out) {
  if (spec.type == KnobType::STRING) {
    *out.*std::get<std::string Parameters::*>(spec.target) = raw;
    return Status();
  }
  const std::string text = Trim(raw);
  switch (spec.type) {
    case KnobType::BOOL: {
      std::string v = Lower(text);
      bool value;
      if (v == "1" || v == "true" || v == "yes") {
        value = true;
      } else if (v == "0" || v == "false" || v == "no") {
        value = false;
      } else {
        return Invalid(spec, raw);
      }
      *out.*std::get<bool Parameters::*>(spec.target) = value;
      return Status();
    }
    case KnobType::ENUM: {
      std::string v = Lower(text);
      std::stringstream values(spec.values);
      std::string allowed;
      while (std::getline(values, allowed, ',')) {
        if (v == allowed) {
          *out.*std::get<std::string Parameters::*>(spec.target) = v;
          return Status();
        }
      }
      return Invalid(spec, raw);
    }
    case KnobType::INT:
    case KnobType::BYTES: {
      // Digits only (an optional sign): "1M", "1e6", "0x10" and "2.5" are errors.
      size_t i = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
      if (i == text.size()) return Invalid(spec, raw);
      for (size_t j = i; j < text.size(); ++j) {
        if (!std::isdigit(static_cast<unsigned char>(text[j]))) return Invalid(spec, raw);
      }
      errno = 0;
      long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE || static_cast<double>(v) < spec.min ||
          static_cast<double>(v) > spec.max) {
        return Invalid(spec, raw);
      }
      *out.*std::get<int64_t Parameters::*>(spec.target) = static_cast<int64_t>(v);
      return Status();
    }
    case KnobType::SECONDS:
    case KnobType::MILLISECONDS:
    case KnobType::NUMBER: {
      char* end = nullptr;
      errno = 0;
      double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
      // strtod also reads "inf", "nan" and hexadecimal: only finite decimals pass.
      bool hex = text.find_first_of("xX") != std::string::npos;
      if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || hex ||
          !std::isfinite(v) || v < spec.min || v > spec.max) {
        return Invalid(spec, raw);
      }
      *out.*std::get<double Parameters::*>(spec.target) = v;
      return Status();
    }
    case KnobType::STRING:
      break;
  }
  return Status();
}

std::string KnobValueText(const KnobSpec& spec, const Parameters& p) {
  return std::visit(
      [&p](auto member) -> std::string {
        const auto& v = p.*member;
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          return v ? "1" : "0";
        } else if constexpr (std::is_same_v<V, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<V, int64_t>) {
          return std::to_string(v);
        } else {
          return NumberText(v);
        }
      },
      spec.target);
}

std::vector<std::string> UnknownKnobs(char** environ) {
  std::vector<std::string> unknown;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    std::string name = eq ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (name.compare(0, 8, "HOROVOD_") == 0 && FindKnob(name) == nullptr) {
      unknown.push_back(name);
    }
  }
  std::sort(unknown.begin(), unknown.end());
  unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
  return unknown;
}

}  // namespace tfhvd
