/* A plain C histogram, the yardstick for cohort's histogram at the native entry (docs/README.md,
 * "Cooperative operators"): one thread counts n int32 indices into `bins` counters
 * branch-free, an index outside [0, bins) going to one spare counter, as cohort's kernel
 * does. The indices are uniform over [-1, bins + bins/8] like the operator's own inputs'
 * spread (some out of range). Best of 5 repetitions.
 *
 *   gcc -O2 -march=native -o /tmp/histogram_scalar benchmarks/histogram_scalar.c
 *   /tmp/histogram_scalar 4194304 256
 *
 * On the znver3 VM (docs/README.md): 4194304 x 256 took 3.23-3.26 ms in three runs alternating with
 * benchmarks/entry_time.py histogram packet 4194304x256 (medians 3.56-4.40 ms). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s N BINS\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]), bins = atol(argv[2]);
    if (n < 1 || bins < 1 || n > (1L << 30) || bins > (1L << 24)) {
        fprintf(stderr, "N must be in [1, 2^30] and BINS in [1, 2^24]\n");
        return 2;
    }
    int32_t *idx = malloc(n * sizeof *idx), *counts = malloc((bins + 1) * sizeof *counts);
    if (!idx || !counts) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    uint32_t s = 1;
    for (long i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        idx[i] = (int32_t)((s >> 8) % (uint32_t)(bins + bins / 8 + 2)) - 1;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        memset(counts, 0, (bins + 1) * sizeof *counts);
        double t = now();
        for (long i = 0; i < n; i++) {
            uint32_t v = (uint32_t)idx[i];
            counts[v < (uint32_t)bins ? v : (uint32_t)bins]++;
        }
        t = now() - t;
        if (t < best) best = t;
    }
    long total = 0;
    for (long b = 0; b < bins; b++) total += counts[b];
    printf("%ld x %ld: best of 5 %.3f ms (%ld counted in range)\n", n, bins, best * 1e3, total);
    return 0;
}
