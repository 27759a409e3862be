/*
 * allreduce_ref.c - the plain MPI limit for bench_distributed.py: MPI_Allreduce
 * (in place, SUM) of `count` floats, timed by rank 0 between barriers.
 *
 *     mpicc -O2 allreduce_ref.c -o allreduce_ref
 *     mpirun -np 2 ./allreduce_ref COUNT WARMUP ITERS [CHUNK]
 *
 * With CHUNK, the reduction goes in calls of at most CHUNK floats, as
 * ember's all_reduce does. Prints one line per iteration on rank 0:
 * "ms <milliseconds>".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long count = argc > 1 ? atol(argv[1]) : 16 << 20;
    int warm = argc > 2 ? atoi(argv[2]) : 3, iters = argc > 3 ? atoi(argv[3]) : 10;
    long chunk = argc > 4 ? atol(argv[4]) : count;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *buf = malloc(sizeof(float) * (size_t)count);
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
    free(buf);
    MPI_Finalize();
    return 0;
}
