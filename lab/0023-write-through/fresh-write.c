/* Lab 0023: writing 8,000 values of 64 KiB + 64 bytes into fresh space of a file that was
 * fallocate'd and mapped MAP_SHARED, through the map (mode 0: memcpy, each 4 KiB page
 * write-faulted and zero-filled first) or through the file (mode 1: pwrite), then reading
 * each value back through the map. Prints the CPU time (user + system) of each phase.
 *   gcc -O2 -o fresh-write fresh-write.c && ./fresh-write 0 && ./fresh-write 1
 *   ./fresh-write 0 pre && ./fresh-write 1 pre     # the pages present before the timed writes
 * The file is /tmp/pw/f.db (mkdir -p /tmp/pw first). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
static double cpu(void){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6+r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); size_t n=8000, vs=65536+64; size_t len=n*vs+(1<<20);
  char path[]="/tmp/pw/f.db"; unlink(path);
  int fd=open(path,O_RDWR|O_CREAT,0644); if(fallocate(fd,0,0,len)){perror("fallocate");}
  char*m=mmap(0,len,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
  char*v=malloc(vs); memset(v,'x',vs);
  if(argc>2) for(size_t i=0;i<n;i++) memset(m+i*vs,1,vs);   /* "pre": pages present first */
  double c0=cpu(),t0=now();
  for(size_t i=0;i<n;i++){ size_t off=i*vs; v[0]=i;
    if(mode==0) memcpy(m+off,v,vs);
    else { if(pwrite(fd,v,vs,off)!=vs){perror("pw");return 1;} }
  }
  double c1=cpu(),t1=now();
  long sum=0; for(size_t i=0;i<n;i++){ char buf[256]; memcpy(buf,m+i*vs+4096,256); sum+=buf[3]; char*b=malloc(vs); memcpy(b,m+i*vs,vs); sum+=b[100]; free(b);}
  double c2=cpu(),t2=now();
  printf("mode %d write: %.3f s cpu %.3f wall (%.0f MB/s cpu); read: %.3f cpu %.3f wall sum %ld\n",mode,c1-c0,t1-t0,n*vs/1e6/(c1-c0),c2-c1,t2-t1,sum);
  unlink(path); return 0;}
