/*
 * minmax.h - vectorised max/min folds for the reduction and scan kernels.
 */
#ifndef EMBER_CPU_MINMAX_H
#define EMBER_CPU_MINMAX_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* max/min over contiguous float32/float64 data with GCC vector extensions:
 * gcc will not vectorise a floating-point max reduction by itself (it would
 * need -ffinite-math-only), nor select on lanes kept in an array. Lanes are
 * blended bitwise; NaN wins and stays, as in PyTorch. Returns how many of
 * the n elements it folded into the V lane values written to out[]. */
#define VMINMAX(NAME, T, IT, V)                                                                    \
    typedef T NAME##_vt __attribute__((vector_size(V * sizeof(T))));                               \
    typedef IT NAME##_vi __attribute__((vector_size(V * sizeof(T))));                              \
    static inline int64_t NAME(const T *x, int64_t n, bool is_min, bool absval, double *out) {            \
        NAME##_vt l;                                                                               \
        for (int k = 0; k < V; k++) l[k] = is_min ? (T)INFINITY : absval ? (T)0 : -(T)INFINITY;    \
        int64_t i = 0;                                                                             \
        for (; i + V <= n; i += V) {                                                               \
            NAME##_vt v;                                                                           \
            memcpy(&v, x + i, sizeof v);                                                           \
            if (absval) /* clear the sign bits */                                                  \
                v = (NAME##_vt)((NAME##_vi)v & ~((NAME##_vi){0} + ((IT)1 << (8 * sizeof(T) - 1))));  \
            NAME##_vi better = is_min ? (NAME##_vi)(v < l) : (NAME##_vi)(v > l);                   \
            NAME##_vi nan = (NAME##_vi)(v != v);                                                   \
            NAME##_vi take = better | nan;                                                         \
            l = (NAME##_vt)(((NAME##_vi)v & take) | ((NAME##_vi)l & ~take));                       \
        }                                                                                          \
        for (int k = 0; k < V; k++) out[k] = (double)l[k];                                         \
        return i;                                                                                  \
    }
VMINMAX(vminmax_f32, float, uint32_t, 16)
VMINMAX(vminmax_f64, double, uint64_t, 8)

#endif
