/* What MADV_COLLAPSE costs on 16 MiB of 4 KiB pages, the first time and after (finding 11).
   gcc -O2 -o /tmp/collapse_cost collapse_cost.c && /tmp/collapse_cost */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <stdint.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(){
  size_t n=16<<20; char*p=malloc(n+ (2<<20)); memset(p,1,n+(2<<20));
  uintptr_t a=((uintptr_t)p+(2<<20)-1)&~(uintptr_t)((2<<20)-1);
  for(int i=0;i<4;i++){double t=now(); int r=madvise((void*)a,n,25); double e=now()-t; printf("collapse %d: rc %d %.1f us\n",i,r,e);}
  FILE*f=fopen("/proc/self/smaps_rollup","r"); char l[256]; while(fgets(l,256,f)) if(strstr(l,"AnonHuge")) fputs(l,stdout);
}
