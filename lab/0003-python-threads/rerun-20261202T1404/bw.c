#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define SRC (128u<<20)
#define BLK (64u<<10)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static volatile int go; static double dur=0.5;
typedef struct {char*src;char*dst;long n;} A;
static void* w(void*p){A*a=p; while(!go); double t0=now(); long n=0; size_t off=0;
  while(now()-t0<dur){ for(int i=0;i<16;i++){memcpy(a->dst,a->src+off,BLK); off=(off+BLK*7)%SRC; n++;} }
  a->n=n; return 0;}
int main(int c,char**v){int T=atoi(v[1]); pthread_t th[16]; A a[16];
 for(int i=0;i<T;i++){a[i].src=malloc(SRC); memset(a[i].src,i+1,SRC); a[i].dst=malloc(BLK); memset(a[i].dst,0,BLK);}
 for(int i=0;i<T;i++)pthread_create(&th[i],0,w,&a[i]); double t0=now(); go=1; long n=0;
 for(int i=0;i<T;i++){pthread_join(th[i],0); n+=a[i].n;} double el=now()-t0;
 printf("T=%d %.0f copies/s %.1f GB/s\n",T,n/el,n*(double)BLK/el/1e9); return 0;}
