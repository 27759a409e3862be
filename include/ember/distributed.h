/*
 * distributed.h - collectives between processes on MPI (Open MPI): the C
 * side of ember.distributed.
 *
 * A process group is an MPI communicator. Every MPI call of the process
 * runs on one communication thread, in the order the calls were made, so
 * that a collective can run while the caller goes on (async_op=True, and
 * DistributedDataParallel reducing a bucket of gradients while backward
 * computes the next): a call queues an em_work and returns it; waiting on it
 * gives its result. Collectives read and write the tensors' own memory
 * (a non-contiguous tensor goes through a contiguous copy).
 *
 * Mistakes between ranks are errors, never hangs:
 *  - before each collective the ranks exchange a small description of it
 *    (which collective, the group's call count, dtype, shape, root, op), so
 *    a rank calling another collective, or with another shape, makes every
 *    rank's call fail with a message naming what each rank passed;
 *  - a wait gives up after the group's timeout (a rank died, hangs, or never
 *    called): the message names the collective and the group, and the
 *    process group is unusable from then on (its communication thread may
 *    be stuck inside MPI), as after a timeout in torch.distributed.
 *
 * The tensors a work uses stay alive until it finishes; the communication
 * thread never releases them itself (releasing a tensor may run host code):
 * the caller's thread does, on a later call.
 */
#ifndef EMBER_DISTRIBUTED_H
#define EMBER_DISTRIBUTED_H

#include <stdbool.h>
#include <stdint.h>

#include "ember/status.h"
#include "ember/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ORDER REDUCE_OP: torch.distributed.ReduceOp's names */
typedef enum em_reduce_op {
    EM_REDUCE_SUM = 0,
    EM_REDUCE_AVG,
    EM_REDUCE_PRODUCT,
    EM_REDUCE_MIN,
    EM_REDUCE_MAX,
    EM_REDUCE_COUNT
} em_reduce_op;

typedef struct em_pg em_pg;
typedef struct em_work em_work;

/* Was ember built with MPI? */
bool em_dist_available(void);
/* Initialises MPI (once per process: MPI cannot start again after it
 * finished) and returns the world group (borrowed; valid until
 * em_dist_finalize). timeout_s bounds every wait on the group. */
em_status em_dist_init(double timeout_s, em_pg **world);
bool em_dist_initialized(void);
/* Finishes MPI (after waiting for queued work) unless a timeout left the
 * communication thread stuck, in which case MPI is left as it is. */
em_status em_dist_finalize(void);
/* "Open MPI v4.1.4, ..." */
const char *em_dist_backend_version(void);

int em_pg_rank(const em_pg *pg);
int em_pg_size(const em_pg *pg);
/* The rank in the world group of this group's rank r. */
int em_pg_global_rank(const em_pg *pg, int r);
double em_pg_timeout(const em_pg *pg);
/* The group's id, the all_reduce op's `group` attribute (0: the world). */
int em_pg_id(const em_pg *pg);
/* A group of the world ranks ranks[0..n) (sorted, distinct); every rank of
 * the world must call it. *out is NULL on ranks outside it. */
em_status em_pg_new_group(em_pg *world, const int *ranks, int n, double timeout_s, em_pg **out);
/* Frees a group made by em_pg_new_group (not the world). */
void em_pg_destroy(em_pg *pg);

/* The collectives. Each queues its work and returns it in *work (the
 * caller's reference: em_work_wait, then em_work_release). `root` and
 * `peer` are ranks in pg. Tensors must be on the CPU. */
em_status em_pg_all_reduce(em_pg *pg, em_tensor *t, em_reduce_op op, em_work **work);
em_status em_pg_reduce(em_pg *pg, em_tensor *t, int root, em_reduce_op op, em_work **work);
em_status em_pg_broadcast(em_pg *pg, em_tensor *t, int root, em_work **work);
/* out: size(pg) * in's elements, in rank order (any shape: [size*n] or
 * [size, *in.shape]), contiguous. */
em_status em_pg_all_gather(em_pg *pg, em_tensor *out, em_tensor *in, em_work **work);
/* in: size(pg) blocks of out's elements; out gets block rank reduced. */
em_status em_pg_reduce_scatter(em_pg *pg, em_tensor *out, em_tensor *in, em_reduce_op op, em_work **work);
/* out (root only; NULL elsewhere): as all_gather's. */
em_status em_pg_gather(em_pg *pg, em_tensor *out, em_tensor *in, int root, em_work **work);
/* in (root only; NULL elsewhere): size(pg) blocks of out's elements. */
em_status em_pg_scatter(em_pg *pg, em_tensor *out, em_tensor *in, int root, em_work **work);
em_status em_pg_barrier(em_pg *pg, em_work **work);
em_status em_pg_send(em_pg *pg, em_tensor *t, int peer, int tag, em_work **work);
/* peer -1: from any rank (em_work_source says which). */
em_status em_pg_recv(em_pg *pg, em_tensor *t, int peer, int tag, em_work **work);

/* Waits for the work, at most until the group's timeout has passed since it
 * was queued; then its result: EM_OK or the error (on this thread). Every
 * interval_s, interrupted(ctx) may stop the wait (nonzero: returns
 * EM_ERR_HOST, the work goes on). */
em_status em_work_wait(em_work *w, double interval_s, int (*interrupted)(void *ctx), void *ctx);
bool em_work_done(const em_work *w);
/* The rank (in its group) a finished recv got its message from. */
int em_work_source(const em_work *w);
void em_work_release(em_work *w);

/* Statistics for tests: collectives run, bytes moved (payload), and works
 * whose tensors are still held. */
typedef struct em_dist_stats {
    int64_t collectives;
    int64_t bytes;
    int64_t works_alive;
} em_dist_stats;
em_dist_stats em_dist_get_stats(void);

#ifdef __cplusplus
}
#endif
#endif
