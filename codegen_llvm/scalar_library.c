/*
 * scalar_library.c - ops_math.h as functions with external names, compiled
 * by clang to LLVM bitcode at build time (not by the host compiler).
 *
 * The LLVM backend links this bitcode into every module it generates and
 * calls em_scalar_<op>_<dtype> / em_scalar_cast_<from>_<to>; the functions
 * inline into the kernels. Because the eager kernels compile the very same
 * ops_math.h, compiled and eager results agree to the last bit.
 */
#include "ember/ops.h"
#include "ember/ops_math.h"

/* em_scalar_<op>_<dtype>, by shape and arity (see EM_EW_SHAPE_* in ops.h) */
#define LIB_SAME_1(op, T, sfx)                                                                     \
    T em_scalar_##op##_##sfx(T a);                                                                 \
    T em_scalar_##op##_##sfx(T a) { return sc_##op##_##sfx(a); }
#define LIB_SAME_2(op, T, sfx)                                                                     \
    T em_scalar_##op##_##sfx(T a, T b);                                                            \
    T em_scalar_##op##_##sfx(T a, T b) { return sc_##op##_##sfx(a, b); }
#define LIB_SAME_3(op, T, sfx)                                                                     \
    T em_scalar_##op##_##sfx(T a, T b, T c);                                                       \
    T em_scalar_##op##_##sfx(T a, T b, T c) { return sc_##op##_##sfx(a, b, c); }
#define LIB_PRED_1(op, T, sfx)                                                                     \
    bool em_scalar_##op##_##sfx(T a);                                                              \
    bool em_scalar_##op##_##sfx(T a) { return sc_##op##_##sfx(a); }
#define LIB_PRED_2(op, T, sfx)                                                                     \
    bool em_scalar_##op##_##sfx(T a, T b);                                                         \
    bool em_scalar_##op##_##sfx(T a, T b) { return sc_##op##_##sfx(a, b); }
#define LIB_WHERE_3(op, T, sfx)                                                                    \
    T em_scalar_##op##_##sfx(bool c, T a, T b);                                                    \
    T em_scalar_##op##_##sfx(bool c, T a, T b) { return sc_##op##_##sfx(c, a, b); }

#define APPLY(m, ...) m(__VA_ARGS__)
#define UNPACK(...) __VA_ARGS__
#define LIB_(op, arity, shape, T, sfx) LIB_##shape##_##arity(op, T, sfx)
#define LIB(arg, S, T, sfx) APPLY(LIB_, UNPACK arg, T, sfx)
#define GEN_LIB(E, n, dts, arity, shape) EM_FOR_DTYPES_##dts(LIB, (n, arity, shape))
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(GEN_LIB, E, n, dts, pr)
#include "ember/ops.def"
#undef EM_OP

#define LIB_CAST(FS, FT, fsfx, TS, TT, tsfx)                                                       \
    TT em_scalar_cast_##fsfx##_##tsfx(FT x);                                                       \
    TT em_scalar_cast_##fsfx##_##tsfx(FT x) { return sc_cast_##fsfx##_##tsfx(x); }
#define CAST_INNER(from, S, T, sfx) APPLY(LIB_CAST, UNPACK from, S, T, sfx)
#define CAST_OUTER(unused, S, T, sfx) EM_FOR_DTYPES_STORED_INNER(CAST_INNER, (S, T, sfx))
EM_FOR_DTYPES_STORED(CAST_OUTER, _)

/* A contiguous float32 row's sum, max and min (ops_fold.h), in double: the
 * row kernels call them for fused sum, mean, amax and amin. */
#include "ember/ops_fold.h"
double em_scalar_row_sum_f32(const float *x, int64_t n);
double em_scalar_row_sum_f32(const float *x, int64_t n) { return em_fold_sum_row_f32(x, n); }
double em_scalar_row_max_f32(const float *x, int64_t n);
double em_scalar_row_max_f32(const float *x, int64_t n) { return em_fold_max_row_f32(x, n, false); }
double em_scalar_row_min_f32(const float *x, int64_t n);
double em_scalar_row_min_f32(const float *x, int64_t n) { return em_fold_max_row_f32(x, n, true); }

/* Streaming stores (ops_stream.h) for row kernels whose output is too big
 * for the cache: a row's elements before its first 64-byte boundary, one
 * 64-byte block from 16 computed floats, and the fence after a kernel's
 * last streamed store. */
#include "ember/ops_stream.h"
int64_t em_scalar_stream_head_f32(const float *p, int64_t n);
int64_t em_scalar_stream_head_f32(const float *p, int64_t n) { return em_stream_head(p, n); }
void em_scalar_stream_block_f32(float *p, const float *v);
void em_scalar_stream_block_f32(float *p, const float *v) { em_stream_block_f32(p, v); }
void em_scalar_stream_fence(void);
void em_scalar_stream_fence(void) { em_stream_fence(); }
