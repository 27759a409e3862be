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

#define LIB_UNARY(name, S, T, sfx)                                                                 \
    T em_scalar_##name##_##sfx(T x);                                                               \
    T em_scalar_##name##_##sfx(T x) { return sc_##name##_##sfx(x); }
#define LIB_BINARY(name, S, T, sfx)                                                                \
    T em_scalar_##name##_##sfx(T a, T b);                                                          \
    T em_scalar_##name##_##sfx(T a, T b) { return sc_##name##_##sfx(a, b); }

#define LIB_1 LIB_UNARY
#define LIB_2 LIB_BINARY
#define GEN_LIB(E, n, dts, arity) EM_FOR_DTYPES_##dts(LIB_##arity, n)
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at) EM_EW_ROW_##kind(GEN_LIB, E, n, dts)
#include "ember/ops.def"
#undef EM_OP

#define LIB_CAST(FS, FT, fsfx, TS, TT, tsfx)                                                       \
    TT em_scalar_cast_##fsfx##_##tsfx(FT x);                                                       \
    TT em_scalar_cast_##fsfx##_##tsfx(FT x) { return sc_cast_##fsfx##_##tsfx(x); }
#define UNPACK(...) __VA_ARGS__
#define APPLY(m, ...) m(__VA_ARGS__)
#define CAST_INNER(from, S, T, sfx) APPLY(LIB_CAST, UNPACK from, S, T, sfx)
#define CAST_OUTER(unused, S, T, sfx) EM_FOR_DTYPES_ALL_INNER(CAST_INNER, (S, T, sfx))
EM_FOR_DTYPES_ALL(CAST_OUTER, _)
