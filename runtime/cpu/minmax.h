/*
 * minmax.h - vectorised argmax/argmin folds for the reduction kernels.
 */
#ifndef EMBER_CPU_MINMAX_H
#define EMBER_CPU_MINMAX_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ember/ops_fold.h" /* the max/min and sum folds: shared with the LLVM backend */

/* argmax/argmin over contiguous float data as ops_fold.h folds max/min: per
 * lane the best value and its (first) index; NaN beats everything, the first NaN staying.
 * Folds the lanes into *val, *idx (ties and NaNs: the smallest index) and
 * returns how many elements it covered (0: nothing; val and idx untouched). */
#define VARG(NAME, T, IT, V)                                                                       \
    typedef T NAME##_vt __attribute__((vector_size(V * sizeof(T))));                               \
    typedef IT NAME##_vi __attribute__((vector_size(V * sizeof(T))));                              \
    static inline int64_t NAME(const T *x, int64_t n, bool is_min, double *val, int64_t *idx) {    \
        if (n < V) return 0;                                                                       \
        NAME##_vt l;                                                                               \
        NAME##_vi li, at;                                                                          \
        for (int k = 0; k < V; k++) {                                                              \
            l[k] = x[k];                                                                           \
            li[k] = (IT)k;                                                                         \
            at[k] = (IT)k;                                                                         \
        }                                                                                          \
        int64_t i = V;                                                                             \
        for (; i + V <= n; i += V) {                                                               \
            NAME##_vt v;                                                                           \
            memcpy(&v, x + i, sizeof v);                                                           \
            at += (IT)V;                                                                           \
            NAME##_vi better = is_min ? (NAME##_vi)(v < l) : (NAME##_vi)(v > l);                   \
            NAME##_vi take = better | ((NAME##_vi)(v != v) & (NAME##_vi)(l == l));                 \
            l = (NAME##_vt)(((NAME##_vi)v & take) | ((NAME##_vi)l & ~take));                       \
            li = (at & take) | (li & ~take);                                                       \
        }                                                                                          \
        double bv = l[0];                                                                          \
        int64_t bi = (int64_t)li[0];                                                               \
        for (int k = 1; k < V; k++) {                                                              \
            double c = l[k];                                                                       \
            int64_t ci = (int64_t)li[k];                                                           \
            bool bnan = bv != bv, cnan = c != c;                                                   \
            bool wins = cnan ? (!bnan || ci < bi)                                                  \
                             : (!bnan && ((is_min ? c < bv : c > bv) || (c == bv && ci < bi)));   \
            if (wins) {                                                                            \
                bv = c;                                                                            \
                bi = ci;                                                                           \
            }                                                                                      \
        }                                                                                          \
        *val = bv;                                                                                 \
        *idx = bi;                                                                                 \
        return i;                                                                                  \
    }
VARG(vargminmax_f32, float, uint32_t, EM_FOLD_VF32)
VARG(vargminmax_f64, double, uint64_t, EM_FOLD_VF64)

#endif
