// How much work may separate two independent cache misses before the CPU stops overlapping
// them? Each "operation" hashes its number i, loads one 8-byte slot of a 100 MiB table at the
// hash (a DRAM miss: the table is 3x the L3), then runs F dependent ALU steps on the loaded
// value (the rest of a get: probing, the record, its checksum, all waiting for the slot).
// Operation i+1's address does not depend on operation i, so an out-of-order core can start
// its miss early if both fit in its reorder window. Variant "lock" adds one locked
// read-modify-write per operation on a private line (like an epoch pin); variant "fence"
// an mfence; variant "independent" runs the F steps on the hash instead, work that does not
// wait for the slot.
//   cc -O2 -o overlap overlap.c && ./overlap [MiB [ops [F]]]   (one line per F and variant)
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// F dependent steps on v (each an add and a rotate: 2 instructions, 1 cycle apart).
#define STEP(v) __asm__ volatile("add $0x9e37, %0\n\trol $7, %0" : "+r"(v))

static uint64_t counter __attribute__((aligned(64)));

static uint64_t run(const uint64_t *t, size_t n, size_t ops, int f, int variant) {
    uint64_t sum = 0;
    for (size_t i = 0; i < ops; i++) {
        uint64_t h = mix(i);
        uint64_t v = t[(h >> 20) % n];
        if (variant == 3) {
            // Work that does not wait for the slot (the next key's formatting and hash).
            uint64_t w = h;
            for (int k = 0; k < f; k++) STEP(w);
            v += w;
        } else {
            for (int k = 0; k < f; k++) STEP(v);
        }
        if (variant == 1) __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
        if (variant == 2) __atomic_thread_fence(__ATOMIC_SEQ_CST);
        sum += v;
    }
    return sum;
}

int main(int argc, char **argv) {
    size_t size = (size_t)(argc > 1 ? atol(argv[1]) : 100) << 20;
    size_t n = size / 8;
    uint64_t *t = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(t, size, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < n; i++) t[i] = mix(i + 12345);
    size_t ops = argc > 2 ? (size_t)atol(argv[2]) : 4000000;
    int only_f = argc > 3 ? atoi(argv[3]) : -1;
    int fs[] = {0, 25, 50, 75, 100, 125, 150, 200, 300};
    const char *names[] = {"plain", "lock", "fence", "independent"};
    printf("variant F ns_per_op (median of 3 runs of %zu operations)\n", ops);
    for (int variant = 0; variant < 4; variant++) {
        for (size_t j = 0; j < sizeof fs / sizeof fs[0]; j++) {
            if (only_f >= 0 && fs[j] != only_f) continue;
            double best[3];
            uint64_t s = 0;
            for (int r = 0; r < 3; r++) {
                double t0 = now();
                s += run(t, n, ops, fs[j], variant);
                best[r] = (now() - t0) / ops * 1e9;
            }
            // median of 3
            double a = best[0], b = best[1], c = best[2], m;
            m = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
            printf("%s %d %.1f (sum %lu)\n", names[variant], fs[j], m,
                   (unsigned long)(s & 0xff));
        }
    }
    return 0;
}
