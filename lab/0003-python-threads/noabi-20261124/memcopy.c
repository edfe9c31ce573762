// 64 KiB copies out of a large source (as a 64 KiB get copies a value out of the map) into a
// fresh malloc'd buffer each time (as a new bytes object), T threads, fixed total work.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define VAL (64 * 1024)
static char *src; static size_t nvals; static long per_thread;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void *run(void *arg) {
  unsigned long x = (unsigned long)arg * 2654435761u + 1; unsigned long sum = 0;
  for (long i = 0; i < per_thread; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    char *d = malloc(VAL); memcpy(d, src + (x % nvals) * VAL, VAL); sum += d[100]; free(d);
  }
  return (void *)sum;
}
int main(int argc, char **argv) {
  int t = atoi(argv[1]); long total = atol(argv[2]); size_t mb = argc > 3 ? atol(argv[3]) : 512;
  nvals = mb * 1024 * 1024 / VAL; src = malloc(nvals * VAL); memset(src, 1, nvals * VAL);
  per_thread = total / t; pthread_t th[64]; double t0 = now();
  for (long i = 0; i < t; i++) pthread_create(&th[i], 0, run, (void *)i);
  for (int i = 0; i < t; i++) pthread_join(th[i], 0);
  double el = now() - t0; printf("T=%d %.0f copies/s %.2f GB/s\n", t, total / el, total * (double)VAL / el / 1e9);
  return 0;
}
