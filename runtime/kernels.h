/*
 * kernels.h - runtime-internal declarations: the inference functions, view
 * rules and CPU kernels the dispatcher (dispatch.c) runs, and the helpers
 * they share. Not a public header: only runtime/ includes it. Kernels call
 * kernels and these helpers, never the public ops (ops_api.c), which
 * dispatch to them.
 */
#ifndef EMBER_RUNTIME_KERNELS_H
#define EMBER_RUNTIME_KERNELS_H

#include "ember/ops.h"

/* Infers result types from input types. `in` has n_in entries; writes n_out
 * entries of `out`. Errors name the op and the offending shapes/dtypes. */
typedef em_status (*em_infer_fn)(em_op op, const em_type *in, int n_in, const em_attrs *attrs,
                                 em_type *out, int n_out);
/* Runs an eager kernel. For ops that are not views, `out` holds freshly
 * allocated contiguous results to fill; views (and contiguous) create their
 * own results into `out`. */
typedef em_status (*em_kernel_fn)(em_op op, em_tensor *const *in, int n_in,
                                  const em_attrs *attrs, em_tensor **out);

/* A view op's result geometry (see em_view_fn). */
typedef struct em_view_geom {
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_MAX_DIMS]; /* when asked for */
    int64_t offset;               /* change of offset, in elements */
    bool needs_copy;              /* a reshape the strides cannot view: copy first */
} em_view_geom;
/* What a view op does (runtime/view_rules.c, view_<name>): from the
 * input's type and attributes, the result's shape, and with `strides`
 * (NULL: shape only) its strides and offset. An error naming the op when
 * the attributes do not fit the input. */
typedef em_status (*em_view_fn)(const em_type *in, const int64_t *strides, const em_attrs *attrs, em_view_geom *out);

/* Most operands (results + inputs) one elementwise iteration handles. */
#define EM_ITER_MAX_OPS 4

/* ---- inference (infer/: kinds.c one per kind, the others per op), the same on every device ---- */
em_status infer_elementwise(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_cast(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_reduce(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_matmul(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_view(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_same(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_scan(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_factory(em_op, const em_type *, int, const em_attrs *, em_type *, int);
em_status infer_fused(em_op, const em_type *, int, const em_attrs *, em_type *, int);

/* A 0-d CPU tensor (a Python number's wrapping, or x.sum() of a CPU
 * tensor) may join operands on any device, as in PyTorch: its value is
 * read from the host. */
static inline bool em_is_host_scalar(const em_type *t) { return t->ndim == 0 && t->device.type == EM_DEVICE_CPU; }
/* The device of an op's operands: the first one's that is not a host
 * scalar (in[0]'s when all are). */
em_device em_operands_device(const em_type *in, int n);
/* Every operand on that device (host scalars aside), or PyTorch's error
 * naming op and two of the devices: for every op (dispatch) and every graph
 * (the verifier, by the inference that calls it). */
em_status em_check_same_device(em_op op, const em_type *in, int n);
/* That error, for devices a and b. */
em_status em_device_mismatch(em_op op, em_device a, em_device b);

/* Does cat skip operand t? PyTorch's legacy rule: a 1-d empty tensor joins
 * any cat, whatever the others' shapes. */
static inline bool em_cat_skips(const em_type *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* Does a sorting op keep its dim whole (sort, topk), rather than choose one
 * value along it? */
static inline bool em_sort_keeps_row(em_op op) { return op == EM_OP_SORT || op == EM_OP_TOPK; }

/* Elements arange(start, end, step) produces; error if step is 0 or points
 * away from end. */
em_status em_arange_length(double start, double end, double step, int64_t *out);

/* ---- the strided-iteration helper (cpu/iter.c) ---- */

/* An inner loop over n elements: ptrs[0] is the result, ptrs[1..] the inputs;
 * strides are in bytes, one per operand. */
typedef void (*em_loop_fn)(char **ptrs, const int64_t *strides, int64_t n);

/* Operands broadcast to one shape, with dims of size 1 dropped and adjacent
 * dims merged wherever every operand allows (so a contiguous tensor of any
 * shape iterates as one flat run). */
typedef struct em_iter {
    int n_ops;
    int ndim;
    int64_t numel;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_ITER_MAX_OPS][EM_MAX_DIMS]; /* bytes */
    char *data[EM_ITER_MAX_OPS];
} em_iter;

/* Prepares iteration of out = f(ins...) over out's shape; every input must
 * broadcast to it. */
void em_iter_init(em_iter *it, em_tensor *out, em_tensor *const *ins, int n_in);
/* Runs `loop` over the whole iteration, split across the thread pool when
 * there are more than `grain` elements. */
void em_iter_run(const em_iter *it, em_loop_fn loop, int64_t grain);

/* Elements below which an elementwise kernel stays on one thread. */
#define EM_GRAIN_ELEMENTWISE 32768
/* EM_F_COSTLY ops' grain: their elements cost ~100x an add's, so a thread
 * pays for itself on a thousand of them */
#define EM_GRAIN_COSTLY 1024

/* ---- CPU kernels ---- */
em_status cpu_elementwise(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_cast(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_reduce(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_scan(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_matmul(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_view(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_contiguous(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_full(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_arange(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_random(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_fused(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_empty(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_linspace(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
em_status cpu_eye(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);

/* Does op have inference and a CPU kernel (dispatch.c)? */
bool em_op_has_kernels(em_op op);
/* The rule of view op `op` (view_rules.c), NULL for other ops. */
em_view_fn em_view_rule(em_op op);

/* Does the view of shape/stride/offset lie inside 1-d x (as_strided and
 * as_strided_scatter, named by op in the error)? */
em_status em_strided_view_fits(em_op op, const em_type *x, const int64_t *shape, int ndim, const int64_t *stride,
                               int n_stride, int64_t offset);

/* Rows of kind VIEW: their geometry (view_rules.c), used by inference and
 * by cpu_view. */
#define EM_VIEW_DECL(E, n) em_status view_##n(const em_type *, const int64_t *, const em_attrs *, em_view_geom *);

/* Rows of kind OTHER: inference and kernel side by side in their files. */
#define EM_OTHER_DECL(E, n)                                                                        \
    em_status infer_##n(em_op, const em_type *, int, const em_attrs *, em_type *, int);            \
    em_status cpu_##n(em_op, em_tensor *const *, int, const em_attrs *, em_tensor **);
#define EM_OP_KIND_UNARY(E, n)
#define EM_OP_KIND_BINARY(E, n)
#define EM_OP_KIND_TERNARY(E, n)
#define EM_OP_KIND_CAST(E, n)
#define EM_OP_KIND_REDUCE(E, n)
#define EM_OP_KIND_SCAN(E, n)
#define EM_OP_KIND_MATMUL(E, n)
#define EM_OP_KIND_VIEW(E, n) EM_VIEW_DECL(E, n)
#define EM_OP_KIND_COPY(E, n)
#define EM_OP_KIND_FACTORY(E, n)
#define EM_OP_KIND_RANDOM(E, n)
#define EM_OP_KIND_FUSED(E, n)
#define EM_OP_KIND_OTHER(E, n) EM_OTHER_DECL(E, n)
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_OP_KIND_##kind(E, n)
#include "ember/ops.def"
#undef EM_OP

/* Runs elementwise op `op` into an existing result tensor (fresh or, for
 * in-place ops, any strided tensor of the broadcast shape), converting
 * dtypes as em_ew_* say. */
em_status em_elementwise_into(em_op op, em_tensor *const *in, em_tensor *out);

/* The inner loop of elementwise (or cast) op `op` over operands of types
 * `in` into a result of dtype `result`, when it reads and writes those
 * dtypes as they are and needs no check of its operands first (integer
 * division, integer pow); else NULL. */
em_loop_fn em_ew_direct_loop(em_op op, const em_type *in, int n_in, em_dtype result);

/* A new contiguous tensor of dtype dt holding src's values: how kernels
 * convert (calling kernels, not the public ops, keeps the runtime's layers
 * apart: ops dispatch to kernels, never the other way). */
em_tensor *em_converted(em_tensor *src, em_dtype dt);
/* Copies `src` into `dst` (same shape; src may broadcast), converting dtype.
 * The one copy routine: contiguous(), reshape's copy and dtype casts. */
em_status em_copy_into(em_tensor *dst, em_tensor *src);
/* index_put's writes into y itself: y[ix...] (+)= values (attrs: dims, accumulate). */
em_status em_index_put_write(em_tensor *y, em_tensor *const *ix, int k, em_tensor *values,
                             const em_attrs *a);
/* t itself when contiguous, else a contiguous copy (new references; NULL
 * stays NULL). */
em_tensor *em_dense(em_tensor *t);

/* c[m,n] = alpha * op(a)[m,k] @ op(b)[k,n] + beta * c, row-major with rows
 * lda, ldb, ldc apart, op transposing where ta, tb; dt float32 or float64.
 * One BLAS call on the calling thread: from a job of em_parallel_for_blas,
 * which keeps OpenBLAS from starting threads of its own. */
void em_blas_gemm(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                  int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
/* em_parallel_for_heavy(n, fn, ctx) with OpenBLAS single-threaded while fn
 * runs: items that each call BLAS (a convolution's GEMMs). */
void em_parallel_for_blas(int64_t n, em_parallel_fn fn, void *ctx);

/* True when every (from, to) dtype pair has a cast loop (checked by a test). */
bool em_cast_table_complete(void);

#endif
