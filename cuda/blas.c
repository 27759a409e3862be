/*
 * blas.c - matmul on the CUDA device through cuBLAS (libcublas, dlopen):
 * one strided-batched GEMM per matmul (matmul.c maps a batched, broadcast
 * row-major matmul to it), float32 without TF32 unless
 * ember.backends.cuda.matmul.allow_tf32, float64, and float16/bfloat16
 * through cublasGemmStridedBatchedEx. One handle per device, on its stream.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "matmul.h"
#include "ember/cuda.h"

/* ---- matmul: cuBLAS (libcublas, dlopen), the mapping in matmul.c ---- */

/* cuBLAS's entry points (cublas_api.h, CUDA 12 and later). A handle
 * starts in the default math mode, so float32 GEMMs do not use TF32
 * (PyTorch's default); allow_tf32 switches it (em_cuda_set_allow_tf32). */
static struct {
    char why[512];
    int (*create)(void **handle);
    int (*set_stream)(void *handle, CUstream stream);
    int (*sgemm)(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
                 int lda, long long sa, const float *b, int ldb, long long sb, const float *beta,
                 float *c, int ldc, long long sc, int batch);
    int (*dgemm)(void *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a,
                 int lda, long long sa, const double *b, int ldb, long long sb, const double *beta,
                 double *c, int ldc, long long sc, int batch);
    int (*gemm_ex)(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a,
                   int atype, int lda, long long sa, const void *b, int btype, int ldb,
                   long long sb, const void *beta, void *c, int ctype, int ldc, long long sc,
                   int batch, int compute, int algo);
    int (*set_math_mode)(void *handle, int mode);
} blas;

static bool allow_tf32; /* (torch.backends.cuda.matmul.allow_tf32) */

void em_cuda_set_allow_tf32(bool on) {
    __atomic_store_n(&allow_tf32, on, __ATOMIC_RELAXED);
}
bool em_cuda_allow_tf32(void) {
    return __atomic_load_n(&allow_tf32, __ATOMIC_RELAXED);
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void load_blas(void) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(blas.why, sizeof blas.why,
                 "cuBLAS could not be loaded (tried libcublas.so.13, .12 and .so: %s)", dlerror());
        return;
    }
    *(void **)&blas.create = dlsym(lib, "cublasCreate_v2");
    *(void **)&blas.set_stream = dlsym(lib, "cublasSetStream_v2");
    *(void **)&blas.sgemm = dlsym(lib, "cublasSgemmStridedBatched");
    *(void **)&blas.dgemm = dlsym(lib, "cublasDgemmStridedBatched");
    *(void **)&blas.gemm_ex = dlsym(lib, "cublasGemmStridedBatchedEx");
    *(void **)&blas.set_math_mode = dlsym(lib, "cublasSetMathMode");
    if (!blas.create || !blas.set_stream || !blas.sgemm || !blas.dgemm || !blas.gemm_ex ||
        !blas.set_math_mode)
        snprintf(blas.why, sizeof blas.why,
                 "the cuBLAS loaded lacks the strided-batched GEMMs (too old for ember)");
}

enum {
    CUBLAS_OP_N = 0,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_GEMM_DEFAULT = -1,
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
};

static em_status cublas_gemm(void *ctx, const em_cuda_gemm *g) {
    cuda_dev *d = ctx;
    const void *a = (const void *)(uintptr_t)g->a, *b = (const void *)(uintptr_t)g->b;
    void *c = (void *)(uintptr_t)g->c;
    int rc;
    if (g->dtype == EM_DTYPE_F32) {
        float alpha = (float)g->alpha, beta = 0;
        int mode = em_cuda_allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
        if (mode != d->blas_mode && (rc = blas.set_math_mode(d->blas, mode)) != 0)
            return em_error(EM_ERR_RUNTIME, "matmul: cuBLAS refused its math mode (status %d)", rc);
        d->blas_mode = mode;
        rc = blas.sgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &alpha, a, g->lda,
                        g->stride_a, b, g->ldb, g->stride_b, &beta, c, g->ldc, g->stride_c,
                        g->batch);
    } else if (g->dtype == EM_DTYPE_F64) {
        double alpha = g->alpha, beta = 0;
        rc = blas.dgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &alpha, a, g->lda,
                        g->stride_a, b, g->ldb, g->stride_b, &beta, c, g->ldc, g->stride_c,
                        g->batch);
    } else { /* float16, bfloat16: products summed in float32, rounded once */
        float alpha = (float)g->alpha, beta = 0;
        int t = g->dtype == EM_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
        rc = blas.gemm_ex(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &alpha, a, t, g->lda,
                          g->stride_a, b, t, g->ldb, g->stride_b, &beta, c, t, g->ldc, g->stride_c,
                          g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    return rc == 0 ? EM_OK
                   : em_error(EM_ERR_RUNTIME,
                              "matmul: cuBLAS failed (status %d) on a %d x %d x %d GEMM", rc, g->m,
                              g->n, g->k);
}

em_status em_cuda_run_matmul(cuda_dev *d, em_tensor *const *in, const em_attrs *attrs,
                             em_tensor *out) {
    pthread_once(&blas_once, load_blas);
    if (blas.why[0])
        return em_error(EM_ERR_NOT_IMPLEMENTED, "matmul on cuda needs cuBLAS: %s", blas.why);
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (!d->blas && (rc = blas.create(&d->blas)) == 0 &&
        (rc = blas.set_stream(d->blas, d->stream)) != 0)
        d->blas = NULL;
    pthread_mutex_unlock(&d->lock);
    if (rc != 0)
        return em_error(EM_ERR_RUNTIME, "matmul: cuBLAS did not start on cuda:%d (status %d)",
                        d->dev, rc);
    return em_cuda_matmul(in[0], in[1], out, em_matmul_alpha(attrs), cublas_gemm, d);
}
