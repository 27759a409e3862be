/*
 * ew_ref.c - hand-written limits for bench_ops.py's 16M-element elementwise
 * ops: one loop each over float32 data, compiled with -O3 -march=native
 * -ffast-math -fopenmp (both cores stream memory; expf/tanhf come from
 * glibc's vector math library). What a person would write in C.
 */
#include <math.h>
#include <stddef.h>

#define LOOP1(name, expr)                                                                          \
    void name(const float *restrict x, float *restrict y, size_t n) {                              \
        _Pragma("omp parallel for simd schedule(static)") for (size_t i = 0; i < n; i++) {         \
            float v = x[i];                                                                        \
            y[i] = (expr);                                                                         \
        }                                                                                          \
    }
#define LOOP2(name, expr)                                                                          \
    void name(const float *restrict x, const float *restrict z, float *restrict y, size_t n) {     \
        _Pragma("omp parallel for simd schedule(static)") for (size_t i = 0; i < n; i++) {         \
            float v = x[i], w = z[i];                                                              \
            y[i] = (expr);                                                                         \
        }                                                                                          \
    }

LOOP2(ref_add, v + w)
LOOP2(ref_mul, v * w)
LOOP2(ref_maximum, v > w ? v : w)
LOOP1(ref_relu, v > 0.0f ? v : 0.0f)
LOOP1(ref_abs, fabsf(v))
LOOP1(ref_exp, expf(v))
LOOP1(ref_tanh, tanhf(v))
LOOP1(ref_sigmoid, 1.0f / (1.0f + expf(-v)))
LOOP1(ref_sqrt, sqrtf(fabsf(v)))
