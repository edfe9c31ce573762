/*
 * Scheduler control for lab 0001's release-and-reacquire fairness (target 2b).
 *
 * T threads run the same ~1.5 us busy loop as the benchmark's critical section, but with no
 * lock at all, for 200 ms; each counts its loops. min/max of the counts is the fairness the
 * CPU scheduler alone gives: a lock whose acquisitions follow CPU time cannot be fairer than
 * this over the same window, and one that is fairer must hand the lock to threads that are
 * not running (and pay for it in throughput).
 *
 *   cc -O2 -pthread sched-fairness.c -o sched-fairness
 *   ./sched-fairness [rounds=5] [ms=200] [threads=2,4,8,16 as separate args...]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 256

static atomic_int go, stop;
static long counts[MAX_THREADS];
static long loop_turns;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void work(long turns) {
    for (volatile long i = 0; i < turns; i++) {
    }
}

static void *worker(void *arg) {
    long id = (long)arg, n = 0;
    while (!atomic_load(&go)) {
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        work(loop_turns);
        n++;
    }
    counts[id] = n;
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    int ms = argc > 2 ? atoi(argv[2]) : 200;
    int default_threads[] = {2, 4, 8, 16};
    int nthreads = argc > 3 ? argc - 3 : 4;
    /* Calibrate the loop to about 1.5 us, as the benchmark's --handoff-cs-ns default. */
    loop_turns = 1000;
    double t0 = now();
    for (int i = 0; i < 2000; i++) work(loop_turns);
    double per = (now() - t0) / 2000.0;
    loop_turns = (long)(loop_turns * 1.5e-6 / per);
    printf("busy loop: %ld turns ~ 1.5 us; %d rounds of %d ms\n", loop_turns, rounds, ms);
    printf("| T | fairness (min/max) median | range | every round |\n|---:|---:|---|---|\n");
    for (int ti = 0; ti < nthreads; ti++) {
        int t = argc > 3 ? atoi(argv[3 + ti]) : default_threads[ti];
        if (t < 1 || t > MAX_THREADS) return 2;
        double f[64];
        char every[1024] = "";
        int len = 0;
        for (int r = 0; r < rounds && r < 64; r++) {
            pthread_t th[MAX_THREADS];
            atomic_store(&go, 0);
            atomic_store(&stop, 0);
            for (long i = 0; i < t; i++) pthread_create(&th[i], NULL, worker, (void *)i);
            atomic_store(&go, 1);
            struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
            nanosleep(&d, NULL);
            atomic_store(&stop, 1);
            long lo = -1, hi = 0;
            for (int i = 0; i < t; i++) {
                pthread_join(th[i], NULL);
                if (lo < 0 || counts[i] < lo) lo = counts[i];
                if (counts[i] > hi) hi = counts[i];
            }
            f[r] = hi ? (double)lo / (double)hi : 0;
            len += snprintf(every + len, sizeof every - (size_t)len, "%s%.2f", r ? " " : "", f[r]);
        }
        double sorted[64];
        for (int r = 0; r < rounds; r++) sorted[r] = f[r];
        qsort(sorted, (size_t)rounds, sizeof(double), cmp);
        printf("| %d | %.2f | %.2f-%.2f | %s |\n", t, sorted[rounds / 2], sorted[0],
               sorted[rounds - 1], every);
    }
    return 0;
}
