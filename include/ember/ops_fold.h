/*
 * ops_fold.h - how contiguous float runs fold into a sum, a max or a min:
 * the one definition that the eager reduction kernels (runtime/cpu/
 * reduce.c, compiled by the host compiler) and the LLVM backend's row
 * kernels (codegen_llvm/scalar_library.c, compiled by clang to bitcode and
 * inlined into generated code) both use, so a reduction fused into a
 * compiled kernel has the eager result's bits, as ops_math.h does for
 * elementwise ops. Runs fold into lanes combined in a fixed order, so the
 * result does not depend on the number of threads either.
 *
 * The lane counts of the max/min folds follow the vector width the
 * compiler targets; the build compiles the bitcode for the same CPU as the
 * eager kernels (-march=native on both, or on neither), so they agree.
 */
#ifndef EMBER_OPS_FOLD_H
#define EMBER_OPS_FOLD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define EM_FOLD_BLOCK 65536 /* a row folds in blocks this long, each from the identity */
#define EM_FOLD_LANES 8     /* double lanes after the vector folds, before the tail */

/* The fold rules, on doubles. NaN wins and stays, as in PyTorch. step: the
 * fold so far (a) and its next value (x); lane: one lane's running value. */
static inline double em_fold_max_step(double a, double x, bool is_min) {
    return (a != a || !(x != x || (is_min ? x < a : x > a))) ? a : x;
}
static inline double em_fold_max_lane(double l, double v, bool is_min) {
    double t = is_min ? (v < l ? v : l) : (v > l ? v : l);
    return v != v ? v : t; /* two selects: vectorises */
}

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
#define EM_FOLD_VF32 16
#define EM_FOLD_VF64 8
#else
#define EM_FOLD_VF32 8
#define EM_FOLD_VF64 4
#endif
VMINMAX(em_fold_vminmax_f32, float, uint32_t, EM_FOLD_VF32)
VMINMAX(em_fold_vminmax_f64, double, uint64_t, EM_FOLD_VF64)

/* The sum of contiguous float32 data at float speed and double accuracy:
 * 64 float lanes (four independent 16-lane vectors: one vector's adds would
 * wait on each other, four keep the adder busy) add up chunks of 256
 * elements (4 per lane: an ulp or two at most), the four fold pairwise into
 * 16, and each chunk's 16 lanes go into double lanes. Returns how many
 * elements it summed into out[0..16). */
static inline int64_t em_fold_vsum_f32(const float *x, int64_t n, double *out) {
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


/* A run of n contiguous float32 elements added into a. */
static inline double em_fold_sum_run_f32(const float *x, int64_t n, double a) {
    double sl[16];
    int64_t i = em_fold_vsum_f32(x, n, sl);
    double t = 0;
    for (int k = 0; k < 16; k++) t += sl[k];
    a += t;
    if (n - i >= EM_FOLD_LANES) {
        double l[EM_FOLD_LANES] = {0};
        for (; i + EM_FOLD_LANES <= n; i += EM_FOLD_LANES)
            for (int k = 0; k < EM_FOLD_LANES; k++) l[k] += (double)x[i + k];
        for (int k = 0; k < EM_FOLD_LANES; k++) a += l[k];
    }
    for (; i < n; i++) a += 0.0 + (double)x[i];
    return a;
}

/* A run of n contiguous float32 elements' max (min) folded into a. */
static inline double em_fold_max_run_f32(const float *x, int64_t n, bool is_min, double a) {
    double vl[EM_FOLD_VF32];
    int64_t i = em_fold_vminmax_f32(x, n, is_min, false, vl);
    for (int k = 0; k < EM_FOLD_VF32 && i > 0; k++) a = em_fold_max_step(a, vl[k], is_min);
    if (n - i >= EM_FOLD_LANES) {
        double l[EM_FOLD_LANES];
        for (int k = 0; k < EM_FOLD_LANES; k++) l[k] = is_min ? INFINITY : -INFINITY;
        for (; i + EM_FOLD_LANES <= n; i += EM_FOLD_LANES)
            for (int k = 0; k < EM_FOLD_LANES; k++) l[k] = em_fold_max_lane(l[k], (double)x[i + k], is_min);
        for (int k = 0; k < EM_FOLD_LANES; k++) a = em_fold_max_step(a, l[k], is_min);
    }
    for (; i < n; i++) a = em_fold_max_step(a, (double)x[i], is_min); /* (a lane from the identity is x[i]) */
    return a;
}

/* A whole row as the eager rows strategy folds it: blocks of EM_FOLD_BLOCK,
 * each run from the identity, combined in order. */
static inline double em_fold_sum_row_f32(const float *x, int64_t n) {
    double acc = 0.0;
    for (int64_t b = 0; b < n; b += EM_FOLD_BLOCK) {
        double part = 0.0 + em_fold_sum_run_f32(x + b, n - b < EM_FOLD_BLOCK ? n - b : EM_FOLD_BLOCK, 0.0);
        acc = b == 0 ? part : acc + part;
    }
    return acc;
}
static inline double em_fold_max_row_f32(const float *x, int64_t n, bool is_min) {
    double id = is_min ? INFINITY : -INFINITY, acc = id;
    for (int64_t b = 0; b < n; b += EM_FOLD_BLOCK) {
        double part = em_fold_max_run_f32(x + b, n - b < EM_FOLD_BLOCK ? n - b : EM_FOLD_BLOCK, is_min, id);
        part = em_fold_max_step(id, part, is_min);
        acc = b == 0 ? part : em_fold_max_step(acc, part, is_min);
    }
    return acc;
}

#endif
