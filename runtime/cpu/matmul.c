/*
 * matmul.c - matmul with PyTorch's rules (1-D, 2-D, batched with broadcast
 * batch dims) on OpenBLAS for float32/float64, a plain loop for int64.
 *
 * Each 2-D operand is handed to BLAS as it lies in memory when its strides
 * fit a BLAS layout (row-major, or transposed: a .T or .mT view costs no
 * copy); otherwise it is copied to a contiguous temporary first.
 *
 * GEMMs run on ember's thread pool, not OpenBLAS's: the output is cut into
 * one block per thread (whole matrices of a batch, or bands of rows or
 * columns of one matrix) and each block is a single-threaded OpenBLAS call.
 * On this project's 2-core machine that made the 128x512x10 product of an
 * MLP's last layer 4x faster (OpenBLAS threads a product that small poorly)
 * and the large ones as fast as OpenBLAS's own threading; and it leaves the
 * pool's workers awake for the elementwise kernels between GEMMs, instead of
 * handing the cores to OpenBLAS threads that spin on them (bench/RESULTS.md).
 * Matrix-vector products still use OpenBLAS's threads.
 */
#include <cblas.h>
#include <pthread.h>
#include <string.h>

#include "../kernels.h"
#include "ember/parallel.h"

/* A 2-D operand as BLAS sees it. */
typedef struct {
    bool trans;
    int64_t ld;
} blas_view;

/* Can rows x cols with these strides be passed to BLAS directly? */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, blas_view *v) {
    if (cs == 1 || cols == 1) {
        int64_t ld = rows == 1 ? cols : rs;
        if (ld >= (cols > 1 ? cols : 1)) {
            *v = (blas_view){false, ld};
            return true;
        }
    }
    if (rs == 1 || rows == 1) {
        int64_t ld = cols == 1 ? rows : cs;
        if (ld >= (rows > 1 ? rows : 1)) {
            *v = (blas_view){true, ld};
            return true;
        }
    }
    return false;
}

typedef struct {
    const int64_t *a, *b; /* int64 operands */
    int64_t *c;
    int64_t m, n, k, ars, acs, brs, bcs;
} imm_ctx;

static void imm_rows(void *arg, int64_t r0, int64_t r1) {
    const imm_ctx *x = arg;
    for (int64_t i = r0; i < r1; i++)
        for (int64_t j = 0; j < x->n; j++) {
            uint64_t s = 0;
            for (int64_t l = 0; l < x->k; l++)
                s += (uint64_t)x->a[i * x->ars + l * x->acs] * (uint64_t)x->b[l * x->brs + j * x->bcs];
            x->c[i * x->n + j] = (int64_t)s;
        }
}

/* c[m,n] (rows ldc apart) = alpha * a[m,k] @ b[k,n] as BLAS sees them. */
static void blas_gemm(bool f32, double alpha, blas_view va, blas_view vb, const char *a, const char *b, char *c,
                      int64_t m, int64_t n, int64_t k, int64_t ldc) {
    CBLAS_TRANSPOSE ta = va.trans ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE tb = vb.trans ? CblasTrans : CblasNoTrans;
    if (f32)
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, (float)alpha,
                    (const float *)a, (blasint)va.ld, (const float *)b, (blasint)vb.ld, 0.0f,
                    (float *)c, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, alpha,
                    (const double *)a, (blasint)va.ld, (const double *)b, (blasint)vb.ld, 0.0,
                    (double *)c, (blasint)ldc);
}

/* One 2-D product c[m,n] = alpha * a[m,k] @ b[k,n]; a/b given by element
 * strides; alpha is 1 for integers. */
static void gemm2d(em_dtype dt, double alpha, const char *a, int64_t ars, int64_t acs, const char *b,
                   int64_t brs, int64_t bcs, char *c, int64_t m, int64_t n, int64_t k) {
    if (dt == EM_DTYPE_I64) {
        imm_ctx x = {(const int64_t *)a, (const int64_t *)b, (int64_t *)c, m, n, k,
                     ars,                acs,                brs,          bcs};
        em_parallel_for(m, (EM_GRAIN_ELEMENTWISE / (n * k + 1)) + 1, imm_rows, &x);
        return;
    }
    blas_view va = {false, 0}, vb = {false, 0};
    blas_layout(m, k, ars, acs, &va); /* callers made both operands BLAS-ready */
    blas_layout(k, n, brs, bcs, &vb);
    em_parallel_park(); /* OpenBLAS's threads get the cores */
    bool f32 = dt == EM_DTYPE_F32;
    /* Vector shapes go to level-1/2 BLAS, which gemm handles poorly. */
    if (m == 1 && n == 1 && k > 0 && acs != 0 && brs != 0) {
        if (f32)
            *(float *)c = (float)alpha * cblas_sdot((blasint)k, (const float *)a, (blasint)acs, (const float *)b,
                                                    (blasint)brs);
        else
            *(double *)c = alpha * cblas_ddot((blasint)k, (const double *)a, (blasint)acs, (const double *)b,
                                              (blasint)brs);
        return;
    }
    if ((n == 1 && k > 0 && brs != 0) || (m == 1 && k > 0 && acs != 0)) {
        /* c = A x (n == 1: A = a, x = b's column) or c^T = B^T x (m == 1) */
        bool col = n == 1;
        blas_view v = col ? va : vb;
        CBLAS_TRANSPOSE t = col ? (v.trans ? CblasTrans : CblasNoTrans) : (v.trans ? CblasNoTrans : CblasTrans);
        int64_t rows = col ? (v.trans ? k : m) : (v.trans ? n : k), cols = col ? (v.trans ? m : k) : (v.trans ? k : n);
        const char *mat = col ? a : b, *x = col ? b : a;
        int64_t incx = col ? brs : acs;
        if (f32)
            cblas_sgemv(CblasRowMajor, t, (blasint)rows, (blasint)cols, (float)alpha, (const float *)mat, (blasint)v.ld,
                        (const float *)x, (blasint)incx, 0.0f, (float *)c, 1);
        else
            cblas_dgemv(CblasRowMajor, t, (blasint)rows, (blasint)cols, alpha, (const double *)mat, (blasint)v.ld,
                        (const double *)x, (blasint)incx, 0.0, (double *)c, 1);
        return;
    }
    blas_gemm(f32, alpha, va, vb, a, b, c, m, n, k, n);
}

/* ---- GEMMs on the pool ---- */

/* OpenBLAS's thread count is process-wide (NumPy shares the library), so it
 * is set to 1 only while ember's GEMMs run, and put back by the last of them
 * to finish. */
static pthread_mutex_t blas_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_single_users, blas_saved_threads;
static pthread_once_t blas_atfork_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread ran a GEMM has no such thread: it
 * puts OpenBLAS's count back itself. */
static void blas_after_fork_child(void) {
    pthread_mutex_init(&blas_threads_lock, NULL);
    if (blas_single_users > 0 && blas_saved_threads != 1) openblas_set_num_threads(blas_saved_threads);
    blas_single_users = 0;
}

static void blas_register_atfork(void) { pthread_atfork(NULL, NULL, blas_after_fork_child); }

static void blas_single_begin(void) {
    pthread_once(&blas_atfork_once, blas_register_atfork);
    pthread_mutex_lock(&blas_threads_lock);
    if (blas_single_users++ == 0) {
        blas_saved_threads = openblas_get_num_threads();
        if (blas_saved_threads != 1) openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&blas_threads_lock);
}

static void blas_single_end(void) {
    pthread_mutex_lock(&blas_threads_lock);
    if (--blas_single_users == 0 && blas_saved_threads != 1) openblas_set_num_threads(blas_saved_threads);
    pthread_mutex_unlock(&blas_threads_lock);
}

/* A pool task below this many multiply-adds costs more to hand over than it
 * saves; blocks are cut at multiples of BLOCK_ALIGN rows or columns. */
#define MIN_TASK_MACS (1 << 17)
#define BLOCK_ALIGN 16

typedef struct {
    bool f32;
    double alpha;
    const char *a, *b;
    char *c;
    int64_t m, n, k, ars, bcs; /* (a's row and b's column strides: where blocks start) */
    int64_t ldc;               /* c's row stride (n, or more where a layout puts rows apart) */
    blas_view va, vb;
    size_t item;
    int zb; /* batch dims of the output, and its and each operand's strides in them */
    int64_t bshape[EM_MAX_DIMS], abs_[EM_MAX_DIMS], bbs[EM_MAX_DIMS], cbs[EM_MAX_DIMS];
    int64_t chunks, chunk; /* blocks per matrix, and rows (or columns) per block */
    bool by_rows;
    em_parallel_fn epilogue; /* called on each block's elements once computed, or NULL */
    void *epilogue_ctx;
} gemm_plan;

static void gemm_blocks(void *arg, int64_t t0, int64_t t1) {
    const gemm_plan *p = arg;
    for (int64_t t = t0; t < t1; t++) {
        int64_t bi = t / p->chunks, lo = (t % p->chunks) * p->chunk, rem = bi;
        int64_t ao = 0, bo = 0, co = 0;
        for (int d = p->zb - 1; d >= 0; d--) {
            int64_t idx = rem % p->bshape[d];
            rem /= p->bshape[d];
            ao += idx * p->abs_[d];
            bo += idx * p->bbs[d];
            co += idx * p->cbs[d];
        }
        int64_t m = p->m, n = p->n;
        if (p->by_rows) {
            m = p->m - lo < p->chunk ? p->m - lo : p->chunk;
            ao += lo * p->ars;
            co += lo * p->ldc;
        } else {
            n = p->n - lo < p->chunk ? p->n - lo : p->chunk;
            bo += lo * p->bcs;
            co += lo;
        }
        blas_gemm(p->f32, p->alpha, p->va, p->vb, p->a + ao * (int64_t)p->item, p->b + bo * (int64_t)p->item,
                  p->c + co * (int64_t)p->item, m, n, p->k, p->ldc);
        if (!p->epilogue) continue;
        if (n == p->ldc) { /* whole rows: one run of elements */
            p->epilogue(p->epilogue_ctx, co, co + m * n);
        } else {
            for (int64_t i = 0; i < m; i++) p->epilogue(p->epilogue_ctx, co + i * p->ldc, co + i * p->ldc + n);
        }
    }
}

void em_blas_gemm(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                  int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    CBLAS_TRANSPOSE tra = ta ? CblasTrans : CblasNoTrans, trb = tb ? CblasTrans : CblasNoTrans;
    if (dt == EM_DTYPE_F32)
        cblas_sgemm(CblasRowMajor, tra, trb, (blasint)m, (blasint)n, (blasint)k, (float)alpha, (const float *)a,
                    (blasint)lda, (const float *)b, (blasint)ldb, (float)beta, (float *)c, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, tra, trb, (blasint)m, (blasint)n, (blasint)k, alpha, (const double *)a,
                    (blasint)lda, (const double *)b, (blasint)ldb, beta, (double *)c, (blasint)ldc);
}

void em_parallel_for_blas(int64_t n, em_parallel_fn fn, void *ctx) {
    blas_single_begin();
    em_parallel_for_heavy(n, fn, ctx);
    blas_single_end();
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* Runs the `batches` GEMMs of p (m, n > 1) as blocks over the pool: enough
 * blocks per matrix that the count divides evenly among the threads, along
 * the longer of m and n (each block then packs all of the smaller operand),
 * no thinner than BLOCK_ALIGN and no smaller than MIN_TASK_MACS. */
#define EPILOGUE_MIN_RUN 1024 /* elements */

static void gemm_on_pool(gemm_plan *p, int64_t batches) {
    int64_t threads = em_get_num_threads();
    p->by_rows = p->m >= p->n;
    int64_t len = p->by_rows ? p->m : p->n, other = p->by_rows ? p->n : p->m;
    int64_t chunks = threads / gcd(batches % threads, threads);
    int64_t by_size = len / BLOCK_ALIGN, by_work = len * other * p->k / MIN_TASK_MACS;
    chunks = chunks < by_size ? chunks : by_size;
    chunks = chunks < by_work ? chunks : by_work;
    if (chunks < 1) chunks = 1;
    p->chunk = (len + chunks - 1) / chunks;
    p->chunk = (p->chunk + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    p->chunks = (len + p->chunk - 1) / p->chunk;
    /* A narrow band of columns is m short runs of the result: its epilogue
     * would be m calls per block, slower than one pass over the whole
     * result after the GEMMs (which the caller then makes: p->epilogue is
     * cleared). */
    if (!p->by_rows && p->m > 1 && p->chunk < EPILOGUE_MIN_RUN) p->epilogue = NULL;
    /* Blocks of at least MIN_TASK_MACS each are worth waking a sleeping
     * worker for; whole small matrices of a batch (chunks == 1) are grouped
     * to that size and follow the pool's usual rule instead: a few of them
     * run on the caller (waking cost more than 2x4x4 products take). */
    int64_t macs = len * other * p->k / p->chunks;
    blas_single_begin();
    if (macs >= MIN_TASK_MACS)
        em_parallel_for_heavy(batches * p->chunks, gemm_blocks, p);
    else
        em_parallel_for(batches * p->chunks, MIN_TASK_MACS / (macs ? macs : 1) + 1, gemm_blocks, p);
    blas_single_end();
}

/* Makes a contiguous copy of `t` if its last two dims (as a matrix of
 * rows x cols) do not suit BLAS; returns a new reference either way. */
static em_tensor *blas_ready(em_tensor *t, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    blas_view v;
    if (t->dtype == EM_DTYPE_I64 || blas_layout(rows, cols, rs, cs, &v)) {
        em_tensor_retain(t);
        return t;
    }
    em_tensor *c = em_tensor_empty(t->shape, t->ndim, t->dtype, t->device);
    if (c && em_copy_into(c, t) != EM_OK) {
        em_tensor_release(c);
        return NULL;
    }
    return c;
}

/* Dtypes BLAS and the int64 loop do not take directly are computed in a
 * wider one and rounded back: float16/bfloat16 in float32, the smaller
 * integers in int64 (wrapping arithmetic gives the same low bits). */
static em_status matmul_widened(em_tensor *const *in, em_tensor *z, em_dtype wide) {
    em_tensor *a = em_converted(in[0], wide), *b = a ? em_converted(in[1], wide) : NULL, *c = NULL;
    em_status st = EM_OK;
    if (!a || !b || !(c = em_tensor_empty(z->shape, z->ndim, wide, z->device))) {
        st = em_last_status();
    } else {
        em_tensor *args[2] = {a, b};
        if ((st = cpu_matmul(EM_OP_MATMUL, args, 2, NULL, &c)) == EM_OK) st = em_copy_into(z, c);
    }
    em_tensor_release(a);
    em_tensor_release(b);
    em_tensor_release(c);
    return st;
}

/* Can the pooled GEMMs write z where it lies: float matrices (m, n > 1)
 * whose elements in a row are adjacent and rows at least a row apart? (A
 * result in a layout the layout pass chose; any other strided z is
 * computed contiguously and copied.) */
static bool blas_writable(const em_tensor *x, const em_tensor *y, const em_tensor *z) {
    if (z->numel == 0 || em_tensor_is_contiguous(z)) return true;
    if (!em_dtype_is_float(x->dtype) || em_dtype_is_half(x->dtype) || x->ndim < 2 || y->ndim < 2) return false;
    int64_t m = z->shape[z->ndim - 2], n = z->shape[z->ndim - 1], k = x->shape[x->ndim - 1];
    return m > 1 && n > 1 && k > 0 && z->strides[z->ndim - 1] == 1 && z->strides[z->ndim - 2] >= n;
}

static em_status matmul_into(em_tensor *x, em_tensor *y, em_tensor *z, double alpha, em_parallel_fn epilogue,
                             void *ctx, bool *handed);

/* z = alpha * x @ y through a contiguous temporary. */
static em_status matmul_copied(em_tensor *x, em_tensor *y, em_tensor *z, double alpha) {
    em_tensor *c = em_tensor_empty(z->shape, z->ndim, z->dtype, z->device);
    if (!c) return em_last_status();
    bool handed = false;
    em_status st = matmul_into(x, y, c, alpha, NULL, NULL, &handed);
    if (st == EM_OK) st = em_copy_into(z, c);
    em_tensor_release(c);
    return st;
}

/* z = alpha * x @ y (alpha a power of two, 1 for any but float32 and
 * float64: infer_matmul checks). With an epilogue, the GEMMs run on the
 * pool hand each block of z to it once computed and set *handed; other
 * paths leave it unset. */
static em_status matmul_into(em_tensor *x, em_tensor *y, em_tensor *z, double alpha, em_parallel_fn epilogue,
                             void *ctx, bool *handed) {
    if (!blas_writable(x, y, z)) return matmul_copied(x, y, z, alpha);
    if (em_dtype_is_half(x->dtype)) return matmul_widened((em_tensor *[]){x, y}, z, EM_DTYPE_F32);
    if (!em_dtype_is_float(x->dtype) && x->dtype != EM_DTYPE_I64)
        return matmul_widened((em_tensor *[]){x, y}, z, EM_DTYPE_I64);
    /* View 1-D operands as matrices: x[k] -> [1,k], y[k] -> [k,1]. */
    int64_t m = x->ndim >= 2 ? x->shape[x->ndim - 2] : 1, k = x->shape[x->ndim - 1];
    int64_t n = y->ndim >= 2 ? y->shape[y->ndim - 1] : 1;
    if (k > 0x7fffffff || m > 0x7fffffff || n > 0x7fffffff)
        return em_error(EM_ERR_VALUE, "matmul: dimensions beyond 2^31 are not supported by BLAS");
    int64_t xrs = x->ndim >= 2 ? x->strides[x->ndim - 2] : 0, xcs = x->strides[x->ndim - 1];
    int64_t yrs = y->strides[y->ndim >= 2 ? y->ndim - 2 : 0], ycs = y->ndim >= 2 ? y->strides[y->ndim - 1] : 0;
    if (z->numel == 0) return EM_OK;
    if (k == 0) {
        memset(em_tensor_data(z), 0, (size_t)z->numel * em_dtype_size(z->dtype));
        return EM_OK;
    }
    em_tensor *xa = blas_ready(x, m, k, xrs, xcs), *ya = NULL;
    if (!xa) return em_last_status();
    if (xa != x) {
        xrs = xa->ndim >= 2 ? xa->strides[xa->ndim - 2] : 0;
        xcs = xa->strides[xa->ndim - 1];
    }
    ya = blas_ready(y, k, n, yrs, ycs);
    if (!ya) {
        em_tensor_release(xa);
        return em_last_status();
    }
    if (ya != y) {
        yrs = ya->strides[ya->ndim >= 2 ? ya->ndim - 2 : 0];
        ycs = ya->ndim >= 2 ? ya->strides[ya->ndim - 1] : 0;
    }

    /* Batch dims: the output's leading dims; operands broadcast into them. */
    int xb = x->ndim > 2 ? x->ndim - 2 : 0, yb = y->ndim > 2 ? y->ndim - 2 : 0;
    int zb = xb > yb ? xb : yb;
    int64_t bshape[EM_MAX_DIMS], xbs[EM_MAX_DIMS], ybs[EM_MAX_DIMS], batches = 1;
    em_broadcast_strides(xa->shape, xa->strides, xb, zb, xbs);
    em_broadcast_strides(ya->shape, ya->strides, yb, zb, ybs);
    for (int i = 0; i < zb; i++) {
        bshape[i] = z->shape[i];
        batches *= bshape[i];
    }
    /* z's row stride: n when contiguous (blas_writable vouched for the rest) */
    int64_t ldc = x->ndim >= 2 && y->ndim >= 2 ? z->strides[z->ndim - 2] : n;
    if (m == 1 || ldc < n) ldc = n;
    size_t item = em_dtype_size(x->dtype);
    const char *xd = em_tensor_data(xa), *yd = em_tensor_data(ya);
    char *zd = em_tensor_data(z);
    /* [.., m, k] @ [k, n] with x's batch dims laid out like more rows (a
     * Linear layer on a sequence): one GEMM of batches * m rows, which BLAS
     * blocks and threads far better than `batches` small ones. */
    bool fold = yb == 0 && batches > 1 && m > 1 && xb == zb;
    int64_t want = xrs * m, zwant = ldc * m; /* each batch dim's strides must continue the rows' */
    for (int d = xb - 1; d >= 0 && fold; d--) {
        if (xa->shape[d] != 1 && (xa->strides[d] != want || z->strides[d] != zwant)) fold = false;
        want *= xa->shape[d];
        zwant *= xa->shape[d];
    }
    blas_view folded;
    if (fold && blas_layout(m * batches, k, xrs, xcs, &folded)) { /* (a legal BLAS matrix still) */
        m *= batches;
        batches = 1;
        zb = 0;
    }
    if (em_dtype_is_float(x->dtype) && m > 1 && n > 1) {
        gemm_plan p = {.f32 = x->dtype == EM_DTYPE_F32, .alpha = alpha, .a = xd, .b = yd, .c = zd, .m = m, .n = n, .k = k,
                       .ars = xrs, .bcs = ycs, .ldc = ldc, .item = item, .zb = zb, .epilogue = epilogue,
                       .epilogue_ctx = ctx};
        blas_layout(m, k, xrs, xcs, &p.va);
        blas_layout(k, n, yrs, ycs, &p.vb);
        for (int d = 0; d < zb; d++) {
            p.bshape[d] = bshape[d];
            p.abs_[d] = xbs[d];
            p.bbs[d] = ybs[d];
            p.cbs[d] = z->strides[d];
        }
        gemm_on_pool(&p, batches);
        *handed = p.epilogue != NULL;
        em_tensor_release(xa);
        em_tensor_release(ya);
        return EM_OK;
    }
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t rem = bi, xo = 0, yo = 0;
        for (int d = zb - 1; d >= 0; d--) {
            int64_t idx = rem % bshape[d];
            rem /= bshape[d];
            xo += idx * xbs[d];
            yo += idx * ybs[d];
        }
        gemm2d(x->dtype, alpha, xd + xo * (int64_t)item, xrs, xcs, yd + yo * (int64_t)item, yrs, ycs,
               zd + bi * m * n * (int64_t)item, m, n, k);
    }
    em_tensor_release(xa);
    em_tensor_release(ya);
    return EM_OK;
}

em_status cpu_matmul(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)n_in;
    bool handed = false;
    return matmul_into(in[0], in[1], out[0], em_matmul_alpha(attrs), NULL, NULL, &handed);
}

em_status em_matmul_epilogue(em_tensor *a, em_tensor *b, double alpha, em_tensor *out, em_parallel_fn epilogue,
                             void *ctx) {
    em_dtype dt = a->dtype;
    if (!epilogue || (dt != EM_DTYPE_F32 && dt != EM_DTYPE_F64) || b->dtype != dt || out->dtype != dt ||
        (!em_tensor_is_contiguous(out) && out->numel) || a->ndim < 1 || b->ndim < 1)
        return em_error(EM_ERR_VALUE, "matmul epilogue: needs float32 or float64 operands of one dtype and a "
                                      "contiguous result of it, got %s @ %s -> %s",
                        em_dtype_name(a->dtype), em_dtype_name(b->dtype), em_dtype_name(out->dtype));
    em_type t[2] = {{.dtype = dt, .ndim = a->ndim}, {.dtype = dt, .ndim = b->ndim}}, want;
    memcpy(t[0].shape, a->shape, sizeof a->shape);
    memcpy(t[1].shape, b->shape, sizeof b->shape);
    em_attrs scaled = {.alpha = alpha};
    if (em_op_infer(EM_OP_MATMUL, t, 2, &scaled, &want, 1) != EM_OK) return em_last_status();
    if (!em_shape_eq(want.shape, want.ndim, out->shape, out->ndim))
        return em_error(EM_ERR_VALUE, "matmul epilogue: the result has the wrong shape");
    bool handed = false;
    em_status st = matmul_into(a, b, out, em_matmul_alpha(&scaled), epilogue, ctx, &handed);
    if (st == EM_OK && !handed) em_parallel_for(out->numel, 16384, epilogue, ctx);
    return st;
}
