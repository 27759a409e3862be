/*
 * linalg.c - linear algebra on the LAPACK that OpenBLAS ships: inv, solve,
 * solve_triangular, det, slogdet, cholesky, qr, eigh, svd, lstsq.
 *
 * Each op works on the last two dims and loops over the others (the
 * batch). A batch of matrices runs on ember's pool, one matrix per job with
 * OpenBLAS single-threaded inside it; a single matrix runs on the calling
 * thread with OpenBLAS's own threads. The LAPACK calls per element type
 * are in linalg_impl.h. Failures (a singular matrix, one that is not
 * positive-definite, no convergence, NaN or inf into an iterative routine)
 * are errors in PyTorch's words, naming the batch element. Their
 * inference is ../infer/linalg.c.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/parallel.h"

/* ---- LAPACK (Fortran: column-major, arguments by reference, the lengths
 * of character arguments after the rest) ---- */
#define LAPACK_DECLS(R, p)                                                                         \
    void p##getrf_(const blasint *m, const blasint *n, R *a, const blasint *lda, blasint *ipiv, blasint *info); \
    void p##getri_(const blasint *n, R *a, const blasint *lda, const blasint *ipiv, R *work,      \
                   const blasint *lwork, blasint *info);                                           \
    void p##gesv_(const blasint *n, const blasint *nrhs, R *a, const blasint *lda, blasint *ipiv, R *b, \
                  const blasint *ldb, blasint *info);                                              \
    void p##potrf_(const char *uplo, const blasint *n, R *a, const blasint *lda, blasint *info, size_t); \
    void p##syevd_(const char *jobz, const char *uplo, const blasint *n, R *a, const blasint *lda, R *w, \
                   R *work, const blasint *lwork, blasint *iwork, const blasint *liwork, blasint *info, \
                   size_t, size_t);                                                                \
    void p##gesdd_(const char *jobz, const blasint *m, const blasint *n, R *a, const blasint *lda, R *s, \
                   R *u, const blasint *ldu, R *vt, const blasint *ldvt, R *work, const blasint *lwork, \
                   blasint *iwork, blasint *info, size_t);                                         \
    void p##geqrf_(const blasint *m, const blasint *n, R *a, const blasint *lda, R *tau, R *work,   \
                   const blasint *lwork, blasint *info);                                           \
    void p##orgqr_(const blasint *m, const blasint *n, const blasint *k, R *a, const blasint *lda, \
                   const R *tau, R *work, const blasint *lwork, blasint *info);                    \
    void p##gelsd_(const blasint *m, const blasint *n, const blasint *nrhs, R *a, const blasint *lda, R *b, \
                   const blasint *ldb, R *s, const R *rcond, blasint *rank, R *work, const blasint *lwork, \
                   blasint *iwork, blasint *info);                                                 \
    void p##sytrf_(const char *uplo, const blasint *n, R *a, const blasint *lda, blasint *ipiv, R *work, \
                   const blasint *lwork, blasint *info, size_t);                                   \
    void p##sytrs_(const char *uplo, const blasint *n, const blasint *nrhs, const R *a, const blasint *lda, \
                   const blasint *ipiv, R *b, const blasint *ldb, blasint *info, size_t);
LAPACK_DECLS(float, s)
LAPACK_DECLS(double, d)

/* ---- one op over a batch ---- */

typedef enum { LA_OK, LA_SINGULAR, LA_NOT_PD, LA_NO_CONVERGENCE, LA_NONFINITE, LA_BAD_PIVOTS, LA_NOMEM } la_failure;

typedef struct {
    em_op op;
    em_tensor *const *in;
    em_tensor **out;
    int64_t m, n, k; /* the matrix is m x n (square: n x n); k right-hand sides */
    bool upper, full;
    int n_batch;
    int64_t bshape[EM_MAX_DIMS];
    pthread_mutex_t lock;
    int64_t fail_at; /* the lowest batch element that failed, and how */
    la_failure fail;
    int64_t fail_info;
} la_ctx;

/* Where matrix b of t starts (elements). */
static int64_t batch_offset(const la_ctx *c, const em_tensor *t, int64_t b) {
    int64_t off = 0;
    for (int d = c->n_batch - 1; d >= 0; d--) {
        off += (b % c->bshape[d]) * t->strides[d];
        b /= c->bshape[d];
    }
    return off;
}

static void la_fail(la_ctx *c, int64_t b, la_failure why, int64_t info) {
    pthread_mutex_lock(&c->lock);
    if (c->fail == LA_OK || b < c->fail_at) {
        c->fail_at = b;
        c->fail = why;
        c->fail_info = info;
    }
    pthread_mutex_unlock(&c->lock);
}

#define REAL float
#define LP(name) s##name
#define TRSM cblas_strsm
#include "linalg_impl.h"
#undef REAL
#undef LP
#undef TRSM
#define REAL double
#define LP(name) d##name
#define TRSM cblas_dtrsm
#include "linalg_impl.h"
#undef REAL
#undef LP
#undef TRSM

static em_status la_error(const la_ctx *c) {
    const char *name = em_op_name(c->op);
    char where[64] = "";
    if (c->n_batch) snprintf(where, sizeof where, " (batch element %lld)", (long long)c->fail_at);
    switch (c->fail) {
    case LA_SINGULAR:
        return em_error(EM_ERR_VALUE,
                        "linalg.%s%s: The diagonal element %lld is zero, the %s could not be completed because "
                        "the input matrix is singular.",
                        name, where, (long long)c->fail_info, c->op == EM_OP_INV ? "inversion" : "solve");
    case LA_NOT_PD:
        return em_error(EM_ERR_VALUE,
                        "linalg.cholesky%s: The factorization could not be completed because the input is not "
                        "positive-definite (the leading minor of order %lld is not positive-definite).",
                        where, (long long)c->fail_info);
    case LA_NO_CONVERGENCE:
        return em_error(EM_ERR_VALUE,
                        "linalg.%s%s: The algorithm failed to converge because the input matrix is "
                        "ill-conditioned or has too many repeated %s (error code: %lld).",
                        name, where, c->op == EM_OP_EIGH ? "eigenvalues" : "singular values",
                        (long long)c->fail_info);
    case LA_NONFINITE:
        return em_error(EM_ERR_VALUE,
                        "linalg.%s%s: The algorithm failed to converge because the input matrix contained "
                        "non-finite values.",
                        name, where);
    case LA_BAD_PIVOTS:
        return em_error(EM_ERR_VALUE,
                        "linalg.%s%s: pivot %lld is not one ldl_factor gives (each must be in [-n, -1] or [1, n])",
                        name, where, (long long)c->fail_info);
    default: return em_error(EM_ERR_NOMEM, "linalg.%s: out of memory", name);
    }
}

static em_status la_run(em_op op, em_tensor *const *in, const em_attrs *a, em_tensor **out) {
    const em_tensor *x = in[0];
    la_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.in = in;
    c.out = out;
    c.m = x->shape[x->ndim - 2];
    c.n = x->shape[x->ndim - 1];
    c.k = op == EM_OP_SOLVE || op == EM_OP_SOLVE_TRIANGULAR || op == EM_OP_LSTSQ ? in[1]->shape[in[1]->ndim - 1]
          : op == EM_OP_LDL_SOLVE                                                ? in[2]->shape[in[2]->ndim - 1]
                                                                                 : 0;
    c.upper = a->upper;
    c.full = a->full;
    c.n_batch = x->ndim - 2;
    int64_t batch = 1;
    for (int d = 0; d < c.n_batch; d++) batch *= (c.bshape[d] = x->shape[d]);
    if (batch == 0) return EM_OK;
    pthread_mutex_init(&c.lock, NULL);
    em_parallel_fn task = x->dtype == EM_DTYPE_F32 ? task_float : task_double;
    if (batch > 1) {
        em_parallel_for_blas(batch, task, &c);
    } else {
        em_parallel_park(); /* OpenBLAS's threads get the cores */
        task(&c, 0, 1);
    }
    pthread_mutex_destroy(&c.lock);
    return c.fail == LA_OK ? EM_OK : la_error(&c);
}

/* ---- kernels ---- */

#define LA_CPU(name)                                                                               \
    em_status cpu_##name(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) { \
        return la_run(op, in, a, out);                                                             \
    }
LA_CPU(inv)
LA_CPU(solve)
LA_CPU(solve_triangular)
LA_CPU(det)
LA_CPU(slogdet)
LA_CPU(cholesky)
LA_CPU(qr)
LA_CPU(eigh)
LA_CPU(svd)
LA_CPU(lstsq)
LA_CPU(ldl_factor)
LA_CPU(ldl_solve)
