#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
static _Atomic int word; static _Atomic long sent;
static long now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static long lat[2000];
static void* waiter(void*a){ for(int i=0;i<2000;i++){ while(atomic_load(&word)==0) syscall(SYS_futex,&word,FUTEX_WAIT_PRIVATE,0,0,0,0); lat[i]=now()-atomic_load(&sent); atomic_store(&word,0);} return 0;}
static int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
int main(int c,char**v){ long gap=atol(v[1]); pthread_t t; pthread_create(&t,0,waiter,0);
 for(int i=0;i<2000;i++){ long s=now(); while(now()-s<gap); /* busy so this cpu stays busy */ while(atomic_load(&word)!=0); atomic_store(&sent,now()); atomic_store(&word,1); syscall(SYS_futex,&word,FUTEX_WAKE_PRIVATE,1,0,0,0);} pthread_join(t,0);
 qsort(lat,2000,sizeof(long),cmp); printf("gap %ld us: wake latency p10 %ld p50 %ld p90 %ld p99 %ld max %ld us\n",gap/1000,lat[200]/1000,lat[1000]/1000,lat[1800]/1000,lat[1980]/1000,lat[1999]/1000);}
