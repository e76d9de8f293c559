#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  size_t n = argc>1? atol(argv[1]) : 1340000;
  char*a=aligned_alloc(4096,n+4096),*b=aligned_alloc(4096,n+4096);
  memset(a,1,n);memset(b,2,n);
  int gaps[]={0,50,200,1000,3000,8000};
  for(int g=0;g<6;g++){
    double tot[41]; int k=0;
    for(int r=0;r<41;r++){
      memcpy(b,a,n);
      double t0=now(); while(now()-t0<gaps[g]) ; // spin, touching nothing
      double t1=now(); memcpy(b,a,n); double t2=now();
      tot[k++]=t2-t1;
    }
    // median
    for(int i=0;i<k;i++)for(int j=i+1;j<k;j++)if(tot[j]<tot[i]){double x=tot[i];tot[i]=tot[j];tot[j]=x;}
    printf("gap %5d us: copy %zu B median %.1f us (%.1f GB/s) p10 %.1f p90 %.1f\n",gaps[g],n,tot[k/2],n/tot[k/2]/1e3,tot[k/10],tot[k*9/10]);
  }
}
