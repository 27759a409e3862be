/*
 * process_group.c - process groups and collectives on MPI, run by one
 * communication thread (include/ember/distributed.h says what and why).
 *
 * The caller's thread validates a call, describes it (struct wire_desc),
 * queues an em_work and returns. The communication thread takes works in
 * order: it exchanges the descriptions of a collective with one small
 * allgather, compares them (every rank compares the same bytes, so every
 * rank fails alike, and none waits for a payload that will not come), then
 * runs the MPI call on the tensors' memory. Point-to-point works are posted
 * (MPI_Isend/Irecv) and finished when MPI_Test says so, so that a send and a
 * recv queued on both ranks in either order cannot deadlock.
 *
 * Blocking MPI calls on that thread are as fast as a plain MPI program's;
 * the timeout is enforced on the waiting side: a wait that passes its
 * deadline marks the process unusable (D.failed) and returns an error,
 * leaving the thread where it is. Nothing then calls MPI again, not even
 * MPI_Finalize.
 */
#define _GNU_SOURCE
#include "ember/distributed.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/ops.h"
#include "mpi_ops.h"

/* Groups alive at once, the world included. */
#define MAX_GROUPS 1024

enum work_kind {
    W_ALL_REDUCE,
    W_REDUCE,
    W_BROADCAST,
    W_ALL_GATHER,
    W_REDUCE_SCATTER,
    W_GATHER,
    W_SCATTER,
    W_BARRIER,
    W_SEND,
    W_RECV,
    W_NEW_GROUP,
    W_FREE_GROUP,
    W_STOP,
    W_KIND_COUNT
};
static const char *kind_names[W_KIND_COUNT] = {"all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter",
                                               "gather", "scatter", "barrier", "send", "recv", "new_group",
                                               "destroy_process_group", "finalize"};

/* What a rank passes to a collective, exchanged before it runs. */
typedef struct wire_desc {
    int32_t kind, dtype, op, root, ndim, pad;
    int64_t shape[EM_MAX_DIMS];
} wire_desc;

struct em_pg {
    MPI_Comm comm;
    int id; /* the all_reduce op's group attribute: 0 the world */
    int rank, size;
    double timeout_s;
    int *global_ranks; /* [size] */
    uint64_t calls;    /* collectives queued on this group, for messages */
    char name[40];
};

struct em_work {
    enum work_kind kind;
    em_pg *pg;
    uint64_t call;
    void *send, *recv; /* send: what is read; recv: what is written (may be the same) */
    int64_t count;     /* elements per rank */
    em_dtype dtype;
    em_reduce_op op;
    int root, peer, tag;
    wire_desc desc;
    em_tensor *held[3]; /* kept alive while MPI may touch them */
    em_tensor *copy_to, *copy_from; /* a non-contiguous result, copied back by the caller */
    double queued_at, timeout_s; /* the group's, copied: a group may go before its last work */
    MPI_Request req;
    /* new_group */
    int *ranks, n_ranks;
    double new_timeout;
    em_pg *new_pg;
    bool waited_on; /* a caller blocks in em_work_wait on it (atomic) */
    /* under D.mu */
    bool done, caller_released;
    em_status status;
    int source;
    char msg[1024];
    em_work *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t queued, finished;
    bool initialized, finalized, we_initialized;
    bool failed; /* a wait timed out: MPI is not called again */
    char failure[1024];
    pthread_t thread;
    bool thread_running;
    em_work *head, *tail; /* the queue */
    em_work *pending;     /* posted sends and recvs (the thread's own list) */
    em_work *graveyard;   /* finished works the caller let go: freed on its thread */
    em_pg *world;
    em_pg *by_id[MAX_GROUPS]; /* live groups by id (the caller's thread's) */
    em_dist_stats stats;
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1];
} D = {.mu = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void work_free(em_work *w) {
    for (int i = 0; i < 3; i++)
        if (w->held[i]) em_tensor_release(w->held[i]);
    if (w->copy_to) em_tensor_release(w->copy_to);
    if (w->copy_from) em_tensor_release(w->copy_from);
    free(w->ranks);
    free(w);
    D.stats.works_alive--;
}

/* Frees the works the caller released before they finished (caller's thread). */
static void reap(void) {
    pthread_mutex_lock(&D.mu);
    em_work *g = D.graveyard;
    D.graveyard = NULL;
    pthread_mutex_unlock(&D.mu);
    while (g) {
        em_work *next = g->next;
        work_free(g);
        g = next;
    }
}

/* ---- the communication thread ---- */

static void finish(em_work *w, em_status status) {
    pthread_mutex_lock(&D.mu);
    w->status = status;
    w->done = true;
    if (w->caller_released) {
        w->next = D.graveyard;
        D.graveyard = w;
    }
    pthread_cond_broadcast(&D.finished);
    pthread_mutex_unlock(&D.mu);
}

static em_status fail(em_work *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static em_status fail(em_work *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    return EM_ERR_DISTRIBUTED;
}

static em_status mpi_fail(em_work *w, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    text[len] = 0;
    return fail(w, "%s (call #%llu on group %s): MPI failed on rank %d: %s", kind_names[w->kind],
                (unsigned long long)w->call, w->pg->name, w->pg->rank, text);
}

static void desc_str(const wire_desc *d, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "%s[", (unsigned)d->dtype < EM_DTYPE_COUNT ? em_dtype_long_name((em_dtype)d->dtype) : "?");
    for (int i = 0; i < d->ndim && i < EM_MAX_DIMS && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)d->shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* Waits for a request without spinning for long while the caller's thread
 * computes: MPI's own waits poll flat out, and a rank that waits for a
 * slower one (the usual case in DistributedDataParallel, whose ranks reach
 * each bucket at slightly different times) would take a core from the
 * computation that rank and its neighbours still do. The first
 * microseconds poll, then sleeps grow to 50 us (the thread's timer slack is
 * 1 us, so they are that long). While a caller waits for this very work,
 * its thread computes nothing: then polling costs nothing and sleeping
 * only adds latency and context switches, so it polls. */
static int gentle_wait(MPI_Request *req, const em_work *w) {
    int done = 0, rc;
    double start = now_s();
    long sleep_ns = 1000;
    while ((rc = MPI_Test(req, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done) {
        if (now_s() - start < 20e-6 || __atomic_load_n(&w->waited_on, __ATOMIC_RELAXED)) continue;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 50000) sleep_ns *= 2;
    }
    return rc;
}

/* Exchanges descriptions; a mismatch fails every rank with one message.
 * It is also where ranks meet: the payload's blocking call starts once all
 * have arrived, so it moves data rather than waiting in a spin. */
static em_status check_agreement(em_work *w) {
    em_pg *pg = w->pg;
    wire_desc *all = malloc(sizeof(wire_desc) * (size_t)pg->size);
    if (!all) return fail(w, "%s: out of memory", kind_names[w->kind]);
    MPI_Request req;
    int rc = MPI_Iallgather(&w->desc, (int)sizeof(wire_desc), MPI_BYTE, all, (int)sizeof(wire_desc), MPI_BYTE,
                            pg->comm, &req);
    if (rc == MPI_SUCCESS) rc = gentle_wait(&req, w);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(w, rc);
    }
    em_status st = EM_OK;
    for (int r = 1; r < pg->size && st == EM_OK; r++) {
        const wire_desc *a = &all[0], *b = &all[r];
        if (a->kind != b->kind) {
            st = fail(w,
                      "collectives differ between ranks at call #%llu on group %s: rank %d called %s, rank %d "
                      "called %s",
                      (unsigned long long)w->call, pg->name, pg->global_ranks[0],
                      (unsigned)a->kind < W_KIND_COUNT ? kind_names[a->kind] : "?", pg->global_ranks[r],
                      (unsigned)b->kind < W_KIND_COUNT ? kind_names[b->kind] : "?");
        } else if (memcmp(a, b, sizeof *a) != 0) {
            char sa[160], sb[160];
            const char *what;
            if (a->dtype != b->dtype || a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape) != 0) {
                what = "tensors";
                desc_str(a, sa, sizeof sa);
                desc_str(b, sb, sizeof sb);
            } else if (a->root != b->root) {
                what = "roots";
                snprintf(sa, sizeof sa, "%d", em_pg_global_rank(pg, a->root));
                snprintf(sb, sizeof sb, "%d", em_pg_global_rank(pg, b->root));
            } else {
                what = "reduce ops";
                snprintf(sa, sizeof sa, "%s", em_reduce_op_name((em_reduce_op)a->op));
                snprintf(sb, sizeof sb, "%s", em_reduce_op_name((em_reduce_op)b->op));
            }
            st = fail(w, "%s (call #%llu on group %s): the ranks' %s differ: rank %d passed %s, rank %d passed %s",
                      kind_names[w->kind], (unsigned long long)w->call, pg->name, what, pg->global_ranks[0], sa,
                      pg->global_ranks[r], sb);
        }
    }
    free(all);
    return st;
}

/* Reductions and broadcasts go in calls of at most 4 MiB. MPI counts are
 * ints, but that is not the main reason: this Open MPI (4.1, shared
 * memory) reduces 16 MB in 3.7 ms and 32 MB in 83 ms, and calls of 256 KB
 * to 16 MB all run at the fast rate (bench/RESULTS.md, issue 18), so
 * 4 MiB keeps the per-call cost (tens of microseconds) small beside the
 * data, on a network too. */
#define CHUNK_BYTES ((int64_t)4 << 20)

static em_status run_collective(em_work *w) {
    em_pg *pg = w->pg;
    MPI_Datatype ty = em_mpi_type(w->dtype);
    size_t esize = em_dtype_size(w->dtype);
    MPI_Op op = MPI_OP_NULL;
    if (w->kind == W_ALL_REDUCE || w->kind == W_REDUCE || w->kind == W_REDUCE_SCATTER)
        em_mpi_op(kind_names[w->kind], w->dtype, w->op, &op); /* (checked when queued) */
    int rc = MPI_SUCCESS, n = (int)w->count;
    int64_t chunk = CHUNK_BYTES / (int64_t)esize;
    switch (w->kind) {
    case W_ALL_REDUCE:
    case W_REDUCE:
    case W_BROADCAST:
        for (int64_t at = 0; at < w->count && rc == MPI_SUCCESS; at += chunk) {
            char *p = (char *)w->recv + at * (int64_t)esize;
            int c = (int)(w->count - at < chunk ? w->count - at : chunk);
            if (w->kind == W_ALL_REDUCE) rc = MPI_Allreduce(MPI_IN_PLACE, p, c, ty, op, pg->comm);
            else if (w->kind == W_BROADCAST) rc = MPI_Bcast(p, c, ty, w->root, pg->comm);
            else rc = MPI_Reduce(pg->rank == w->root ? MPI_IN_PLACE : p, p, c, ty, op, w->root, pg->comm);
        }
        break;
    case W_ALL_GATHER: rc = MPI_Allgather(w->send, n, ty, w->recv, n, ty, pg->comm); break;
    case W_REDUCE_SCATTER: rc = MPI_Reduce_scatter_block(w->send, w->recv, n, ty, op, pg->comm); break;
    case W_GATHER: rc = MPI_Gather(w->send, n, ty, w->recv, n, ty, w->root, pg->comm); break;
    case W_SCATTER: rc = MPI_Scatter(w->send, n, ty, w->recv, n, ty, w->root, pg->comm); break;
    case W_BARRIER: rc = MPI_Barrier(pg->comm); break;
    default: return fail(w, "internal: %s is not a collective", kind_names[w->kind]);
    }
    if (rc != MPI_SUCCESS) return mpi_fail(w, rc);
    if (w->op == EM_REDUCE_AVG && op != MPI_OP_NULL && (w->kind != W_REDUCE || pg->rank == w->root))
        em_mpi_divide(w->recv, w->count, w->dtype, pg->size);
    pthread_mutex_lock(&D.mu);
    D.stats.collectives++;
    D.stats.bytes += w->count * (int64_t)esize;
    pthread_mutex_unlock(&D.mu);
    return EM_OK;
}

static void post_p2p(em_work *w) {
    MPI_Datatype ty = em_mpi_type(w->dtype);
    int rc = w->kind == W_SEND ? MPI_Isend(w->send, (int)w->count, ty, w->peer, w->tag, w->pg->comm, &w->req)
                               : MPI_Irecv(w->recv, (int)w->count, ty, w->peer < 0 ? MPI_ANY_SOURCE : w->peer,
                                           w->tag, w->pg->comm, &w->req);
    if (rc != MPI_SUCCESS) {
        finish(w, mpi_fail(w, rc));
        return;
    }
    w->next = D.pending;
    D.pending = w;
}

static bool p2p_finished(em_work *w) {
    int flag = 0;
    MPI_Status st;
    int rc = MPI_Test(&w->req, &flag, &st);
    if (rc != MPI_SUCCESS) {
        finish(w, mpi_fail(w, rc));
        return true;
    }
    if (!flag) return false;
    em_status status = EM_OK;
    if (w->kind == W_RECV) {
        int got = 0;
        MPI_Get_count(&st, em_mpi_type(w->dtype), &got);
        w->source = st.MPI_SOURCE;
        if (got != (int)w->count)
            status = fail(w, "recv (tag %d on group %s): rank %d sent %d elements, the tensor holds %lld", w->tag,
                          w->pg->name, w->pg->global_ranks[st.MPI_SOURCE], got, (long long)w->count);
    }
    finish(w, status);
    return true;
}

static void poll_pending(void) {
    for (em_work **at = &D.pending; *at;) {
        em_work *w = *at;
        em_work *next = w->next;
        if (p2p_finished(w)) *at = next;
        else at = &w->next;
    }
}

static em_status run_new_group(em_work *w) {
    MPI_Group world_group, sub;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_group(w->pg->comm, &world_group);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Group_incl(world_group, w->n_ranks, w->ranks, &sub);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Comm_create(w->pg->comm, sub, &comm);
            MPI_Group_free(&sub);
        }
        MPI_Group_free(&world_group);
    }
    if (rc != MPI_SUCCESS) return mpi_fail(w, rc);
    if (comm == MPI_COMM_NULL) return EM_OK; /* not a member */
    em_pg *pg = calloc(1, sizeof *pg);
    if (pg) pg->global_ranks = malloc(sizeof(int) * (size_t)w->n_ranks);
    if (!pg || !pg->global_ranks) {
        if (pg) free(pg);
        MPI_Comm_free(&comm);
        return fail(w, "new_group: out of memory");
    }
    pg->comm = comm;
    MPI_Comm_rank(comm, &pg->rank);
    MPI_Comm_size(comm, &pg->size);
    pg->timeout_s = w->new_timeout;
    memcpy(pg->global_ranks, w->ranks, sizeof(int) * (size_t)w->n_ranks);
    static int groups_made;
    snprintf(pg->name, sizeof pg->name, "%d", ++groups_made);
    w->new_pg = pg;
    return EM_OK;
}

static void *comm_thread(void *arg) {
    (void)arg;
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* gentle_wait's sleeps: 1 us slack, not 50 */
    pthread_mutex_lock(&D.mu);
    for (;;) {
        em_work *w = D.head;
        if (w) {
            D.head = w->next;
            if (!D.head) D.tail = NULL;
            pthread_mutex_unlock(&D.mu);
            em_status st = EM_OK;
            switch (w->kind) {
            case W_SEND:
            case W_RECV: post_p2p(w); break;
            case W_NEW_GROUP: finish(w, run_new_group(w)); break;
            case W_FREE_GROUP:
                MPI_Comm_free(&w->pg->comm);
                free(w->pg->global_ranks);
                free(w->pg);
                w->pg = NULL;
                finish(w, EM_OK);
                break;
            case W_STOP:
                for (em_work *p = D.pending; p;) { /* never matched: cancelled */
                    em_work *next = p->next;
                    MPI_Cancel(&p->req);
                    MPI_Request_free(&p->req);
                    finish(p, fail(p, "%s (tag %d): cancelled, the process group was destroyed first",
                                   kind_names[p->kind], p->tag));
                    p = next;
                }
                D.pending = NULL;
                finish(w, EM_OK);
                return NULL;
            default:
                st = check_agreement(w);
                if (st == EM_OK) st = run_collective(w);
                finish(w, st);
                break;
            }
            pthread_mutex_lock(&D.mu);
            continue;
        }
        if (D.pending) {
            pthread_mutex_unlock(&D.mu);
            poll_pending();
            pthread_mutex_lock(&D.mu);
            if (!D.head && D.pending) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += 50000;
                if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
                pthread_cond_timedwait(&D.queued, &D.mu, &ts);
            }
            continue;
        }
        pthread_cond_wait(&D.queued, &D.mu);
    }
}

/* ---- the caller's side ---- */

static em_status unusable(const char *what) {
    return em_error(EM_ERR_DISTRIBUTED, "%s: the process group is unusable after an earlier failure: %s", what,
                    D.failure);
}

static em_work *work_new(enum work_kind kind, em_pg *pg) {
    em_work *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->kind = kind;
    w->pg = pg;
    w->desc.kind = kind;
    w->peer = -1;
    w->source = -1;
    D.stats.works_alive++;
    return w;
}

static em_status enqueue(em_work *w, em_work **out) {
    reap();
    pthread_mutex_lock(&D.mu);
    if (D.failed) {
        pthread_mutex_unlock(&D.mu);
        em_status st = unusable(kind_names[w->kind]);
        work_free(w);
        return st;
    }
    w->queued_at = now_s();
    w->timeout_s = w->pg ? w->pg->timeout_s : D.world ? D.world->timeout_s : 1800;
    if (w->pg && w->kind <= W_RECV) w->call = ++w->pg->calls;
    if (D.tail) D.tail->next = w;
    else D.head = w;
    D.tail = w;
    pthread_cond_signal(&D.queued);
    pthread_mutex_unlock(&D.mu);
    *out = w;
    return EM_OK;
}

/* The memory a tensor argument gives MPI: its own when contiguous, else a
 * contiguous copy (copied back on completion when the call writes it). */
static em_status bind_tensor(em_work *w, const char *what, const char *role, em_tensor *t, bool written,
                             void **data) {
    if (!t) return em_error(EM_ERR_VALUE, "%s: %s tensor is missing", what, role);
    if (t->device.type != EM_DEVICE_CPU) {
        char dev[32];
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "%s: %s tensor is on %s: ember has no CUDA device yet, so no NCCL collectives; "
                        "move it to the CPU first",
                        what, role, em_device_str(t->device, dev));
    }
    if (em_mpi_type(t->dtype) == MPI_DATATYPE_NULL)
        return em_error(EM_ERR_DTYPE, "%s: %s tensor of dtype %s", what, role, em_dtype_long_name(t->dtype));
    int slot = 0;
    while (slot < 3 && w->held[slot]) slot++;
    em_tensor *use = t;
    if (!em_tensor_is_contiguous(t)) {
        use = em_clone(t);
        if (!use) return em_error_prefix(em_last_status(), "%s", what);
        if (written) {
            em_tensor_retain(t);
            em_tensor_retain(use);
            w->copy_to = t;
            w->copy_from = use;
        }
    } else {
        em_tensor_retain(t);
    }
    w->held[slot] = use;
    if (written) t->storage->version++;
    *data = use->numel ? em_tensor_data(use) : NULL;
    return EM_OK;
}

static void describe(em_work *w, const em_tensor *t) {
    w->dtype = t->dtype;
    w->count = t->numel;
    w->desc.dtype = t->dtype;
    w->desc.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) w->desc.shape[i] = t->shape[i];
}

static em_status check_ready(const char *what, em_pg *pg) {
    if (!D.initialized || D.finalized)
        return em_error(EM_ERR_RUNTIME, "%s: the default process group is not initialized: call init_process_group "
                                        "first", what);
    if (!pg) return em_error(EM_ERR_VALUE, "%s: no process group", what);
    return EM_OK;
}

static em_status check_rank(const char *what, const char *role, em_pg *pg, int r) {
    if (r < 0 || r >= pg->size)
        return em_error(EM_ERR_VALUE, "%s: %s rank %d is not in group %s of size %d", what, role, r, pg->name,
                        pg->size);
    return EM_OK;
}

static em_status check_count(const char *what, em_pg *pg, int64_t per_rank) {
    if (per_rank > (int64_t)0x7fffffff / (pg->size > 0 ? pg->size : 1))
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: %lld elements per rank on %d ranks: more than MPI's int count "
                        "(2^31-1 in all) is not supported yet", what, (long long)per_rank, pg->size);
    return EM_OK;
}

/* Builds, checks and queues a collective of one tensor written in place. */
static em_status one_tensor(enum work_kind kind, em_pg *pg, em_tensor *t, int root, em_reduce_op op,
                            em_work **out) {
    const char *what = kind_names[kind];
    em_status st = check_ready(what, pg);
    if (st != EM_OK) return st;
    if (kind != W_ALL_REDUCE && (st = check_rank(what, "root", pg, root)) != EM_OK) return st;
    if (kind != W_BROADCAST && t) {
        MPI_Op mop;
        if ((st = em_mpi_op(what, t->dtype, op, &mop)) != EM_OK) return st;
    }
    em_work *w = work_new(kind, pg);
    if (!w) return em_error(EM_ERR_NOMEM, "%s: out of memory", what);
    void *data = NULL;
    if ((st = bind_tensor(w, what, "the", t, true, &data)) != EM_OK) {
        work_free(w);
        return st;
    }
    describe(w, t);
    w->send = w->recv = data;
    w->root = w->desc.root = kind == W_ALL_REDUCE ? 0 : root;
    w->op = kind == W_BROADCAST ? EM_REDUCE_SUM : op;
    w->desc.op = (int32_t)w->op;
    return enqueue(w, out);
}

em_status em_pg_all_reduce(em_pg *pg, em_tensor *t, em_reduce_op op, em_work **work) {
    return one_tensor(W_ALL_REDUCE, pg, t, 0, op, work);
}
em_status em_pg_reduce(em_pg *pg, em_tensor *t, int root, em_reduce_op op, em_work **work) {
    return one_tensor(W_REDUCE, pg, t, root, op, work);
}
em_status em_pg_broadcast(em_pg *pg, em_tensor *t, int root, em_work **work) {
    return one_tensor(W_BROADCAST, pg, t, root, EM_REDUCE_SUM, work);
}

/* all_gather, gather, reduce_scatter, scatter: a block per rank on one side.
 * `small` is the per-rank tensor (in for gathers, out for scatters); `big`
 * holds size(pg) of its blocks (NULL off the root of gather and scatter). */
static em_status blocks(enum work_kind kind, em_pg *pg, em_tensor *big, em_tensor *small, int root,
                        em_reduce_op op, em_work **out) {
    const char *what = kind_names[kind];
    bool gathers = kind == W_ALL_GATHER || kind == W_GATHER;
    bool rooted = kind == W_GATHER || kind == W_SCATTER;
    em_status st = check_ready(what, pg);
    if (st != EM_OK) return st;
    if (rooted && (st = check_rank(what, "root", pg, root)) != EM_OK) return st;
    if (!small) return em_error(EM_ERR_VALUE, "%s: the %s tensor is missing", what, gathers ? "input" : "output");
    bool has_big = !rooted || pg->rank == root;
    if (has_big) {
        if (!big)
            return em_error(EM_ERR_VALUE, "%s: the %s tensor is missing on %s", what, gathers ? "output" : "input",
                            rooted ? "the root" : "this rank");
        if (big->dtype != small->dtype)
            return em_error(EM_ERR_DTYPE, "%s: the output is %s, the input %s", what,
                            em_dtype_long_name(gathers ? big->dtype : small->dtype),
                            em_dtype_long_name(gathers ? small->dtype : big->dtype));
        if (big->numel != small->numel * pg->size)
            return em_error(EM_ERR_SHAPE, "%s: the %s tensor holds %lld elements; %d ranks of %lld need %lld", what,
                            gathers ? "output" : "input", (long long)big->numel, pg->size, (long long)small->numel,
                            (long long)(small->numel * pg->size));
    }
    if ((st = check_count(what, pg, small->numel)) != EM_OK) return st;
    if (kind == W_REDUCE_SCATTER) {
        MPI_Op mop;
        if ((st = em_mpi_op(what, small->dtype, op, &mop)) != EM_OK) return st;
    }
    em_work *w = work_new(kind, pg);
    if (!w) return em_error(EM_ERR_NOMEM, "%s: out of memory", what);
    void *small_data = NULL, *big_data = NULL;
    st = bind_tensor(w, what, gathers ? "the input" : "the output", small, !gathers, &small_data);
    if (st == EM_OK && has_big)
        st = bind_tensor(w, what, gathers ? "the output" : "the input", big, gathers, &big_data);
    if (st != EM_OK) {
        work_free(w);
        return st;
    }
    describe(w, small);
    w->send = gathers ? small_data : big_data;
    w->recv = gathers ? big_data : small_data;
    w->root = w->desc.root = rooted ? root : 0;
    w->op = op;
    w->desc.op = kind == W_REDUCE_SCATTER ? (int32_t)op : 0;
    return enqueue(w, out);
}

em_status em_pg_all_gather(em_pg *pg, em_tensor *out, em_tensor *in, em_work **work) {
    return blocks(W_ALL_GATHER, pg, out, in, 0, EM_REDUCE_SUM, work);
}
em_status em_pg_reduce_scatter(em_pg *pg, em_tensor *out, em_tensor *in, em_reduce_op op, em_work **work) {
    return blocks(W_REDUCE_SCATTER, pg, in, out, 0, op, work);
}
em_status em_pg_gather(em_pg *pg, em_tensor *out, em_tensor *in, int root, em_work **work) {
    return blocks(W_GATHER, pg, out, in, root, EM_REDUCE_SUM, work);
}
em_status em_pg_scatter(em_pg *pg, em_tensor *out, em_tensor *in, int root, em_work **work) {
    return blocks(W_SCATTER, pg, in, out, root, EM_REDUCE_SUM, work);
}

em_status em_pg_barrier(em_pg *pg, em_work **work) {
    em_status st = check_ready("barrier", pg);
    if (st != EM_OK) return st;
    em_work *w = work_new(W_BARRIER, pg);
    if (!w) return em_error(EM_ERR_NOMEM, "barrier: out of memory");
    w->dtype = EM_DTYPE_U8;
    return enqueue(w, work);
}

static em_status p2p(enum work_kind kind, em_pg *pg, em_tensor *t, int peer, int tag, em_work **out) {
    const char *what = kind_names[kind];
    em_status st = check_ready(what, pg);
    if (st != EM_OK) return st;
    if ((kind == W_SEND || peer >= 0) && (st = check_rank(what, kind == W_SEND ? "destination" : "source", pg, peer)) != EM_OK)
        return st;
    if (peer == pg->rank)
        return em_error(EM_ERR_VALUE, "%s: rank %d cannot %s itself", what, pg->global_ranks[peer],
                        kind == W_SEND ? "send to" : "receive from");
    if (tag < 0) return em_error(EM_ERR_VALUE, "%s: tag %d is negative", what, tag);
    if (t && t->numel > 0x7fffffff)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: %lld elements: more than MPI's int count (2^31-1) is not "
                        "supported yet", what, (long long)t->numel);
    em_work *w = work_new(kind, pg);
    if (!w) return em_error(EM_ERR_NOMEM, "%s: out of memory", what);
    void *data = NULL;
    if ((st = bind_tensor(w, what, "the", t, kind == W_RECV, &data)) != EM_OK) {
        work_free(w);
        return st;
    }
    describe(w, t);
    w->send = w->recv = data;
    w->peer = peer;
    w->tag = tag;
    return enqueue(w, out);
}

em_status em_pg_send(em_pg *pg, em_tensor *t, int peer, int tag, em_work **work) {
    return p2p(W_SEND, pg, t, peer, tag, work);
}
em_status em_pg_recv(em_pg *pg, em_tensor *t, int peer, int tag, em_work **work) {
    return p2p(W_RECV, pg, t, peer, tag, work);
}

bool em_work_done(const em_work *w) {
    pthread_mutex_lock(&D.mu);
    bool done = w->done;
    pthread_mutex_unlock(&D.mu);
    return done;
}

int em_work_source(const em_work *w) { return w->source; }

em_status em_work_wait(em_work *w, double interval_s, int (*interrupted)(void *ctx), void *ctx) {
    const char *what = kind_names[w->kind];
    double timeout = w->timeout_s;
    double deadline = w->queued_at + timeout;
    bool collective = w->kind <= W_RECV; /* (control works may outlive their group) */
    __atomic_store_n(&w->waited_on, true, __ATOMIC_RELAXED);
    pthread_mutex_lock(&D.mu);
    while (!w->done) {
        if (D.failed) {
            pthread_mutex_unlock(&D.mu);
            return unusable(what);
        }
        double t = now_s();
        if (t >= deadline) {
            char desc[160] = "";
            if (collective && w->kind != W_BARRIER) desc_str(&w->desc, desc, sizeof desc);
            snprintf(D.failure, sizeof D.failure,
                     "%s%s%s (call #%llu on group %s) did not finish within its timeout of %g s on rank %d: a rank "
                     "died, hangs, or has not made the same call",
                     what, *desc ? " of " : "", desc, (unsigned long long)w->call, collective ? w->pg->name : "world",
                     timeout, D.world ? D.world->rank : -1);
            D.failed = true;
            pthread_mutex_unlock(&D.mu);
            return em_error(EM_ERR_DISTRIBUTED, "%s", D.failure);
        }
        double until = t + (interval_s > 0 ? interval_s : 3600);
        if (until > deadline) until = deadline;
        struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
        int rc = pthread_cond_timedwait(&D.finished, &D.mu, &ts);
        if (rc == ETIMEDOUT && !w->done && interrupted && now_s() < deadline) {
            pthread_mutex_unlock(&D.mu);
            if (interrupted(ctx)) return EM_ERR_HOST;
            pthread_mutex_lock(&D.mu);
        }
    }
    pthread_mutex_unlock(&D.mu);
    if (w->status != EM_OK) return em_error(w->status, "%s", w->msg);
    if (w->copy_to) {
        em_status st = em_assign(w->copy_to, w->copy_from);
        em_tensor_release(w->copy_to);
        em_tensor_release(w->copy_from);
        w->copy_to = w->copy_from = NULL;
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

void em_work_release(em_work *w) {
    if (!w) return;
    pthread_mutex_lock(&D.mu);
    bool done = w->done;
    w->caller_released = true;
    pthread_mutex_unlock(&D.mu);
    if (done) work_free(w); /* else the thread puts it in the graveyard */
    reap();
}

/* ---- groups, init and finalize ---- */

int em_pg_id(const em_pg *pg) { return pg->id; }

/* The all_reduce op's kernel calls this (em_set_collective_handler): the
 * collective queued like any other, and waited for. */
static em_status collective_op(em_tensor *buf, int64_t reduce_op, int64_t group) {
    em_pg *pg = group >= 0 && group < MAX_GROUPS ? D.by_id[group] : NULL;
    if (!pg)
        return em_error(EM_ERR_VALUE, "all_reduce: process group %lld does not exist (destroyed, or never made "
                        "in this process)", (long long)group);
    em_work *w;
    em_status st = em_pg_all_reduce(pg, buf, (em_reduce_op)reduce_op, &w);
    if (st != EM_OK) return st;
    st = em_work_wait(w, 0, NULL, NULL);
    em_work_release(w);
    return st;
}

bool em_dist_available(void) { return true; }
bool em_dist_initialized(void) { return D.initialized && !D.finalized; }
const char *em_dist_backend_version(void) { return D.version; }
int em_pg_rank(const em_pg *pg) { return pg->rank; }
int em_pg_size(const em_pg *pg) { return pg->size; }
int em_pg_global_rank(const em_pg *pg, int r) { return r >= 0 && r < pg->size ? pg->global_ranks[r] : -1; }
double em_pg_timeout(const em_pg *pg) { return pg->timeout_s; }
em_dist_stats em_dist_get_stats(void) {
    pthread_mutex_lock(&D.mu);
    em_dist_stats s = D.stats;
    pthread_mutex_unlock(&D.mu);
    return s;
}

/* Open MPI loads its components with dlopen and they expect libmpi's
 * symbols to be global; Python loaded us (and so libmpi) locally. */
static void make_mpi_global(void) {
    Dl_info info;
    if (dladdr((void *)MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

em_status em_dist_init(double timeout_s, em_pg **world) {
    if (D.initialized && !D.finalized) {
        *world = D.world;
        return EM_OK;
    }
    if (D.finalized)
        return em_error(EM_ERR_RUNTIME, "init_process_group: MPI was finalized in this process and cannot start "
                                        "again (an MPI rule): initialize once per process");
    if (!(timeout_s > 0)) return em_error(EM_ERR_VALUE, "init_process_group: timeout %g s is not positive", timeout_s);
    make_mpi_global();
    int flag = 0, provided = 0;
    MPI_Finalized(&flag);
    if (flag) return em_error(EM_ERR_RUNTIME, "init_process_group: MPI was finalized in this process already");
    MPI_Initialized(&flag);
    if (!flag) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return em_error(EM_ERR_DISTRIBUTED, "init_process_group: MPI_Init_thread failed");
        D.we_initialized = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return em_error(EM_ERR_DISTRIBUTED, "init_process_group: this MPI offers thread level %d; ember needs "
                                            "MPI_THREAD_SERIALIZED (one communication thread)", provided);
    int len = 0;
    MPI_Get_library_version(D.version, &len);
    D.version[len] = 0;
    while (len > 0 && (D.version[len - 1] == '\n' || D.version[len - 1] == ' ')) D.version[--len] = 0;
    for (char *nl = D.version; *nl; nl++)
        if (*nl == '\n') *nl = ' ';
    MPI_Comm comm;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS || em_mpi_ops_init() != MPI_SUCCESS)
        return em_error(EM_ERR_DISTRIBUTED, "init_process_group: MPI could not make the world communicator");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    em_pg *pg = calloc(1, sizeof *pg);
    if (!pg) return em_error(EM_ERR_NOMEM, "init_process_group: out of memory");
    pg->comm = comm;
    MPI_Comm_rank(comm, &pg->rank);
    MPI_Comm_size(comm, &pg->size);
    pg->timeout_s = timeout_s;
    pg->global_ranks = malloc(sizeof(int) * (size_t)pg->size);
    if (!pg->global_ranks) return em_error(EM_ERR_NOMEM, "init_process_group: out of memory");
    for (int r = 0; r < pg->size; r++) pg->global_ranks[r] = r;
    snprintf(pg->name, sizeof pg->name, "world");
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&D.queued, &attr);
    pthread_cond_init(&D.finished, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&D.thread, NULL, comm_thread, NULL) != 0)
        return em_error(EM_ERR_RUNTIME, "init_process_group: could not start the communication thread");
    D.thread_running = true;
    D.world = pg;
    D.by_id[0] = pg;
    D.initialized = true;
    em_set_collective_handler(collective_op);
    *world = pg;
    return EM_OK;
}

/* Queues a control work and waits for it (a group's or the thread's end). */
static em_status control(em_work *w) {
    em_work *got;
    em_status st = enqueue(w, &got);
    if (st != EM_OK) return st;
    st = em_work_wait(got, 0, NULL, NULL);
    em_work_release(got);
    return st;
}

em_status em_pg_new_group(em_pg *world, const int *ranks, int n, double timeout_s, em_pg **out) {
    *out = NULL;
    em_status st = check_ready("new_group", world);
    if (st != EM_OK) return st;
    if (n < 1 || n > world->size)
        return em_error(EM_ERR_VALUE, "new_group: %d ranks, the world has %d", n, world->size);
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= world->size)
            return em_error(EM_ERR_VALUE, "new_group: rank %d is not in the world of %d", ranks[i], world->size);
        if (i && ranks[i] <= ranks[i - 1])
            return em_error(EM_ERR_VALUE, "new_group: ranks must be distinct and sorted (%d after %d)", ranks[i],
                            ranks[i - 1]);
    }
    em_work *w = work_new(W_NEW_GROUP, world);
    if (!w || !(w->ranks = malloc(sizeof(int) * (size_t)n))) {
        if (w) work_free(w);
        return em_error(EM_ERR_NOMEM, "new_group: out of memory");
    }
    memcpy(w->ranks, ranks, sizeof(int) * (size_t)n);
    w->n_ranks = n;
    w->new_timeout = timeout_s > 0 ? timeout_s : world->timeout_s;
    em_work *got;
    if ((st = enqueue(w, &got)) != EM_OK) return st;
    st = em_work_wait(got, 0, NULL, NULL);
    if (st == EM_OK && got->new_pg) {
        int id = 1;
        while (id < MAX_GROUPS && D.by_id[id]) id++;
        if (id == MAX_GROUPS) {
            em_pg_destroy(got->new_pg);
            em_work_release(got);
            return em_error(EM_ERR_RUNTIME, "new_group: %d groups are alive already", MAX_GROUPS);
        }
        got->new_pg->id = id;
        D.by_id[id] = got->new_pg;
        *out = got->new_pg;
    }
    em_work_release(got);
    return st;
}

void em_pg_destroy(em_pg *pg) {
    if (!pg || pg == D.world) return;
    if (pg->id > 0 && pg->id < MAX_GROUPS && D.by_id[pg->id] == pg) D.by_id[pg->id] = NULL;
    if (D.failed) return;
    em_work *w = work_new(W_FREE_GROUP, pg);
    if (w) control(w);
}

em_status em_dist_finalize(void) {
    if (!D.initialized || D.finalized) return EM_OK;
    if (D.failed) { /* the thread may be inside MPI: leave it all */
        D.finalized = true;
        return EM_OK;
    }
    em_work *w = work_new(W_STOP, NULL);
    em_status st = w ? control(w) : em_error(EM_ERR_NOMEM, "destroy_process_group: out of memory");
    if (st != EM_OK) return st;
    pthread_join(D.thread, NULL);
    D.thread_running = false;
    reap();
    MPI_Comm_free(&D.world->comm);
    free(D.world->global_ranks);
    free(D.world);
    D.world = NULL;
    D.by_id[0] = NULL;
    em_set_collective_handler(NULL);
    em_mpi_ops_free();
    if (D.we_initialized) MPI_Finalize();
    D.finalized = true;
    return EM_OK;
}
