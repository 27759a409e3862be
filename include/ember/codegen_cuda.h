/*
 * codegen_cuda.h - CUDA C generated from the op table, compiled by NVRTC
 * (codegen_cuda/).
 *
 * Nothing here needs a GPU or a driver: NVRTC is a compiler, loaded at run
 * time with dlopen (no CUDA library is linked), so every machine with the
 * CUDA Toolkit compiles the generated kernels to PTX, and the tests check
 * the PTX with ptxas. Running them is the CUDA device's (issue 17; not
 * built yet: a tensor on "cuda" raises NotImplementedError).
 */
#ifndef EMBER_CODEGEN_CUDA_H
#define EMBER_CODEGEN_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "ember/ops.h"
#include "ember/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- NVRTC (codegen_cuda/nvrtc.c) ---- */

/* Can NVRTC be loaded? Otherwise false, and `why` (if not NULL) says which
 * libraries were tried and what to install. */
bool em_nvrtc_available(char *why, size_t why_size);
em_status em_nvrtc_version(int *major, int *minor);
/* Compiles CUDA C `source` (named `name` in messages) for compute
 * capability `sm` (90: sm_90) into PTX (*ptx malloc'd, NUL-terminated),
 * handing NVRTC headers[0..n_headers) under header_names. *log (if not
 * NULL) receives NVRTC's log, malloc'd, or NULL. Without contractions (the
 * CPU's rounding) and as C++17. An error quoting NVRTC's log when the
 * source does not compile. */
em_status em_nvrtc_compile(const char *source, const char *name, int n_headers, const char *const *headers,
                           const char *const *header_names, int sm, char **ptx, char **log);

/* ---- eager elementwise kernels (codegen_cuda/ew_source.c) ---- */

typedef enum em_cuda_layout {
    EM_CUDA_CONTIG,  /* every operand contiguous and 16-byte aligned: 16-byte vector loads */
    EM_CUDA_STRIDED, /* any strides (broadcasts: 0), from an em_cuda_geometry */
} em_cuda_layout;

/* What the strided kernels take by value: the iteration space and, per
 * operand (the result, then up to three inputs), its strides in elements. */
typedef struct em_cuda_geometry {
    int ndim;
    long long shape[EM_MAX_DIMS];
    long long strides[4][EM_MAX_DIMS];
} em_cuda_geometry;

/* Has elementwise op `op` a scalar definition for compute dtype dt? */
bool em_cuda_ew_defined(em_op op, em_dtype dt);
/* The elementwise ops defined for dt: their count, the first max of them
 * in ops[]. */
int em_cuda_ew_ops(em_dtype dt, em_op *ops, int max);
/* The name of op's kernel for dt and a layout, as the source defines it
 * (extern "C"). */
void em_cuda_ew_name(em_op op, em_dtype dt, em_cuda_layout layout, char *out, size_t n);
/* CUDA C of both kernels of each of ops[0..n) for compute dtype dt
 * (malloc'd), or NULL with an error naming an op without a definition. */
char *em_cuda_ew_source(const em_op *ops, int n, em_dtype dt);
/* The headers that source includes (ops_math.h and its table, embedded at
 * build time): how many, their texts and names. -1 when out of memory. */
int em_cuda_headers(const char *const **texts, const char *const **names);
/* em_cuda_ew_source compiled by NVRTC for compute capability sm. */
em_status em_cuda_ew_ptx(const em_op *ops, int n, em_dtype dt, int sm, char **ptx);

#ifdef __cplusplus
}
#endif
#endif
