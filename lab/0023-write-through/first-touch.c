/* Lab 0023: T threads each map fresh anonymous memory and write every byte of it once
 * (TOTAL MiB in all); prints MB/s. `sleep 6` before a run lets the guest report the memory
 * it freed to the host (virtio-balloon free page reporting), after which it is cold again.
 *   gcc -O2 -pthread -o first-touch first-touch.c && ./first-touch 1 1024 && ./first-touch 2 1024 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static size_t per; 
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void*run(void*a){char*m=mmap(0,per,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);memset(m,1,per);munmap(m,per);return 0;}
int main(int argc,char**argv){int t=atoi(argv[1]);size_t total=(size_t)atoi(argv[2])<<20; per=total/t;
 pthread_t th[16];double t0=now();for(int i=0;i<t;i++)pthread_create(&th[i],0,run,0);for(int i=0;i<t;i++)pthread_join(th[i],0);
 double dt=now()-t0; printf("threads %d: %.0f MB/s\n",t,total/1e6/dt);return 0;}
