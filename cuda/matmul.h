/*
 * matmul.h - matmul on the CUDA device as GEMM calls (matmul.c): how a
 * row-major ember matmul (batched, broadcast, 1-d operands) becomes
 * column-major strided-batched GEMMs, separate from the library that runs
 * them (cuBLAS on a GPU: blas.c), so the mapping is tested on the host
 * with a reference GEMM (tests/c/test_cuda_matmul.c). Not public.
 */
#ifndef EMBER_CUDA_MATMUL_H
#define EMBER_CUDA_MATMUL_H

#include <stdint.h>

#include "ember/ops.h"

/* One column-major strided-batched GEMM, BLAS's meaning without
 * transposes: for each of `batch`, C = alpha * A @ B with A m x k (lda),
 * B k x n (ldb), C m x n (ldc), each batch `stride_*` elements on (0:
 * the same matrix for every batch). Addresses are the device's. */
typedef struct em_cuda_gemm {
    em_dtype dtype; /* float32, float64, float16 or bfloat16 (the last two
                       computed in float32) */
    int m, n, k, batch;
    double alpha;
    uint64_t a, b, c;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
} em_cuda_gemm;

typedef em_status (*em_cuda_gemm_fn)(void *ctx, const em_cuda_gemm *g);

/* z = alpha * x @ y (z of the shape and dtype inference gives) through
 * gemm: operands made contiguous (and a partly broadcast batch expanded)
 * by the device's own ops, a result that is not contiguous written
 * through a temporary. Dtypes other than float32/64 and float16/bfloat16
 * of one dtype: NOT_IMPLEMENTED, naming them. */
em_status em_cuda_matmul(em_tensor *x, em_tensor *y, em_tensor *z, double alpha,
                         em_cuda_gemm_fn gemm, void *ctx);

#endif
