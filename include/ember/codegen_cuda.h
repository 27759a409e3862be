/*
 * codegen_cuda.h - CUDA C generated from the op table, compiled by NVRTC
 * (codegen_cuda/).
 *
 * Nothing here needs a GPU or a driver: NVRTC is a compiler, loaded at run
 * time with dlopen (no CUDA library is linked), so every machine with the
 * CUDA Toolkit compiles the generated kernels to PTX, and the tests check
 * the PTX with ptxas. Running them is the CUDA device's
 * (cuda/: context.c loads the PTX into a GPU's context).
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

/* One eager elementwise kernel: op on operands of dtypes in[0..n_in),
 * result of dtype out (a cast: one operand). */
typedef struct em_cuda_ew_kernel {
    em_op op;
    int n_in;
    em_dtype in[3];
    em_dtype out;
} em_cuda_ew_kernel;

/* Is k an elementwise op (or a cast) with a scalar definition for its
 * dtypes? An error naming the op and the dtypes when not. */
em_status em_cuda_ew_check(const em_cuda_ew_kernel *k);
/* The kernels of every elementwise op defined for compute dtype dt, all
 * operands of that dtype (a predicate's result bool, a where's condition
 * bool): their count, the first max of them in ks[]. */
int em_cuda_ew_uniform(em_dtype dt, em_cuda_ew_kernel *ks, int max);
/* The name of k's kernel in a layout, as the source defines it
 * (extern "C"): em_cuda_add_f16_f32_to_f32_contig. */
void em_cuda_ew_name(const em_cuda_ew_kernel *k, em_cuda_layout layout, char *out, size_t n);
/* CUDA C of both kernels of each of ks[0..n) (malloc'd), or NULL with
 * em_cuda_ew_check's error. */
char *em_cuda_ew_source(const em_cuda_ew_kernel *ks, int n);
/* The headers that source includes (ops_math.h and its table, embedded at
 * build time): how many, their texts and names. -1 when out of memory. */
int em_cuda_headers(const char *const **texts, const char *const **names);
/* em_cuda_ew_source as PTX for compute capability sm (em_cuda_ptx). */
em_status em_cuda_ew_ptx(const em_cuda_ew_kernel *ks, int n, int sm, char **ptx);

/* ---- eager reductions (codegen_cuda/reduce_source.c) ---- */

typedef enum em_cuda_reduce_layout {
    EM_CUDA_REDUCE_BLOCK,  /* one block per output: long reductions */
    EM_CUDA_REDUCE_THREAD, /* one thread per output: many short ones, columns */
    EM_CUDA_REDUCE_SPLIT,  /* few long ones: chunks of each into partial results, */
    EM_CUDA_REDUCE_JOIN,   /* then one block per output folds them */
} em_cuda_reduce_layout;
/* The bytes of one partial result of the split layout (the value type and
 * an index). */
#define EM_CUDA_REDUCE_PARTIAL_BYTES 16

/* What the reduction kernels take by value: the kept dims K (an output's
 * index: its offsets in the input and the output) and the reduced dims R
 * (offsets in the input), each coalesced, in elements. */
typedef struct em_cuda_reduce_geometry {
    int k_ndim, r_ndim;
    long long k_shape[EM_MAX_DIMS], k_in[EM_MAX_DIMS], k_out[EM_MAX_DIMS];
    long long r_shape[EM_MAX_DIMS], r_in[EM_MAX_DIMS];
} em_cuda_reduce_geometry;

/* One reduction kernel: op on an input of dtype in, result of dtype out
 * (what the op table's inference gives); ord picks the p-norm's fold. */
typedef struct em_cuda_reduce_kernel {
    em_op op;
    em_dtype in, out;
    double ord;
} em_cuda_reduce_kernel;

/* Is k a reduction whose result dtype for `in` is `out`? An error naming
 * the op and the dtypes when not. */
em_status em_cuda_reduce_check(const em_cuda_reduce_kernel *k);
/* Every reduction the op table defines for input dtype dt (the norm once
 * per fold its ord picks): their count, the first max in ks[]. */
int em_cuda_reduce_all(em_dtype dt, em_cuda_reduce_kernel *ks, int max);
/* The layout for n_out outputs of n_red elements each on a GPU of `sms`
 * multiprocessors and blocks of `threads`: one thread per output for many
 * short ones, one block per output for long ones, and, where the outputs
 * are too few to fill the machine, split (*chunks >= 2 blocks per output,
 * each of at least 8 elements a thread, then the join); *chunks is 1
 * otherwise. */
em_cuda_reduce_layout em_cuda_reduce_plan(long long n_out, long long n_red, int sms, int threads, long long *chunks);
/* em_cuda_sum_f32_to_f32_block, em_cuda_norm2_f32_to_f32_thread, ... */
void em_cuda_reduce_name(const em_cuda_reduce_kernel *k, em_cuda_reduce_layout layout, char *out, size_t n);
/* CUDA C of every layout of each of ks[0..n) (malloc'd), or NULL with
 * em_cuda_reduce_check's error. */
char *em_cuda_reduce_source(const em_cuda_reduce_kernel *ks, int n);
em_status em_cuda_reduce_ptx(const em_cuda_reduce_kernel *ks, int n, int sm, char **ptx);

/* ---- eager ops along lines (codegen_cuda/line_source.c) ---- */

typedef enum em_cuda_line_layout {
    EM_CUDA_LINE_THREAD, /* one thread per line, in order: many short lines, side by side */
    EM_CUDA_LINE_BLOCK,  /* one block per line (blockDim.x a multiple of 32): long lines */
} em_cuda_line_layout;

/* The lines: their index space (K: the first element's offsets in the
 * input and the output), then along each line its length and steps, in
 * elements. */
typedef struct em_cuda_line_geometry {
    int k_ndim;
    long long k_shape[EM_MAX_DIMS], k_in[EM_MAX_DIMS], k_out[EM_MAX_DIMS];
    long long len, in_step, out_step;
} em_cuda_line_geometry;

/* cumsum, cumprod, softmax, log_softmax or layer_norm of an input of dtype
 * in, result of dtype out; n_in 1, or layer_norm's 2 (weight) or 3
 * (weight and bias, of dtype in, contiguous along the line). */
typedef struct em_cuda_line_kernel {
    em_op op;
    em_dtype in, out;
    int n_in;
} em_cuda_line_kernel;

em_status em_cuda_line_check(const em_cuda_line_kernel *k);
/* Every op along lines the op table defines for input dtype dt
 * (layer_norm once per n_in): their count, the first max in ks[]. */
int em_cuda_line_all(em_dtype dt, em_cuda_line_kernel *ks, int max);
/* em_cuda_softmax_f32_to_f32_block, em_cuda_layer_norm_wb_f16_to_f16_thread, ... */
void em_cuda_line_name(const em_cuda_line_kernel *k, em_cuda_line_layout layout, char *out, size_t n);
char *em_cuda_line_source(const em_cuda_line_kernel *ks, int n);
em_status em_cuda_line_ptx(const em_cuda_line_kernel *ks, int n, int sm, char **ptx);

/* ---- gather and scatter (codegen_cuda/index_source.c) ---- */

/* What the gather and scatter kernels take by value: the index's shape
 * and, per index position, its offset in the index, in the tensor read
 * along its own dims (gather: the result; scatter: src), and in the
 * tensor addressed through the index (gather: x; scatter: the result)
 * without dim d, whose stride and length are step and size; in elements. */
typedef struct em_cuda_index_geometry {
    int ndim;
    long long shape[EM_MAX_DIMS], index[EM_MAX_DIMS], read[EM_MAX_DIMS], addressed[EM_MAX_DIMS];
    long long step, size;
} em_cuda_index_geometry;

/* gather, or scatter (accumulate: scatter_add), of elements of dtype
 * `dtype` through an index of dtype `index` (int64 or int32). */
typedef struct em_cuda_index_kernel {
    em_op op;
    em_dtype dtype, index;
    bool accumulate;
} em_cuda_index_kernel;

em_status em_cuda_index_check(const em_cuda_index_kernel *k);
/* em_cuda_gather_f32_i64, em_cuda_scatter_add_f64_i32, ... */
void em_cuda_index_name(const em_cuda_index_kernel *k, char *out, size_t n);
char *em_cuda_index_source(const em_cuda_index_kernel *ks, int n);
em_status em_cuda_index_ptx(const em_cuda_index_kernel *ks, int n, int sm, char **ptx);
/* Every gather and scatter kernel: their count, the first max in ks[]. */
int em_cuda_index_all(em_cuda_index_kernel *ks, int max);
/* The geometry of out = gather(x, d, index) (out of index's shape), and
 * of scattering src into out along d through index. */
struct em_tensor;
void em_cuda_gather_geometry(const struct em_tensor *x, const struct em_tensor *index, const struct em_tensor *out,
                             int d, em_cuda_index_geometry *g);
void em_cuda_scatter_geometry(const struct em_tensor *out, const struct em_tensor *index, const struct em_tensor *src,
                              int d, em_cuda_index_geometry *g);

/* ---- advanced indexing: index, index_put, index_select (codegen_cuda/adv_source.c) ---- */

/* What the kernels take by value: the indexing result's shape, per result
 * dim x's stride (0 inside B) and the other tensor's (index: the result;
 * index_put: the values, broadcast), per index tensor its strides over the
 * result dims (0 outside B and where it broadcasts), x's stride and length
 * along the dim it indexes, and its int64 copy's device address; wrap:
 * negative indices count from the end. */
typedef struct em_cuda_adv_geometry {
    int nd, k, wrap;
    long long shape[EM_MAX_DIMS], x[EM_MAX_DIMS], other[EM_MAX_DIMS];
    long long ix[EM_MAX_DIMS][EM_MAX_DIMS];
    long long step[EM_MAX_DIMS], size[EM_MAX_DIMS];
    unsigned long long ptr[EM_MAX_DIMS];
} em_cuda_adv_geometry;

typedef struct em_cuda_adv_kernel {
    em_op op; /* EM_OP_INDEX or EM_OP_INDEX_PUT */
    em_dtype dtype;
    bool accumulate;
} em_cuda_adv_kernel;

em_status em_cuda_adv_check(const em_cuda_adv_kernel *k);
/* em_cuda_index_f32, em_cuda_index_put_add_f64, ... */
void em_cuda_adv_name(const em_cuda_adv_kernel *k, char *out, size_t n);
char *em_cuda_adv_source(const em_cuda_adv_kernel *ks, int n);
em_status em_cuda_adv_ptx(const em_cuda_adv_kernel *ks, int n, int sm, char **ptx);
/* Every advanced-indexing kernel: their count, the first max in ks[]. */
int em_cuda_adv_all(em_cuda_adv_kernel *ks, int max);
/* The geometry of indexing x with the k int64 tensors ix (along x's dims
 * dims[0..k)), broadcast to B (nb dims, starting at result dim pos), the
 * result of shape[0..nd) whose dim d is x's rest_dim[d] (-1 inside B), the
 * other tensor's strides other_strides[0..nd). */
void em_cuda_adv_geometry_of(const struct em_tensor *x, const struct em_tensor *const *ix, int k, const int64_t *dims,
                             int nb, int pos, const int64_t *shape, const int *rest_dim, int nd,
                             const int64_t *other_strides, bool wrap, em_cuda_adv_geometry *g);

/* ---- sliding windows: im2col, col2im, max_pool (codegen_cuda/window_source.c) ---- */

/* The window geometry (runtime/infer/window.h's, three spatial dims) as the
 * kernels take it by value, with the channels per sample and the big
 * side's strides (sample, channel, spatial) where a kernel reads it. */
typedef struct em_cuda_window_geometry {
    long long in[3], out[3], k[3], s[3], p[3], d[3];
    long long in_numel, out_numel, k_numel, channels;
    long long x_n, x_c, x_s[3];
    long long p_hi[3];                      /* pools: the padding after */
    long long adaptive, include_pad, divisor; /* pools: adaptive windows; avg's divisor rule */
} em_cuda_window_geometry;

/* CUDA C of im2col, col2im, max_pool, max_pool_grad, avg_pool and
 * avg_pool_grad (strided or adaptive windows) for float32 and float64
 * (malloc'd), and its PTX. */
char *em_cuda_window_source(void);
em_status em_cuda_window_ptx(int sm, char **ptx);
/* The name of `kernel` ("im2col", "col2im", "max_pool", "max_pool_grad",
 * "avg_pool", "avg_pool_grad")
 * for dt: em_cuda_im2col_f32, ... */
void em_cuda_window_name(const char *kernel, em_dtype dt, char *out, size_t n);
struct em_window_geom;
/* g from the window geometry w, `channels` per sample and x's strides
 * (sample, channel, then w's spatial dims; NULL: none read). */
void em_cuda_window_geometry_of(const struct em_window_geom *w, int64_t channels, const int64_t *x_strides,
                                em_cuda_window_geometry *g);

/* ---- fused optimizer steps (codegen_cuda/optim_source.c) ---- */

/* The options of one step (as doubles, cast to the parameter's dtype in
 * the kernel, as the CPU casts them) and Adam's per-step constants. */
typedef struct em_cuda_optim_args {
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha;
    double step_size, bias2_sqrt;
    int maximize, nesterov, first, decoupled, centered;
} em_cuda_optim_args;

/* CUDA C of em_cuda_sgd_<T>, em_cuda_adam_<T> and em_cuda_rmsprop_<T> for
 * float32 and float64 (malloc'd), and its PTX. */
char *em_cuda_optim_source(void);
em_status em_cuda_optim_ptx(int sm, char **ptx);

/* ---- sorting along lines (codegen_cuda/sort_source.c) ---- */

/* CUDA C of em_cuda_sort_<T>(n_lines, g, P, descending, values, indices,
 * x, keys, idx) for every stored dtype (malloc'd), and its PTX: each line
 * of x (em_cuda_line_geometry; out_step for both results) in the CPU's
 * stable order, through per-block scratch of P (a power of two, at least
 * the line's length) keys and indices. */
char *em_cuda_sort_source(void);
em_status em_cuda_sort_ptx(int sm, char **ptx);
void em_cuda_sort_name(em_dtype dt, char *out, size_t n);

/* ---- rand and randn (codegen_cuda/random_source.c) ---- */

/* CUDA C of em_cuda_<name>(n, seed, offset, out) for each random kernel:
 * element i of the result from Philox block offset + i / per_block, as the
 * CPU draws it (ops_random.h). malloc'd. */
char *em_cuda_random_source(void);
/* The kernels' names ("rand_f32", ...): how many, the first max in names. */
int em_cuda_random_kernels(const char **names, int max);

/* ---- compiled once (codegen_cuda/ptx_cache.c) ---- */

typedef enum em_cuda_ptx_source { EM_PTX_COMPILED, EM_PTX_FROM_MEMORY, EM_PTX_FROM_DISK } em_cuda_ptx_source;
/* The PTX of generated CUDA C `source` (which may include the headers of
 * em_cuda_headers) for compute capability sm: this process's copy, else
 * the disk cache's, else NVRTC's, then kept in both. *ptx is the caller's
 * (malloc'd); *from (if not NULL) says where it came from. */
em_status em_cuda_ptx(const char *source, const char *name, int sm, char **ptx, em_cuda_ptx_source *from);
/* Drops this process's copies (the disk cache keeps its entries). */
void em_cuda_ptx_forget(void);
/* How many sources NVRTC has compiled on this thread (neither copy had them). */
long em_cuda_ptx_compiles(void);

/* ---- ahead of first use (codegen_cuda/precompile.c) ---- */

typedef struct em_cuda_precompile_counts {
    int kernels;  /* ready: compiled, or found in the disk cache */
    int compiled; /* of those, compiled by NVRTC now */
    int failed;
} em_cuda_precompile_counts;
/* Compiles every eager kernel the CUDA device generates (elementwise ops
 * and casts, reductions, ops along lines, gather/scatter, advanced
 * indexing, the window kernels) for compute
 * capability sm into the disk cache, on `threads` threads, so no first
 * use pays NVRTC. An error names the first kernel that failed. */
em_status em_cuda_precompile(int sm, int threads, em_cuda_precompile_counts *counts);

#ifdef __cplusplus
}
#endif
#endif
