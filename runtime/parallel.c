/*
 * parallel.c - a small blocking thread pool.
 *
 * One job at a time: the submitting thread publishes (fn, ctx, n, pieces),
 * bumps a generation counter and wakes the workers; everybody, submitter
 * included, claims pieces with an atomic counter. Workers register as active
 * (under the lock) before touching the job and deregister after; a submitter
 * returns only when every piece is done and no worker is active, and
 * publishes a job only when no worker is active, so no straggler can read a
 * job while it is rewritten. A second thread submitting while a job runs (or a
 * kernel submitting from inside a job) runs its work inline instead of
 * queueing, which keeps the pool free of deadlocks by construction.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>

#include "ember/parallel.h"

#define MAX_THREADS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER;

static int n_threads;      /* wanted, caller included (0: not decided yet) */
static int n_workers;      /* started */
static uint64_t generation; /* bumped per job */
static int active;          /* workers inside run_pieces (under lock) */
static struct {
    em_parallel_fn fn;
    void *ctx;
    int64_t n, piece;
    int64_t n_pieces;
    int64_t next;     /* atomic: next piece to claim */
    int64_t finished; /* atomic: pieces done */
} job;

static _Thread_local bool inside_job;

static void run_pieces(void) {
    for (;;) {
        int64_t p = __atomic_fetch_add(&job.next, 1, __ATOMIC_ACQ_REL);
        if (p >= job.n_pieces) return;
        int64_t b = p * job.piece, e = b + job.piece < job.n ? b + job.piece : job.n;
        job.fn(job.ctx, b, e);
        __atomic_add_fetch(&job.finished, 1, __ATOMIC_ACQ_REL);
    }
}

static void *worker(void *arg) {
    (void)arg;
    inside_job = true;
    uint64_t seen = 0;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (generation == seen) pthread_cond_wait(&wake, &lock);
        seen = generation;
        active++;
        pthread_mutex_unlock(&lock);
        run_pieces();
        pthread_mutex_lock(&lock);
        if (--active == 0) pthread_cond_broadcast(&done);
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
}

static void ensure_workers(void) {
    static bool atfork_registered;
    if (!atfork_registered) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_registered = true;
    }
    if (!n_threads) n_threads = default_threads();
    while (n_workers < n_threads - 1 && n_workers < MAX_THREADS) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* fewer workers: still correct, just slower */
        n_workers++;
    }
}

int em_get_num_threads(void) {
    pthread_mutex_lock(&submit);
    if (!n_threads) n_threads = default_threads();
    int n = n_threads;
    pthread_mutex_unlock(&submit);
    return n;
}

void em_set_num_threads(int n) {
    pthread_mutex_lock(&submit);
    n_threads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
    pthread_mutex_unlock(&submit);
}

void em_parallel_for(int64_t n, int64_t grain, em_parallel_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n <= grain || inside_job || pthread_mutex_trylock(&submit) != 0) {
        fn(ctx, 0, n);
        return;
    }
    ensure_workers();
    int threads = n_workers + 1 < n_threads ? n_workers + 1 : n_threads;
    int64_t pieces = n / grain < threads ? n / grain : threads;
    if (pieces <= 1) {
        pthread_mutex_unlock(&submit);
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&lock);
    while (active > 0) pthread_cond_wait(&done, &lock); /* stragglers of the last job */
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.piece = (n + pieces - 1) / pieces;
    job.n_pieces = (n + job.piece - 1) / job.piece;
    job.next = 0;
    job.finished = 0;
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);

    inside_job = true;
    run_pieces();
    inside_job = false;

    pthread_mutex_lock(&lock);
    while (__atomic_load_n(&job.finished, __ATOMIC_ACQUIRE) < job.n_pieces || active > 0)
        pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&submit);
}
