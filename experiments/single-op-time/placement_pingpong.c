// A cache line handed back and forth between CPUs 0 and 1 (two pinned threads spinning):
// ~30-45 ns when the host keeps the two vCPUs near, ~150-180 ns far; the host moves them
// every few minutes.   cc -O2 -pthread placement_pingpong.c -o pp && ./pp
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static _Atomic long word __attribute__((aligned(64)));
static int N = 200000;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void* peer(void*a){pin(1);for(long i=1;i<=N;i++){while(atomic_load(&word)!=2*i-1);atomic_store(&word,2*i);}return 0;}
int main(){pthread_t t;pin(0);pthread_create(&t,0,peer,0);double t0=now();for(long i=1;i<=N;i++){atomic_store(&word,2*i-1);while(atomic_load(&word)!=2*i);}double t1=now();pthread_join(t,0);
/* bandwidth: copy 8 MiB written by cpu1, read by cpu0 */
printf("line ping-pong %.0f ns/handoff\n",(t1-t0)/N/2*1e9);return 0;}
