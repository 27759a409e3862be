/*
 * allreduce_ref.c - the plain MPI limit for bench_distributed.py: MPI_Allreduce
 * (in place, SUM) of `count` floats, timed by rank 0 between barriers.
 *
 *     mpicc -O2 allreduce_ref.c -o allreduce_ref
 *     mpirun -np 2 ./allreduce_ref COUNT WARMUP ITERS [CHUNK]
 *
 * With CHUNK, the reduction goes in calls of at most CHUNK floats, as
 * ember's all_reduce does. The buffer is memory as ember's allocator gives
 * it for large tensors (2 MiB-aligned, MADV_HUGEPAGE), so that both move
 * the same kind of pages. Prints one line per iteration on rank 0:
 * "ms <milliseconds>".
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static float *huge_alloc(size_t bytes) {
    size_t huge = (size_t)2 << 20, size = (bytes + huge - 1) & ~(huge - 1);
    char *raw = mmap(NULL, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *start = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(start, size, MADV_HUGEPAGE);
    return (float *)start;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long count = argc > 1 ? atol(argv[1]) : 16 << 20;
    int warm = argc > 2 ? atoi(argv[2]) : 3, iters = argc > 3 ? atoi(argv[3]) : 10;
    long chunk = argc > 4 ? atol(argv[4]) : count;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *buf = huge_alloc(sizeof(float) * (size_t)count);
    if (!buf) return 1;
    for (long i = 0; i < count; i++) buf[i] = (float)(rank + 1) * 1e-3f;
    for (int it = 0; it < warm + iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (long at = 0; at < count; at += chunk)
            MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)(count - at < chunk ? count - at : chunk), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        t = MPI_Wtime() - t;
        if (rank == 0 && it >= warm) printf("ms %.4f\n", t * 1e3);
    }
    MPI_Finalize();
    return 0;
}
