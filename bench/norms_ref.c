/*
 * norms_ref.c - the hand-written limits for bench_norms.py: softmax and
 * layer norm over the rows of a row-major float32 matrix, each row read
 * from memory once and kept in cache for its later passes, rows split
 * across the cores (gcc -O3 -march=native -ffast-math -fopenmp: expf and
 * the sums vectorise). What a person would write in C for these ops.
 */
#include <math.h>
#include <stddef.h>

void softmax_ref(const float *restrict x, float *restrict y, size_t rows, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float m = -INFINITY, s = 0.0f;
        for (size_t i = 0; i < n; i++) m = fmaxf(m, xr[i]);
#pragma omp simd reduction(+ : s)
        for (size_t i = 0; i < n; i++) {
            float e = expf(xr[i] - m);
            yr[i] = e;
            s += e;
        }
        float inv = 1.0f / s;
#pragma omp simd
        for (size_t i = 0; i < n; i++) yr[i] *= inv;
    }
}

void layer_norm_ref(const float *restrict x, const float *restrict w, const float *restrict b,
                    float *restrict y, size_t rows, size_t n, float eps) {
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float s = 0.0f, ss = 0.0f;
#pragma omp simd reduction(+ : s, ss)
        for (size_t i = 0; i < n; i++) {
            s += xr[i];
            ss += xr[i] * xr[i];
        }
        float mean = s / (float)n, var = ss / (float)n - mean * mean;
        float rstd = 1.0f / sqrtf(var + eps);
#pragma omp simd
        for (size_t i = 0; i < n; i++) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
    }
}

/* mean over rows of logsumexp(row) - row[target]: cross-entropy of logits */
float cross_entropy_ref(const float *restrict x, const long *restrict target, size_t rows, size_t n) {
    double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float m = -INFINITY, s = 0.0f;
        for (size_t i = 0; i < n; i++) m = fmaxf(m, xr[i]);
#pragma omp simd reduction(+ : s)
        for (size_t i = 0; i < n; i++) s += expf(xr[i] - m);
        total += (double)(m + logf(s) - xr[target[r]]);
    }
    return (float)(total / (double)rows);
}
