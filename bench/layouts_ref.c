/* Hand-written C limits for bench_layouts.py: the same three loops as the
 * benchmark's workloads, -O3 -march=native, OpenMP over 2 threads. */
#include <stddef.h>

/* out[c] = sum_r 2 * x[r][c]: rows streamed, per-thread partial rows. */
void colsum_scaled_ref(const float *x, float *out, size_t rows, size_t cols) {
    for (size_t c = 0; c < cols; c++) out[c] = 0.0f;
#pragma omp parallel num_threads(2)
    {
        float part[8192];
        for (size_t c = 0; c < cols; c++) part[c] = 0.0f;
#pragma omp for schedule(static)
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) part[c] += 2.0f * x[r * cols + c];
#pragma omp critical
        for (size_t c = 0; c < cols; c++) out[c] += part[c];
    }
}

/* out[i][j] = 2 * x[j][i] + 1, in 32 x 32 tiles. */
void transpose_scaled_ref(const float *x, float *out, size_t n) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (size_t ti = 0; ti < n; ti += 32)
        for (size_t tj = 0; tj < n; tj += 32)
            for (size_t i = ti; i < ti + 32 && i < n; i++)
                for (size_t j = tj; j < tj + 32 && j < n; j++) out[i * n + j] = 2.0f * x[j * n + i] + 1.0f;
}

/* out[i][j] = 2 * x[i + 1][2 j] over an n x n x. */
void strided_scaled_ref(const float *x, float *out, size_t n) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (size_t i = 0; i < n - 1; i++)
        for (size_t j = 0; j < n / 2; j++) out[i * (n / 2) + j] = 2.0f * x[(i + 1) * n + 2 * j];
}
