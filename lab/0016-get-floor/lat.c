// Dependent-load latency: a random cyclic permutation over N 64-byte lines in a region of
// SIZE bytes (anonymous, 4 KiB pages unless argv[2] == "thp"), chased for STEPS loads.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t size=(size_t)atol(argv[1])<<20; int thp=argc>2&&!strcmp(argv[2],"thp");
  size_t lines=size/64;
  char*m=mmap(0,size,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(m,size,thp?MADV_HUGEPAGE:MADV_NOHUGEPAGE);
  uint32_t*perm=malloc(lines*4); for(size_t i=0;i<lines;i++)perm[i]=i;
  srand(1); for(size_t i=lines-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1);uint32_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
  for(size_t i=0;i<lines;i++){*(uint64_t*)(m+(size_t)perm[i]*64)=(uint64_t)perm[(i+1)%lines]*64;}
  free(perm);
  size_t steps=5000000; for(int r=0;r<3;r++){
    uint64_t p=0; double t=now(); for(size_t i=0;i<steps;i++)p=*(volatile uint64_t*)(m+p);
    double dt=now()-t; printf("%s %zu MiB: %.1f ns per dependent load (p=%lu)\n",thp?"thp":"4k",size>>20,dt/steps*1e9,(unsigned long)p);}
  return 0;}
