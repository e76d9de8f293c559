// process_vm_readv against memcpy: a process reads N MiB of its (forked, idle) child's
// buffer in pieces of K bytes, best of 20, and memcpys the same bytes.
//   cc -O2 cma_rate.c -o cma_rate && ./cma_rate 8 131072   (MiB, piece bytes)
#define _GNU_SOURCE
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){ size_t n=(argc>1?atol(argv[1]):8)<<20; size_t chunk=(argc>2?atol(argv[2]):n);
 char*src=malloc(n); memset(src,1,n); char*dst=malloc(n); memset(dst,0,n);
 int p[2]; pipe(p); pid_t c=fork(); if(c==0){ pause(); return 0; }
 /* child has a COW copy of src at the same address */
 double best=1e9,bm=1e9;
 for(int it=0;it<20;it++){ double t0=now(); for(size_t o=0;o<n;o+=chunk){ struct iovec l={dst+o,chunk}, r={src+o,chunk}; if(process_vm_readv(c,&l,1,&r,1,0)<0){perror("readv");return 1;} } double t=now()-t0; if(t<best)best=t;
  t0=now(); memcpy(dst,src,n); t=now()-t0; if(t<bm)bm=t; }
 printf("%zu MiB chunk %zu KiB: readv %.0f us (%.1f GB/s), memcpy %.0f us (%.1f GB/s)\n", n>>20, chunk>>10, best*1e6, n/best/1e9, bm*1e6, n/bm/1e9);
 kill(c,9); return 0; }
