/*
 * source_text.h - what the CUDA C generators share (not public): the names
 * dtypes have in generated code, and a value converted between dtypes as
 * the eager kernels convert it (ops_math.h's sc_cast_<from>_<to>).
 */
#ifndef EMBER_CODEGEN_CUDA_SOURCE_TEXT_H
#define EMBER_CODEGEN_CUDA_SOURCE_TEXT_H

#include "ember/status.h"
#include "ember/strbuf.h"
#include "ember/types.h"

/* The suffix of dt's scalar definitions: "f32", "b8" (ops_math.h). */
const char *em_cuda_sfx(em_dtype dt);
/* dt's type in device code: "float", "em_sc_i64", "bool" (ops_math.h's names). */
const char *em_cuda_ctype(em_dtype dt);
/* Appends x converted from dtype `from` to `to` (x itself when they are equal). */
void em_cuda_convert(em_strbuf *s, const char *x, em_dtype from, em_dtype to);

/* Device code the folding generators (reductions, ops along lines) share:
 * em_isinf, and em_add / em_mul over the value types (double, and int64
 * wrapping as the CPU's accumulators). */
#define EM_CUDA_FOLD_HELPERS \
    "template <class V> static __device__ __forceinline__ bool em_isinf(V x) { return x - x != x - x && x == x; }\n" \
    "static __device__ __forceinline__ double em_add(double a, double b) { return a + b; }\n" \
    "static __device__ __forceinline__ em_sc_i64 em_add(em_sc_i64 a, em_sc_i64 b) {\n" \
    "    return (em_sc_i64)((em_sc_u64)a + (em_sc_u64)b);\n" \
    "}\n" \
    "static __device__ __forceinline__ double em_mul(double a, double b) { return a * b; }\n" \
    "static __device__ __forceinline__ em_sc_i64 em_mul(em_sc_i64 a, em_sc_i64 b) {\n" \
    "    return (em_sc_i64)((em_sc_u64)a * (em_sc_u64)b);\n" \
    "}\n"

/* A kernel's dtypes against the op table: `inferred` is the status of
 * inferring op `name` on an input of dtype in, `got` its result dtype.
 * An error naming the op and the dtypes unless it inferred `out`. */
em_status em_cuda_check_inferred(const char *name, em_dtype in, em_dtype out, em_status inferred, em_dtype got);

/* The generated text in s (taken: s is empty after), or NULL with an
 * out-of-memory error. */
char *em_cuda_source_take(em_strbuf *s);
/* The PTX of src (malloc'd, the caller's; NULL: em_last_status(), the
 * generator's error) for compute capability sm, compiled once (em_cuda_ptx);
 * frees src. */
em_status em_cuda_source_ptx(char *src, const char *name, int sm, char **ptx);

#endif
