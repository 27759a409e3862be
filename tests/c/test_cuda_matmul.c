/*
 * test_cuda_matmul.c - the CUDA device's matmul as column-major GEMMs
 * (cuda/matmul.c), checked on the host: operands on "cuda" under the host
 * stand-in (EMBER_CUDA_HOST_STAND_IN=1: host memory, the CPU's kernels for
 * the copies and expansions the mapping makes), the GEMMs run by a
 * reference in BLAS's column-major meaning (OpenBLAS), the results
 * compared with the CPU's matmul. What a GPU adds, cuBLAS running those
 * same calls, tools/gpu_check.sh checks (test_cuda_device).
 *
 * Cases: plain, batched, x's batches folded into rows (a Linear layer),
 * one operand's batch broadcast (stride 0), both partly broadcast
 * (expanded), 1-d operands on either side and both, transposed operands,
 * k = 0, float64, and alpha = 2.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cuda/matmul.h"
#include "check.h"
#include "ember/cuda.h"
#include "ember/ops.h"
#include "ember/tensor.h"

static int calls, batched_calls;

/* cuBLAS's meaning on host memory (the stand-in's "cuda" memory is the
 * host's). */
static em_status host_gemm(void *ctx, const em_cuda_gemm *g) {
    (void)ctx;
    calls++;
    batched_calls += g->batch > 1;
    CHECK(g->lda >= (g->m > 1 ? g->m : 1) && g->ldb >= (g->k > 1 ? g->k : 1) && g->ldc >= (g->m > 1 ? g->m : 1));
    for (int i = 0; i < g->batch; i++) {
        if (g->dtype == EM_DTYPE_F32) {
            const float *a = (const float *)(uintptr_t)g->a + i * g->stride_a, *b = (const float *)(uintptr_t)g->b + i * g->stride_b;
            float *c = (float *)(uintptr_t)g->c + i * g->stride_c;
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, (float)g->alpha, a, g->lda, b, g->ldb,
                        0.0f, c, g->ldc);
        } else if (g->dtype == EM_DTYPE_F64) {
            const double *a = (const double *)(uintptr_t)g->a + i * g->stride_a,
                         *b = (const double *)(uintptr_t)g->b + i * g->stride_b;
            double *c = (double *)(uintptr_t)g->c + i * g->stride_c;
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, g->alpha, a, g->lda, b, g->ldb, 0.0, c,
                        g->ldc);
        } else {
            return em_error(EM_ERR_NOT_IMPLEMENTED, "host gemm: float32 and float64 only");
        }
    }
    return EM_OK;
}

static em_tensor *filled(const int64_t *shape, int nd, em_dtype dt, unsigned seed) {
    em_tensor *t = em_tensor_empty(shape, nd, EM_DTYPE_F64, em_cpu());
    for (int64_t i = 0; i < t->numel; i++) {
        seed = seed * 1103515245u + 12345u;
        ((double *)em_tensor_data(t))[i] = ((int)(seed >> 16) % 200 - 100) / 37.0;
    }
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    em_tensor *c = NULL;
    em_op_run(EM_OP_CAST, &t, 1, &a, &c, 1);
    em_tensor_release(t);
    return c;
}

static const em_device CUDA0 = {EM_DEVICE_CUDA, 0};

/* x @ y (x transposed first when tx: its last two dims swapped) against
 * the CPU's matmul; how many GEMM calls it made. */
static void check_case(const char *what, const int64_t *xs, int xn, const int64_t *ys, int yn, em_dtype dt,
                       bool tx, double alpha) {
    em_tensor *x = filled(xs, xn, dt, 1), *y = filled(ys, yn, dt, 2), *xg = NULL;
    if (tx) { /* (x made as its transpose, then viewed back, on both devices: not contiguous) */
        int64_t flip[EM_MAX_DIMS], perm[EM_MAX_DIMS];
        memcpy(flip, xs, (size_t)xn * sizeof *flip);
        flip[xn - 1] = xs[xn - 2];
        flip[xn - 2] = xs[xn - 1];
        for (int i = 0; i < xn; i++) perm[i] = i;
        perm[xn - 1] = xn - 2;
        perm[xn - 2] = xn - 1;
        em_tensor *base = filled(flip, xn, dt, 1), *base_g = em_to_device(base, CUDA0);
        em_tensor_release(x);
        x = em_permute(base, perm, xn);
        xg = base_g ? em_permute(base_g, perm, xn) : NULL;
        CHECK(xg && !em_tensor_is_contiguous(xg));
        em_tensor_release(base);
        em_tensor_release(base_g);
    }
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.alpha = alpha;
    em_tensor *pair[2] = {x, y}, *want = NULL;
    CHECK_MSG(em_op_run(EM_OP_MATMUL, pair, 2, &a, &want, 1) == EM_OK, "%s: %s", what, em_last_error());
    if (!xg) xg = em_to_device(x, CUDA0);
    em_tensor *yg = em_to_device(y, CUDA0);
    em_tensor *z = want ? em_tensor_empty(want->shape, want->ndim, dt, CUDA0) : NULL;
    int before = calls;
    em_status st = z && xg && yg ? em_cuda_matmul(xg, yg, z, alpha, host_gemm, NULL) : em_last_status();
    CHECK_MSG(st == EM_OK, "%s: %s", what, em_last_error());
    if (st == EM_OK) {
        em_tensor *got = em_to_device(z, em_cpu());
        double tol = dt == EM_DTYPE_F32 ? 1e-5 : 1e-12, worst = 0;
        for (int64_t i = 0; got && i < want->numel; i++) {
            double w = dt == EM_DTYPE_F32 ? ((float *)em_tensor_data(want))[i] : ((double *)em_tensor_data(want))[i];
            double g = dt == EM_DTYPE_F32 ? ((float *)em_tensor_data(got))[i] : ((double *)em_tensor_data(got))[i];
            double err = fabs(w - g) / (1.0 + fabs(w));
            worst = err > worst ? err : worst;
        }
        CHECK_MSG(got && worst <= tol, "%s: worst relative error %g", what, worst);
        printf("%-40s %d GEMM call%s, worst error %.1e\n", what, calls - before, calls - before == 1 ? "" : "s",
               worst);
        em_tensor_release(got);
    }
    em_tensor *objs[] = {x, y, want, xg, yg, z};
    for (int i = 0; i < 6; i++) em_tensor_release(objs[i]);
}

int main(void) {
    setenv("EMBER_CUDA_HOST_STAND_IN", "1", 1);
    em_cuda_device_register();
    CHECK(em_cuda_available(NULL, 0));
    const em_dtype F = EM_DTYPE_F32;
    check_case("[3,4] @ [4,5]", (int64_t[]){3, 4}, 2, (int64_t[]){4, 5}, 2, F, false, 1);
    check_case("[2,3,4] @ [4,5] (rows folded)", (int64_t[]){2, 3, 4}, 3, (int64_t[]){4, 5}, 2, F, false, 1);
    check_case("[2,3,4] @ [2,4,5] (batched)", (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 4, 5}, 3, F, false, 1);
    check_case("[3,4] @ [2,4,5] (x for all)", (int64_t[]){3, 4}, 2, (int64_t[]){2, 4, 5}, 3, F, false, 1);
    check_case("[1,3,4] @ [6,4,5] (x broadcast)", (int64_t[]){1, 3, 4}, 3, (int64_t[]){6, 4, 5}, 3, F, false, 1);
    check_case("[2,1,3,4] @ [1,3,4,5] (both expand)", (int64_t[]){2, 1, 3, 4}, 4, (int64_t[]){1, 3, 4, 5}, 4, F, false,
               1);
    check_case("[4] @ [4,5]", (int64_t[]){4}, 1, (int64_t[]){4, 5}, 2, F, false, 1);
    check_case("[3,4] @ [4]", (int64_t[]){3, 4}, 2, (int64_t[]){4}, 1, F, false, 1);
    check_case("[4] @ [4] (a dot)", (int64_t[]){4}, 1, (int64_t[]){4}, 1, F, false, 1);
    check_case("[4] @ [2,4,5]", (int64_t[]){4}, 1, (int64_t[]){2, 4, 5}, 3, F, false, 1);
    check_case("[2,3,4] @ [4] ", (int64_t[]){2, 3, 4}, 3, (int64_t[]){4}, 1, F, false, 1);
    check_case("[5,3,7]^T-ish @ [7,2] (x transposed)", (int64_t[]){5, 3, 7}, 3, (int64_t[]){7, 2}, 2, F, true, 1);
    check_case("[3,0] @ [0,5] (k = 0)", (int64_t[]){3, 0}, 2, (int64_t[]){0, 5}, 2, F, false, 1);
    check_case("[2,3,4] @ [2,4,5] float64", (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 4, 5}, 3, EM_DTYPE_F64, false, 1);
    check_case("[33,65] @ [65,17] alpha 2", (int64_t[]){33, 65}, 2, (int64_t[]){65, 17}, 2, F, false, 2);
    CHECK(batched_calls > 0);
    /* integers: refused by name, as PyTorch's CUDA matmul refuses them */
    int64_t s[2] = {2, 2};
    em_tensor *i = em_tensor_empty(s, 2, EM_DTYPE_I64, CUDA0), *z = em_tensor_empty(s, 2, EM_DTYPE_I64, CUDA0);
    CHECK(em_cuda_matmul(i, i, z, 1, host_gemm, NULL) == EM_ERR_NOT_IMPLEMENTED &&
          check_contains(em_last_error(), "cuda") && check_contains(em_last_error(), "int64"));
    em_tensor_release(i);
    em_tensor_release(z);
    return check_report();
}
