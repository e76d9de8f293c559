/* What cpu_probe.c and overwrite_probe.c share: a monotonic clock in nanoseconds, and
 * pinning the calling thread to one CPU. */
#ifndef TF_HVD_BENCH_PROBE_UTIL_H_
#define TF_HVD_BENCH_PROBE_UTIL_H_

#include <pthread.h>
#include <sched.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

#endif  /* TF_HVD_BENCH_PROBE_UTIL_H_ */
