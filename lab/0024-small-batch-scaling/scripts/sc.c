#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){ int fd=open("/tmp/senju-sc.bin",O_RDWR|O_CREAT|O_TRUNC,0600); size_t L=64<<20; fallocate(fd,0,0,L);
 char*m=mmap(0,L,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); for(size_t i=0;i<L;i+=4096)m[i]=1;
 int N=4000; double t=now(); for(int i=0;i<N;i++) fallocate(fd,0,(size_t)i*12288%L,12288); double a=now()-t;
 t=now(); for(int i=0;i<N;i++) madvise(m+(size_t)i*12288%L,12288,23); double b=now()-t;
 printf("fallocate(allocated 12K) %.2f us, populate(resident 12K) %.2f us\n",a/N*1e6,b/N*1e6);}
