// What one hand-off between two threads costs on this machine: a ping-pong over a
// shared word, (a) both sides spinning, (b) both sides sleeping on a futex the other
// wakes. A tf_hvd op crosses threads several times (the caller's op to the background
// thread, rank to rank, back to TensorFlow's thread); MPI's in-place allreduce spins
// in the caller's thread and crosses none.
//   cc -O2 -pthread -o wake_probe wake_probe.c && ./wake_probe [rounds]
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t word;
static int rounds = 20000, sleeping;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void wait_for(uint32_t v) {
  for (;;) {
    uint32_t seen = atomic_load(&word);
    if (seen == v) return;
    if (sleeping) syscall(SYS_futex, &word, FUTEX_WAIT, seen, NULL, NULL, 0);
  }
}

static void set(uint32_t v) {
  atomic_store(&word, v);
  if (sleeping) syscall(SYS_futex, &word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void* peer(void* arg) {
  (void)arg;
  for (int i = 0; i < rounds; ++i) {
    wait_for(2 * i + 1);
    set(2 * i + 2);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) rounds = atoi(argv[1]);
  for (sleeping = 0; sleeping < 2; ++sleeping) {
    atomic_store(&word, 0);
    pthread_t t;
    pthread_create(&t, NULL, peer, NULL);
    double t0 = now();
    for (int i = 0; i < rounds; ++i) {
      set(2 * i + 1);
      wait_for(2 * i + 2);
    }
    double dt = now() - t0;
    pthread_join(t, NULL);
    printf("%s: %.2f us per hand-off (round trip / 2), %d round trips\n",
           sleeping ? "futex sleep/wake" : "spinning", dt / rounds / 2 * 1e6, rounds);
  }
  return 0;
}
