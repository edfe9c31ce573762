#include <pthread.h>
#include <stdio.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn = 0; enum { N = 20000 };
static void *other(void *a) { for (int i = 0; i < N; i++) { pthread_mutex_lock(&m); while (turn != 1) pthread_cond_wait(&c, &m); turn = 0; pthread_cond_signal(&c); pthread_mutex_unlock(&m);} return 0; }
int main(void) { pthread_t t; struct timespec a, b; pthread_create(&t, 0, other, 0); clock_gettime(CLOCK_MONOTONIC, &a);
 for (int i = 0; i < N; i++) { pthread_mutex_lock(&m); turn = 1; pthread_cond_signal(&c); while (turn != 0) pthread_cond_wait(&c, &m); pthread_mutex_unlock(&m);} clock_gettime(CLOCK_MONOTONIC, &b);
 pthread_join(t, 0); printf("round trip %.1f us\n", ((b.tv_sec-a.tv_sec)*1e9 + (b.tv_nsec-a.tv_nsec))/N/1e3); }
