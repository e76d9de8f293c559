// EXPERIMENT ONLY (experiments/single-op-time/shm_stats.diff): per-phase CPU and wall time of
// the shared-memory collectives, printed at exit.
#pragma once
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
namespace tfhvd {
struct ShmStats {
  enum { kWait, kStage, kReduce, kConsume, kPhases };
  std::atomic<uint64_t> cpu[kPhases]{}, wall[kPhases]{};
  std::atomic<uint64_t> sleeps{0}, blocks{0}, bytes{0}, calls{0};
  ~ShmStats() {
    if (!getenv("TFHVD_SHM_STATS") || calls == 0) return;
    const char* names[] = {"wait", "stage", "reduce", "consume"};
    double c = static_cast<double>(calls);
    fprintf(stderr, "shmstats pid %d: %llu calls of >=64KiB, %.1f blocks/call, %.0f KiB/call, sleeps/call %.1f\n",
            (int)getpid(), (unsigned long long)calls.load(), blocks / c, bytes / c / 1024, sleeps / c);
    for (int i = 0; i < kPhases; ++i)
      fprintf(stderr, "shmstats pid %d:   %-8s cpu %8.1f us/call  wall %8.1f us/call\n", (int)getpid(),
              names[i], cpu[i] / c / 1e3, wall[i] / c / 1e3);
  }
  static ShmStats& Get() { static ShmStats s; return s; }
};
inline uint64_t NowNs(clockid_t id) {
  timespec t; clock_gettime(id, &t); return uint64_t(t.tv_sec) * 1000000000ull + t.tv_nsec;
}
struct ShmPhase {
  int which; bool on; uint64_t c0, w0;
  ShmPhase(int w, bool on_) : which(w), on(on_) {
    if (on) { c0 = NowNs(CLOCK_THREAD_CPUTIME_ID); w0 = NowNs(CLOCK_MONOTONIC); }
  }
  ~ShmPhase() {
    if (!on) return;
    ShmStats::Get().cpu[which] += NowNs(CLOCK_THREAD_CPUTIME_ID) - c0;
    ShmStats::Get().wall[which] += NowNs(CLOCK_MONOTONIC) - w0;
  }
};
}  // namespace tfhvd
namespace tfhvd { inline thread_local bool g_shm_on = false; }
