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
 * blended bitwise; a lane that saw a NaN comes out NaN (NaN wins, as in
 * PyTorch). Returns how many of the n elements it folded into the V lane
 * values written to out[]. */
#define VMINMAX(NAME, T, IT, V)                                                                    \
    typedef T NAME##_vt __attribute__((vector_size(V * sizeof(T))));                               \
    typedef IT NAME##_vi __attribute__((vector_size(V * sizeof(T))));                              \
    static inline NAME##_vt NAME##_pick(NAME##_vt v, NAME##_vt l, bool is_min) {                   \
        NAME##_vi take = is_min ? (NAME##_vi)(v < l) : (NAME##_vi)(v > l);                         \
        return (NAME##_vt)(((NAME##_vi)v & take) | ((NAME##_vi)l & ~take));                        \
    }                                                                                              \
    static inline int64_t NAME(const T *x, int64_t n, bool is_min, bool absval, double *out) {     \
        const NAME##_vi sign = (NAME##_vi){0} + ((IT)1 << (8 * sizeof(T) - 1));                    \
        T init = is_min ? (T)INFINITY : absval ? (T)0 : -(T)INFINITY;                              \
        NAME##_vt l[4];                                                                            \
        NAME##_vi nan = {0};                                                                       \
        for (int a = 0; a < 4; a++) l[a] = (NAME##_vt){0} + init;                                  \
        int64_t i = 0;                                                                             \
        /* four accumulators (no chain of dependent blends), NaNs on the side */                   \
        for (; i + 4 * V <= n; i += 4 * V)                                                         \
            for (int a = 0; a < 4; a++) {                                                          \
                NAME##_vt v;                                                                       \
                memcpy(&v, x + i + a * V, sizeof v);                                               \
                if (absval) v = (NAME##_vt)((NAME##_vi)v & ~sign);                                 \
                nan |= (NAME##_vi)(v != v);                                                        \
                l[a] = NAME##_pick(v, l[a], is_min);                                               \
            }                                                                                      \
        for (; i + V <= n; i += V) {                                                               \
            NAME##_vt v;                                                                           \
            memcpy(&v, x + i, sizeof v);                                                           \
            if (absval) v = (NAME##_vt)((NAME##_vi)v & ~sign);                                     \
            nan |= (NAME##_vi)(v != v);                                                            \
            l[0] = NAME##_pick(v, l[0], is_min);                                                   \
        }                                                                                          \
        NAME##_vt r = NAME##_pick(NAME##_pick(l[1], l[0], is_min),                                 \
                                  NAME##_pick(l[3], l[2], is_min), is_min);                        \
        for (int k = 0; k < V; k++) out[k] = nan[k] ? (double)NAN : (double)r[k];                 \
        return i;                                                                                  \
    }
/* Lanes per vector: one register's worth where the CPU has 64-byte vectors
 * (AVX-512), half as many otherwise (on AVX2 the 64-byte vectors' four
 * accumulators do not fit in registers and spill). Callers size their
 * lane arrays with these. */
#ifdef __AVX512F__
#define VMM_F32 16
#define VMM_F64 8
#else
#define VMM_F32 8
#define VMM_F64 4
#endif
VMINMAX(vminmax_f32, float, uint32_t, VMM_F32)
VMINMAX(vminmax_f64, double, uint64_t, VMM_F64)

/* argmax/argmin over contiguous float data the same way: per lane the best
 * value and its (first) index; NaN beats everything, the first NaN staying.
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
VARG(vargminmax_f32, float, uint32_t, VMM_F32)
VARG(vargminmax_f64, double, uint64_t, VMM_F64)

/* The sum of contiguous float32 data at float speed and double accuracy:
 * 64 float lanes (four independent 16-lane vectors: one vector's adds would
 * wait on each other, four keep the adder busy) add up chunks of 256
 * elements (4 per lane: an ulp or two at most), the four fold pairwise into
 * 16, and each chunk's 16 lanes go into double lanes. Returns how many
 * elements it summed into out[0..16). */
static inline int64_t vsum_f32(const float *x, int64_t n, double *out) {
    typedef float v16f __attribute__((vector_size(64)));
    double acc[16] = {0};
    int64_t i = 0;
    for (; i + 256 <= n; i += 256) {
        v16f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
        for (int j = 0; j < 256; j += 64) {
            v16f v0, v1, v2, v3;
            memcpy(&v0, x + i + j, sizeof v0);
            memcpy(&v1, x + i + j + 16, sizeof v1);
            memcpy(&v2, x + i + j + 32, sizeof v2);
            memcpy(&v3, x + i + j + 48, sizeof v3);
            s0 += v0;
            s1 += v1;
            s2 += v2;
            s3 += v3;
        }
        v16f s = (s0 + s1) + (s2 + s3);
        for (int k = 0; k < 16; k++) acc[k] += (double)s[k];
    }
    for (int k = 0; k < 16; k++) out[k] = acc[k];
    return i;
}

#endif
