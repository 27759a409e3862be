/*
 * parallel.c - a small thread pool: spin briefly, then sleep.
 *
 * One job at a time: the submitting thread publishes (fn, ctx, n, pieces),
 * bumps a generation counter and wakes sleeping workers. The pieces are
 * dealt out in contiguous shares, one per thread (the submitter's first,
 * then worker 1's, ...), each with its own atomic counter: a thread runs
 * its own share's pieces first, then claims what is left of the others',
 * so a worker that arrives late simply finds fewer pieces left.
 *
 * Why shares rather than one counter for all: a thread then handles the
 * same rows of a tensor in every job of the same size, and keeps finding
 * them in its own caches. On a 2-core EPYC VM, a layer norm over 8192x1024
 * rows (32 MiB in, 32 MiB out) took 0.94-0.97 ms with every piece up for
 * grabs, 0.77-0.78 ms with each thread's rows fixed, like OpenMP's static
 * schedule (0.79-0.83); the same loop under OpenMP with the two halves
 * swapped every call took 10-15% longer: part of the half a core read
 * last time is still near it (bench/RESULTS.md).
 *
 * Workers register as active (under the
 * lock) before touching the job and deregister after; a submitter returns
 * only when every piece is done and no worker is active, and publishes a job
 * only when no worker is active, so no straggler can read a job while it is
 * rewritten. A second thread submitting while a job runs (or a kernel
 * submitting from inside a job) runs its work inline instead of queueing,
 * which keeps the pool free of deadlocks by construction.
 *
 * Waiting. Waking a sleeping thread costs ~10 us here, as much as a whole
 * 64K-element op, so a worker that finished a job spins for up to
 * SPIN_NS watching for the next one before it sleeps, and a submitter
 * spins the same way for stragglers. The spin is bounded and em_parallel_park
 * ends it at once: the matrix-vector kernels park the pool before calling
 * OpenBLAS, whose own threads then have the cores to themselves (PyTorch's
 * OpenMP threads spin for ~200 ms and slow its BLAS calls down instead).
 * GEMMs run on this pool as heavy jobs (em_parallel_for_heavy), so after one
 * the workers are awake for the kernels that follow. A job of a few dozen
 * grains does not wake parked workers (a few grains: sleeping ones); a
 * heavy job does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "ember/parallel.h"

#define MAX_THREADS 256
#define SPIN_NS 50000         /* how long an idle thread watches for work */
#define PIECES_PER_THREAD 4   /* finer pieces let a thread help a late or slow one */
#define WAKE_GRAINS 32        /* a job this many grains or smaller does not wake parked workers */
#define WAKE_GRAINS_ASLEEP 8  /* nor this many sleeping ones */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER;

static int n_threads;       /* atomic; wanted, caller included (0: not decided yet) */
static int n_workers;       /* started */
static uint64_t generation; /* atomic; bumped per job (under lock) */
static int active;          /* atomic; workers inside run_pieces (changed under lock) */
static int parked;          /* atomic; set: spinning threads go to sleep now */
static int sleeping;        /* atomic; workers waiting on `wake` (changed under lock) */
/* Thread t's share of a job: pieces [next, end), claimed from the front by
 * whoever runs them; a cache line each, so claims do not contend. */
typedef struct {
    _Alignas(64) int64_t next; /* atomic */
    int64_t end;
} share;

static struct {
    em_parallel_fn fn;
    void *ctx;
    int64_t n, piece;
    int64_t n_pieces;
    int threads;      /* shares */
    int64_t finished; /* atomic: pieces done */
} job;
static share shares[MAX_THREADS];

static _Thread_local bool inside_job;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until cond(arg) holds, for at most SPIN_NS or until parked; returns
 * whether it held. */
static bool spin_until(bool (*cond)(void *), void *arg) {
    int64_t deadline = 0;
    for (int i = 0;; i++) {
        if (cond(arg)) return true;
        if (__atomic_load_n(&parked, __ATOMIC_RELAXED)) return false;
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (!deadline) deadline = t + SPIN_NS;
            else if (t > deadline) return false;
        }
        cpu_relax();
    }
}

/* Runs the pieces of share s that nobody has claimed yet. */
static void run_share(share *s) {
    for (;;) {
        int64_t p = __atomic_fetch_add(&s->next, 1, __ATOMIC_ACQ_REL);
        if (p >= s->end) return;
        int64_t b = p * job.piece, e = b + job.piece < job.n ? b + job.piece : job.n;
        job.fn(job.ctx, b, e);
        __atomic_add_fetch(&job.finished, 1, __ATOMIC_ACQ_REL);
    }
}

/* Thread `self` (0: the submitter) runs its own share, then helps with the
 * others', starting with the next thread's. */
static void run_pieces(int self) {
    for (int k = 0; k < job.threads; k++) run_share(&shares[(self + k) % job.threads]);
}

static bool new_job(void *seen) {
    return __atomic_load_n(&generation, __ATOMIC_ACQUIRE) != *(uint64_t *)seen;
}

static void *worker(void *arg) {
    int self = (int)(intptr_t)arg; /* 1, 2, ...: which share is this thread's own */
    inside_job = true;
    uint64_t seen = 0;
    for (;;) {
        spin_until(new_job, &seen);
        pthread_mutex_lock(&lock);
        if (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen) {
            __atomic_add_fetch(&sleeping, 1, __ATOMIC_RELAXED);
            while (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen) pthread_cond_wait(&wake, &lock);
            __atomic_sub_fetch(&sleeping, 1, __ATOMIC_RELAXED);
        }
        seen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
        __atomic_add_fetch(&active, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_unlock(&lock);
        run_pieces(self);
        pthread_mutex_lock(&lock);
        if (__atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL) == 0) pthread_cond_broadcast(&done);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static int default_threads(void) {
    const char *env = getenv("EMBER_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return 1;
}

/* After fork() the child has no workers; let it start its own. */
static void after_fork_child(void) {
    pthread_mutex_init(&lock, NULL);
    pthread_mutex_init(&submit, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&done, NULL);
    n_workers = 0;
    generation = 0;
    active = 0;
    parked = 0;
    sleeping = 0;
}

/* Starts the workers the wanted thread count needs; returns that count. */
static int ensure_workers(void) {
    static bool atfork_registered;
    if (!atfork_registered) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_registered = true;
    }
    int wanted = em_get_num_threads();
    while (n_workers < wanted - 1 && n_workers < MAX_THREADS) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker, (void *)(intptr_t)(n_workers + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* fewer workers: still correct, just slower */
        n_workers++;
    }
    return wanted;
}

/* Lock-free, so that a kernel may ask from inside a job (whose submitter
 * holds `submit`). */
int em_get_num_threads(void) {
    int n = __atomic_load_n(&n_threads, __ATOMIC_ACQUIRE);
    if (!n) {
        int none = 0;
        __atomic_compare_exchange_n(&n_threads, &none, default_threads(), false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        n = __atomic_load_n(&n_threads, __ATOMIC_ACQUIRE);
    }
    return n;
}

void em_set_num_threads(int n) {
    pthread_mutex_lock(&submit);
    __atomic_store_n(&n_threads, n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&submit);
}

void em_parallel_park(void) { __atomic_store_n(&parked, 1, __ATOMIC_RELAXED); }

static bool job_done(void *unused) {
    (void)unused;
    return __atomic_load_n(&job.finished, __ATOMIC_ACQUIRE) >= job.n_pieces &&
           __atomic_load_n(&active, __ATOMIC_ACQUIRE) == 0;
}

static bool no_worker_active(void *unused) {
    (void)unused;
    return __atomic_load_n(&active, __ATOMIC_ACQUIRE) == 0;
}

/* heavy: every item is worth waking a thread for (a block of a GEMM). */
static void parallel_for(int64_t n, int64_t grain, em_parallel_fn fn, void *ctx, bool heavy) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n <= grain || inside_job || pthread_mutex_trylock(&submit) != 0) {
        fn(ctx, 0, n);
        return;
    }
    int wanted = ensure_workers();
    int threads = n_workers + 1 < wanted ? n_workers + 1 : wanted;
    int64_t most = (int64_t)threads * PIECES_PER_THREAD;
    int64_t pieces = n / grain < most ? n / grain : most;
    /* Workers that are asleep (or parked for OpenBLAS, whose own threads then
     * spin with sched_yield on the other cores for tens of ms) take ~10 us to
     * wake and then fight those threads for a core: a job of up to
     * WAKE_GRAINS grains finishes sooner on the calling thread alone. When
     * GEMMs still ran on OpenBLAS's threads, waking cost the MLP training
     * step 0.2-0.4 ms (its 64K-element kernels took 15-45 us woken, 10-15
     * inline); 16, 32 and 64 grains measured alike, and the GPT block's
     * 3M-element kernels still get every thread. Heavy jobs always wake.
     * Workers merely asleep (no OpenBLAS threads about) are worth waking
     * for more than WAKE_GRAINS_ASLEEP grains: with 32 for them too, a 1M-
     * element add (32 grains) ran on one thread in every process whose
     * worker had fallen asleep, and never woke it (0.166 ms, against 0.066
     * with the worker; exp 0.40 against 0.20). */
    bool is_parked = __atomic_load_n(&parked, __ATOMIC_RELAXED);
    bool asleep = is_parked || __atomic_load_n(&sleeping, __ATOMIC_RELAXED) >= n_workers;
    int64_t wake_grains = is_parked ? WAKE_GRAINS : WAKE_GRAINS_ASLEEP;
    if (threads <= 1 || pieces <= 1 || (!heavy && asleep && n <= grain * wake_grains)) {
        pthread_mutex_unlock(&submit);
        fn(ctx, 0, n);
        return;
    }
    __atomic_store_n(&parked, 0, __ATOMIC_RELAXED);
    spin_until(no_worker_active, NULL); /* stragglers of the last job, usually none */
    pthread_mutex_lock(&lock);
    while (__atomic_load_n(&active, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&done, &lock);
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.piece = (n + pieces - 1) / pieces;
    job.n_pieces = (n + job.piece - 1) / job.piece;
    job.threads = threads;
    for (int t = 0; t < threads; t++) {
        shares[t].next = job.n_pieces * t / threads;
        shares[t].end = job.n_pieces * (t + 1) / threads;
    }
    job.finished = 0;
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);

    inside_job = true;
    run_pieces(0);
    inside_job = false;

    if (!spin_until(job_done, NULL)) {
        pthread_mutex_lock(&lock);
        while (!job_done(NULL)) pthread_cond_wait(&done, &lock);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_unlock(&submit);
}

void em_parallel_for(int64_t n, int64_t grain, em_parallel_fn fn, void *ctx) {
    parallel_for(n, grain, fn, ctx, false);
}

void em_parallel_for_heavy(int64_t n, em_parallel_fn fn, void *ctx) { parallel_for(n, 1, fn, ctx, true); }
