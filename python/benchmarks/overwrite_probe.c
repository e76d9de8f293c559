/* What it costs to rewrite a buffer another CPU has just read, the way the shared-memory
 * allreduce rewrites its slots, and whether the reader flushing what it read helps.
 * Per round the other CPU reads 1 MiB (and, in "read_flush", flushes those lines with
 * clflushopt), then this CPU overwrites it; "untouched" is the same overwrite with the
 * other CPU idle. Rates in GB/s: "overwrite" on this CPU, "reader" on the other.
 * On the "far" placement of docs/performance.md the overwrite after a plain read drops
 * to ~8 GB/s (the lines must be taken back from the other chiplet one by one).
 *
 *   cc -O2 -mclflushopt -pthread overwrite_probe.c -o overwrite_probe && ./overwrite_probe 0 1
 *   {"cpus": [0, 1], "untouched": {"overwrite": 62.5}, "read": {"overwrite": 8.2,
 *    "reader": 40.4}, "read_flush": {"overwrite": 35.1, "reader": 21.6}}
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_util.h"

enum { kRounds = 200, kBytes = 1 << 20 };
enum Mode { kUntouched = 0, kRead = 1, kReadFlush = 2, kWriterFlush = 3, kPrefetchW = 4, kModes = 5 };
static const char *kModeNames[kModes] = {"untouched", "read", "read_flush", "writer_flush",
                                          "prefetchw"};

static _Alignas(64) atomic_int turn;
static char *shared_buf, *reader_buf, *source;
static int other_cpu, mode;
static double reader_ns;

static void *reader(void *arg) {
  (void)arg;
  pin(other_cpu);
  for (int r = 0; r < kRounds; ++r) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * r) {
    }
    const double c = now_ns();
    if (mode != kUntouched) memcpy(reader_buf, shared_buf, kBytes);
    if (mode == kReadFlush) {
      for (size_t i = 0; i < kBytes; i += 64) _mm_clflushopt(shared_buf + i);
      _mm_sfence();
    }
    reader_ns += now_ns() - c;
    atomic_store_explicit(&turn, 2 * r + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const int cpu = argc > 1 ? atoi(argv[1]) : 0;
  other_cpu = argc > 2 ? atoi(argv[2]) : 1;
  shared_buf = aligned_alloc(4096, kBytes);
  reader_buf = aligned_alloc(4096, kBytes);
  source = aligned_alloc(4096, kBytes);
  memset(shared_buf, 1, kBytes);
  memset(reader_buf, 2, kBytes);
  memset(source, 3, kBytes);
  pin(cpu);
  double overwrite[kModes], read[kModes];
  for (mode = 0; mode < kModes; ++mode) {
    atomic_store(&turn, -1);
    reader_ns = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL) != 0) return 1;
    double writing = 0;
    for (int r = 0; r < kRounds; ++r) {
      atomic_store_explicit(&turn, 2 * r, memory_order_release);
      while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * r + 1) {
      }
      const double c = now_ns();
      if (mode == kWriterFlush) {  // evict the reader's copies in bulk, then write
        for (size_t i = 0; i < kBytes; i += 64) _mm_clflushopt(shared_buf + i);
        _mm_sfence();
        memcpy(shared_buf, source, kBytes);
      } else if (mode == kPrefetchW) {  // ask for ownership 16 KiB ahead of the stores
        enum { kChunk = 4096, kAhead = 16384 };
        for (size_t i = 0; i < kAhead; i += 64) _m_prefetchw(shared_buf + i);
        for (size_t at = 0; at < kBytes; at += kChunk) {
          if (at + kAhead < kBytes) {
            for (size_t i = 0; i < kChunk; i += 64) _m_prefetchw(shared_buf + at + kAhead + i);
          }
          memcpy(shared_buf + at, source + at, kChunk);
        }
      } else {
        memcpy(shared_buf, source, kBytes);
      }
      writing += now_ns() - c;
    }
    pthread_join(t, NULL);
    overwrite[mode] = (double)kRounds * kBytes / writing;
    read[mode] = (double)kRounds * kBytes / reader_ns;
  }
  printf("{\"cpus\": [%d, %d]", cpu, other_cpu);
  for (int m = 0; m < kModes; ++m) {
    printf(", \"%s\": {\"overwrite\": %.1f, \"reader\": %.1f, \"round_us\": %.1f}",
           kModeNames[m], overwrite[m], m == kUntouched ? 0.0 : read[m],
           kRounds ? ((double)kBytes / overwrite[m] + (m == kUntouched ? 0.0 : (double)kBytes / read[m])) / 1e3 : 0.0);
  }
  printf(", \"check\": %d}\n", reader_buf[kBytes - 1]);
  return 0;
}
