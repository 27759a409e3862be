/*
 * gelu_ref.c - the hand-written limit for bench_gelu.py: one loop over the
 * data, compiled with -O3 -march=native -ffast-math -fopenmp (so tanhf comes
 * from glibc's vector math library and both cores stream memory). What a
 * person would write in C for this exact formula; ember's compiled GELU is
 * measured against it.
 */
#include <math.h>
#include <stddef.h>

void gelu_ref(const float *restrict x, float *restrict y, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
