/* Where the host put this machine's CPUs, as the shared-memory allreduce feels it: the
 * round trip of one cache line between two CPUs, how fast one CPU copies 1 MiB that
 * the other just wrote, and how fast it overwrites 1 MiB that the other just read
 * against 1 MiB the other never touched (a slot is rewritten after its peer read it).
 * On a VM whose two vCPUs the host moves between one chiplet and two (each with its
 * own L3), the first two change several-fold for minutes at a time.
 *
 *   cc -O2 -pthread cpu_probe.c -o cpu_probe && ./cpu_probe 0 1
 *   {"cpus": [0, 1], "round_trip_ns": 84.1, "peer_copy_gbps": 60.2,
 *    "overwrite_read_gbps": 55.5, "overwrite_own_gbps": 62.0}
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_util.h"

enum { kTrips = 100000, kCopies = 200, kBytes = 1 << 20 };

static _Alignas(64) atomic_int flag;
static _Alignas(64) atomic_int turn;
static char *shared_buf, *own_buf, *peer_buf;
static int other_cpu;

/* The other CPU: answers each ping, then writes the buffer before each copy. */
static void *peer(void *arg) {
  (void)arg;
  pin(other_cpu);
  for (int i = 0; i < kTrips; ++i) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
  }
  for (int r = 0; r < kCopies; ++r) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * r) {
    }
    memset(shared_buf, r & 0xff, kBytes);
    atomic_store_explicit(&turn, 2 * r + 1, memory_order_release);
  }
  /* Then reads the buffer before each overwrite (odd rounds leave it alone). */
  for (int r = 0; r < 2 * kCopies; ++r) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * kCopies + 2 * r) {
    }
    if (r % 2 == 0) memcpy(peer_buf, shared_buf, kBytes);
    atomic_store_explicit(&turn, 2 * kCopies + 2 * r + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  const int cpu = argc > 1 ? atoi(argv[1]) : 0;
  other_cpu = argc > 2 ? atoi(argv[2]) : 1;
  shared_buf = aligned_alloc(4096, kBytes);
  own_buf = aligned_alloc(4096, kBytes);
  peer_buf = aligned_alloc(4096, kBytes);
  memset(shared_buf, 0, kBytes);
  memset(own_buf, 0, kBytes);
  memset(peer_buf, 0, kBytes);
  pin(cpu);
  pthread_t t;
  if (pthread_create(&t, NULL, peer, NULL) != 0) return 1;
  double start = now_ns();
  for (int i = 0; i < kTrips; ++i) {
    atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double trip = (now_ns() - start) / kTrips;
  double copying = 0;
  long sink = 0;
  for (int r = 0; r < kCopies; ++r) {
    atomic_store_explicit(&turn, 2 * r, memory_order_release);
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * r + 1) {
    }
    const double c = now_ns();
    memcpy(own_buf, shared_buf, kBytes);
    copying += now_ns() - c;
    sink += own_buf[r];
  }
  double overwriting[2] = {0, 0};  /* [0]: after the peer read it; [1]: untouched */
  for (int r = 0; r < 2 * kCopies; ++r) {
    atomic_store_explicit(&turn, 2 * kCopies + 2 * r, memory_order_release);
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * kCopies + 2 * r + 1) {
    }
    const double c = now_ns();
    memcpy(shared_buf, own_buf, kBytes);
    overwriting[r % 2] += now_ns() - c;
  }
  pthread_join(t, NULL);
  printf("{\"cpus\": [%d, %d], \"round_trip_ns\": %.1f, \"peer_copy_gbps\": %.1f, "
         "\"overwrite_read_gbps\": %.1f, \"overwrite_own_gbps\": %.1f, \"check\": %ld}\n",
         cpu, other_cpu, trip, (double)kCopies * kBytes / copying,
         (double)kCopies * kBytes / overwriting[0], (double)kCopies * kBytes / overwriting[1],
         sink + peer_buf[0]);
  return 0;
}
