/*
 * precompile.c - every eager kernel the CUDA device generates, compiled to
 * PTX ahead of its first use (em_cuda_precompile in codegen_cuda.h).
 *
 * The device compiles each kernel the first time a process uses it, one
 * NVRTC call each (a tenth of a second or more), and keeps the PTX in the
 * disk cache, so a new machine pays for every kernel once. Here the same
 * sources the device asks for (one kernel spec per module, exactly as
 * the CUDA device makes them (cuda/), so the cache keys are the same) are compiled
 * by a pool of threads: elementwise ops and casts, reductions, ops along
 * lines, gather/scatter, advanced indexing, the window kernels, the
 * optimizers' steps and sorting. NVRTC's calls are thread-safe, the PTX cache's
 * table takes a lock, and the disk cache writes whole entries by rename.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"

typedef enum {
    JOB_EW,
    JOB_REDUCE,
    JOB_LINE,
    JOB_INDEX,
    JOB_ADV,
    JOB_WINDOW,
    JOB_OPTIM,
    JOB_SORT
} job_kind;

typedef struct {
    job_kind kind;
    union {
        em_cuda_ew_kernel ew;
        em_cuda_reduce_kernel reduce;
        em_cuda_line_kernel line;
        em_cuda_index_kernel index;
        em_cuda_adv_kernel adv;
    } k;
} job;

typedef struct {
    job *jobs;
    int n, next, sm;
    int skipped, compiled, failed;
    char first_error[512];
    pthread_mutex_t lock;
} pool;

static const em_dtype stored[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_I64, EM_DTYPE_I32,
                                  EM_DTYPE_I16, EM_DTYPE_I8,  EM_DTYPE_U8,  EM_DTYPE_BOOL,
                                  EM_DTYPE_F16, EM_DTYPE_BF16};
#define N_STORED       ((int)(sizeof stored / sizeof *stored))
#define MOST_PER_DTYPE (8 * EM_OP_COUNT)

/* Every job, or NULL when out of memory; *n their count. */
static job *list_jobs(int *n) {
    int cap = N_STORED * (3 * MOST_PER_DTYPE + N_STORED) + 8 * EM_OP_COUNT, count = 0;
    job *jobs = calloc((size_t)cap, sizeof *jobs);
    void *ks = malloc(MOST_PER_DTYPE * sizeof(em_cuda_ew_kernel) +
                      MOST_PER_DTYPE * sizeof(em_cuda_reduce_kernel));
    if (!jobs || !ks) {
        free(jobs);
        free(ks);
        return NULL;
    }
    for (int d = 0; d < N_STORED; d++) {
        em_cuda_ew_kernel *ew = ks;
        int m = em_cuda_ew_uniform(stored[d], ew, MOST_PER_DTYPE);
        for (int i = 0; i < m && i < MOST_PER_DTYPE && count < cap; i++)
            jobs[count++] = (job){JOB_EW, {.ew = ew[i]}};
        for (int to = 0; to < N_STORED && count < cap; to++) /* (casts, contiguous() and copies) */
            jobs[count++] = (job){JOB_EW, {.ew = {EM_OP_CAST, 1, {stored[d]}, stored[to]}}};
        em_cuda_reduce_kernel *rk = ks;
        m = em_cuda_reduce_all(stored[d], rk, MOST_PER_DTYPE);
        for (int i = 0; i < m && i < MOST_PER_DTYPE && count < cap; i++)
            jobs[count++] = (job){JOB_REDUCE, {.reduce = rk[i]}};
        em_cuda_line_kernel *lk = ks;
        m = em_cuda_line_all(stored[d], lk, MOST_PER_DTYPE);
        for (int i = 0; i < m && i < MOST_PER_DTYPE && count < cap; i++)
            jobs[count++] = (job){JOB_LINE, {.line = lk[i]}};
    }
    em_cuda_index_kernel *ik = ks;
    int m = em_cuda_index_all(ik, MOST_PER_DTYPE);
    for (int i = 0; i < m && i < MOST_PER_DTYPE && count < cap; i++)
        jobs[count++] = (job){JOB_INDEX, {.index = ik[i]}};
    em_cuda_adv_kernel *ak = ks;
    m = em_cuda_adv_all(ak, MOST_PER_DTYPE);
    for (int i = 0; i < m && i < MOST_PER_DTYPE && count < cap; i++)
        jobs[count++] = (job){JOB_ADV, {.adv = ak[i]}};
    if (count < cap) jobs[count++] = (job){JOB_WINDOW, {.index = {0}}};
    if (count < cap) jobs[count++] = (job){JOB_OPTIM, {.index = {0}}};
    if (count < cap) jobs[count++] = (job){JOB_SORT, {.index = {0}}};
    free(ks);
    *n = count;
    return jobs;
}

static em_status compile_one(const job *j, int sm, char **ptx) {
    switch (j->kind) {
    case JOB_EW:
        return em_cuda_ew_ptx(&j->k.ew, 1, sm, ptx);
    case JOB_REDUCE:
        return em_cuda_reduce_ptx(&j->k.reduce, 1, sm, ptx);
    case JOB_LINE:
        return em_cuda_line_ptx(&j->k.line, 1, sm, ptx);
    case JOB_INDEX:
        return em_cuda_index_ptx(&j->k.index, 1, sm, ptx);
    case JOB_ADV:
        return em_cuda_adv_ptx(&j->k.adv, 1, sm, ptx);
    case JOB_WINDOW:
        return em_cuda_window_ptx(sm, ptx);
    case JOB_OPTIM:
        return em_cuda_optim_ptx(sm, ptx);
    default:
        return em_cuda_sort_ptx(sm, ptx);
    }
}

static void *worker(void *arg) {
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (i < 0) return NULL;
        const job *j = &p->jobs[i];
        /* (a cast the op table does not define is no kernel: skipped) */
        if (j->kind == JOB_EW && em_cuda_ew_check(&j->k.ew) != EM_OK) {
            em_clear_error();
            pthread_mutex_lock(&p->lock);
            p->skipped++;
            pthread_mutex_unlock(&p->lock);
            continue;
        }
        char *ptx = NULL;
        long before = em_cuda_ptx_compiles();
        em_status st = compile_one(j, p->sm, &ptx);
        long compiled = em_cuda_ptx_compiles() - before;
        free(ptx);
        pthread_mutex_lock(&p->lock);
        p->compiled += (int)compiled;
        if (st != EM_OK && p->failed++ == 0)
            strncpy(p->first_error, em_last_error(), sizeof p->first_error - 1);
        pthread_mutex_unlock(&p->lock);
    }
}

em_status em_cuda_precompile(int sm, int threads, em_cuda_precompile_counts *counts) {
    memset(counts, 0, sizeof *counts);
    if (sm < 50 || sm > 1000)
        return em_error(EM_ERR_VALUE, "cuda precompile: compute capability %d is not one", sm);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    pool p;
    memset(&p, 0, sizeof p);
    p.sm = sm;
    if (!(p.jobs = list_jobs(&p.n)))
        return em_error(EM_ERR_NOMEM, "out of memory listing the CUDA kernels");
    pthread_mutex_init(&p.lock, NULL);
    pthread_t tids[64];
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, worker, &p) != 0) break;
    if (started == 0) worker(&p); /* (no thread could start: this one does it all) */
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&p.lock);
    free(p.jobs);
    counts->kernels = p.n - p.skipped - p.failed;
    counts->compiled = p.compiled;
    counts->failed = p.failed;
    /* (the process keeps only what it uses: the disk has them all) */
    em_cuda_ptx_forget();
    if (p.failed)
        return em_error(EM_ERR_RUNTIME,
                        "cuda precompile: %d of %d kernels failed to compile; the first: %s",
                        p.failed, p.n - p.skipped, p.first_error);
    return EM_OK;
}
