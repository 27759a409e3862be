/*
 * matmul.c - an ember matmul as column-major GEMMs (matmul.h).
 *
 * ember's matrices are row-major; a row-major M x N matrix is the
 * column-major N x M matrix of its transpose in the same memory. So
 * Z = X @ Y (row-major) is Z^T = Y^T @ X^T (column-major): one GEMM with
 * A = Y (n x k, lda n), B = X (k x m, ldb k), C = Z (n x m, ldc n), no
 * transposes. Batches (the leading dims, broadcast as torch.matmul's):
 *   - y with no batch dims (a Linear layer's weight): x's batches are more
 *     rows of one GEMM, M = batches * m (contiguous x continues its rows);
 *   - an operand whose batch is one matrix for all: stride 0;
 *   - an operand whose batch dims are the result's: stride m*k (or k*n);
 *   - one partly broadcast: expanded to the result's batch first.
 * A 1-d x is a 1 x k matrix and a 1-d y a k x 1 one, as torch.matmul
 * reads them (their dim leaves the result).
 */
#include <string.h>

#include "matmul.h"

static int64_t prod(const int64_t *shape, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= shape[i];
    return p;
}

/* t contiguous with its batch dims (the first nb of its ndim) expanded to
 * the result's batch shape zbatch[0..zb) when `expand` (a new reference). */
static em_tensor *ready(em_tensor *t, int nb, const int64_t *zbatch, int zb, bool expand) {
    if (!expand) return em_contiguous(t);
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, zbatch, (size_t)zb * sizeof *shape);
    memcpy(shape + zb, t->shape + nb, (size_t)(t->ndim - nb) * sizeof *shape);
    em_tensor *e = em_expand(t, shape, zb + t->ndim - nb);
    em_tensor *c = e ? em_contiguous(e) : NULL;
    em_tensor_release(e);
    return c;
}

static bool fits_int(int64_t v) {
    return v >= 0 && v <= 0x7fffffff;
}

em_status em_cuda_matmul(em_tensor *x, em_tensor *y, em_tensor *z, double alpha,
                         em_cuda_gemm_fn gemm, void *ctx) {
    em_dtype dt = z->dtype;
    bool floating =
        dt == EM_DTYPE_F32 || dt == EM_DTYPE_F64 || dt == EM_DTYPE_F16 || dt == EM_DTYPE_BF16;
    if (!floating || x->dtype != dt || y->dtype != dt)
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "matmul: no kernel for it on cuda yet for %s @ %s (cuBLAS takes float32, "
                        "float64, float16 "
                        "and bfloat16 operands of one dtype)",
                        em_dtype_long_name(x->dtype), em_dtype_long_name(y->dtype));
    if (x->ndim < 1 || y->ndim < 1)
        return em_error(EM_ERR_SHAPE, "matmul: both operands need at least one dim");
    int64_t m = x->ndim >= 2 ? x->shape[x->ndim - 2] : 1, k = x->shape[x->ndim - 1];
    int64_t n = y->ndim >= 2 ? y->shape[y->ndim - 1] : 1;
    int xb = x->ndim > 2 ? x->ndim - 2 : 0, yb = y->ndim > 2 ? y->ndim - 2 : 0,
        zb = xb > yb ? xb : yb;
    int64_t batches = prod(z->shape, zb);
    if (z->numel == 0) return EM_OK;
    if (k == 0) { /* (a sum of nothing) */
        em_tensor *zero = em_tensor_scalar(0.0, dt);
        em_status st = zero ? em_assign_copy(z, zero) : em_last_status();
        em_tensor_release(zero);
        return st;
    }
    /* batches of x: the result's (as rows, or a stride), one for all, or
     * partly broadcast (expanded) */
    bool x_all = xb == zb && prod(x->shape, xb) == batches,
         y_all = yb == zb && prod(y->shape, yb) == batches;
    bool x_one = prod(x->shape, xb) == 1, y_one = prod(y->shape, yb) == 1;
    bool rows = yb == 0 && x_all; /* x's batches are more rows */
    em_tensor *xc = ready(x, xb, z->shape, zb, !x_all && !x_one);
    em_tensor *yc = xc ? ready(y, yb, z->shape, zb, !y_all && !y_one) : NULL;
    em_tensor *zc =
        yc ? (em_tensor_is_contiguous(z) ? (em_tensor_retain(z), z)
                                         : em_tensor_empty(z->shape, z->ndim, dt, z->device))
           : NULL;
    em_status st = zc ? EM_OK : em_last_status();
    int64_t M = rows ? batches * m : m;
    if (st == EM_OK && !(fits_int(M) && fits_int(n) && fits_int(k) && fits_int(batches)))
        st = em_error(EM_ERR_VALUE, "matmul: dimensions beyond 2^31 are not supported by cuBLAS");
    if (st == EM_OK) {
        em_cuda_gemm g = {
            .dtype = dt,
            .m = (int)n,
            .n = (int)M,
            .k = (int)k,
            .batch = rows ? 1 : (int)batches,
            .alpha = alpha,
            .a = (uint64_t)(uintptr_t)em_tensor_data(yc),
            .b = (uint64_t)(uintptr_t)em_tensor_data(xc),
            .c = (uint64_t)(uintptr_t)em_tensor_data(zc),
            .lda = (int)n,
            .ldb = (int)k,
            .ldc = (int)n,
            .stride_a = rows || y_one ? 0 : (long long)(k * n),
            .stride_b = rows || x_one ? 0 : (long long)(m * k),
            .stride_c = rows ? 0 : (long long)(m * n),
        };
        st = gemm(ctx, &g);
    }
    if (st == EM_OK && zc != z) st = em_assign_copy(z, zc);
    em_tensor_release(xc);
    em_tensor_release(yc);
    em_tensor_release(zc);
    return st;
}
