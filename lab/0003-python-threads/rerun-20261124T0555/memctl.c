// Memory-bound control: each thread does N random read-modify-writes of 8-byte words in its
// own 256 MiB array (xorshift index, independent misses); prints Mops/s for 1 and 2 threads.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define WORDS (32u << 20)
#define N 20000000u
static uint64_t *arr[2];
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *work(void *p) {
  uint64_t *a = arr[(intptr_t)p], x = 88172645463325252ull + (intptr_t)p;
  for (uint32_t i = 0; i < N; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; a[x & (WORDS - 1)] += i; }
  return NULL;
}
static double run(int t) {
  pthread_t th[2]; double t0 = now();
  for (intptr_t i = 0; i < t; i++) pthread_create(&th[i], NULL, work, (void *)i);
  for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
  return t * (double)N / (now() - t0) / 1e6;
}
int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  for (int i = 0; i < 2; i++) { arr[i] = malloc(WORDS * 8ul); memset(arr[i], 1, WORDS * 8ul); }
  for (int r = 0; r < rounds; r++) { double a = run(1), b = run(2); printf("round %d: 1 thread %.1f Mops/s, 2 threads %.1f, x%.2f\n", r + 1, a, b, b / a); }
  return 0;
}
