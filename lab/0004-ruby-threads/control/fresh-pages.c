/*
 * Control for the 64 KiB cases of labs 0003 and 0004: how fast can this machine put fresh
 * pages into a file's page cache, from one thread and from two?
 *
 * A file on the current directory's file system is allocated with fallocate (as senju grows
 * its files), mapped MAP_SHARED, and written in 64 KiB pieces: by one thread over the whole
 * size, then by two threads over one half each. No database is involved; every page is
 * fresh, as it is for a store that appends 64 KiB values. Rounds alternate 1 and 2 threads;
 * the medians and the 2/1 ratio are printed.
 *
 *   cc -O2 -pthread fresh-pages.c -o fresh-pages
 *   ./fresh-pages [rounds=7] [MiB=512]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PIECE (64 * 1024)
#define PATH "fresh-pages.tmp"

static char *map;
static size_t size;
static int nthreads;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *writer(void *arg) {
    size_t part = size / (size_t)nthreads, from = (size_t)(long)arg * part;
    for (size_t off = from; off < from + part; off += PIECE) memset(map + off, 'v', PIECE);
    return NULL;
}

/* One run: a new file of `size` bytes written by `threads` threads; returns MiB/s. */
static double run(int threads) {
    unlink(PATH);
    int fd = open(PATH, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || fallocate(fd, 0, 0, (off_t)size) != 0) {
        perror("fresh-pages: open/fallocate");
        exit(1);
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("fresh-pages: mmap");
        exit(1);
    }
    nthreads = threads;
    pthread_t t[2];
    double t0 = now();
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, writer, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double mibs = (double)size / (1 << 20) / (now() - t0);
    munmap(map, size);
    close(fd);
    unlink(PATH);
    return mibs;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    size = (size_t)(argc > 2 ? atol(argv[2]) : 512) << 20;
    if (rounds < 1 || rounds > 99) rounds = 7;
    double one[99], two[99], ratio[99];
    for (int r = 0; r < rounds; r++) {
        one[r] = run(1);
        two[r] = run(2);
        ratio[r] = two[r] / one[r];
        printf("round %d: 1 thread %.0f MiB/s, 2 threads %.0f MiB/s, x%.2f\n", r + 1, one[r],
               two[r], ratio[r]);
    }
    qsort(one, (size_t)rounds, sizeof one[0], cmp);
    qsort(two, (size_t)rounds, sizeof two[0], cmp);
    qsort(ratio, (size_t)rounds, sizeof ratio[0], cmp);
    printf("median: 1 thread %.0f MiB/s, 2 threads %.0f MiB/s; 2/1 x%.2f [%.2f-%.2f]\n",
           one[rounds / 2], two[rounds / 2], ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
    return 0;
}
