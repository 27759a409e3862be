/*
 * parallel.h - the one thread pool every ember kernel uses.
 *
 * Between jobs a worker spins for at most 50 us (waking a sleeping thread
 * costs as much as a small op), then sleeps on a condition variable;
 * em_parallel_park() sends spinning workers to sleep at once, which the
 * matrix-vector kernels do before calling OpenBLAS so its threads get the
 * cores (GEMMs run on this pool instead: runtime/cpu/matmul.c).
 * The calling thread takes a share of every job. A parallel_for issued from
 * inside a job runs inline, and so does a job of at most 32 grains while the
 * workers sleep or are parked (waking them would cost more than it saves).
 */
#ifndef EMBER_PARALLEL_H
#define EMBER_PARALLEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Processes the half-open range [begin, end). */
typedef void (*em_parallel_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs fn over [0, n) in contiguous pieces of at least `grain` items, spread
 * over the pool; returns when all are done. n <= grain runs inline. */
void em_parallel_for(int64_t n, int64_t grain, em_parallel_fn fn, void *ctx);

/* Runs fn over [0, n), every item a large piece of work (a block of a
 * GEMM): the pool wakes sleeping workers for it however few the items. */
void em_parallel_for_heavy(int64_t n, em_parallel_fn fn, void *ctx);

/* Ends the idle spinning of the pool's workers until the next job. */
void em_parallel_park(void);

/* Threads used by em_parallel_for, the caller included. Default: the CPUs this
 * process may run on, or EMBER_NUM_THREADS. */
int em_get_num_threads(void);
/* n >= 1. Takes effect for the next job. */
void em_set_num_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
