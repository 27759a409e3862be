/*
 * ops.h - the op table, the eager dispatcher and the user-facing ops.
 *
 * Every op is declared once, in ops.def. From that list come the em_op enum,
 * the name table, shape/dtype inference (used by eager dispatch and by the IR
 * verifier), the eager kernels and the properties the passes read.
 *
 * The table (op_table.c) is data: names, kinds, flags, promotion. Every op
 * runs through em_op_run() (dispatch.c), the one place where inference,
 * output allocation, the kernel and the trace hook meet. The short functions at the
 * end (em_add, em_sum, ...) are conveniences over it: they return a NEW
 * reference or NULL with em_last_error() set; their tensor arguments are
 * borrowed.
 */
#ifndef EMBER_OPS_H
#define EMBER_OPS_H

#include <stddef.h>

#include "ember/parallel.h"
#include "ember/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum em_op {
#define EM_OP(E, n, k, ni, no, dt, pr, fl, at, gr) EM_OP_##E,
#include "ember/ops.def"
#undef EM_OP
    EM_OP_COUNT
} em_op;

/* Selects the elementwise rows of ops.def: with
 *   #define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(X, E, n, dts, pr)
 * an expansion of ops.def calls X(E, name, dtype_class, arity, shape) for
 * each UNARY, BINARY and TERNARY row and nothing for the others. */
#define EM_EW_ROW_UNARY(X, E, n, dts, pr) X(E, n, dts, 1, EM_EW_SHAPE_##pr)
#define EM_EW_ROW_BINARY(X, E, n, dts, pr) X(E, n, dts, 2, EM_EW_SHAPE_##pr)
#define EM_EW_ROW_TERNARY(X, E, n, dts, pr) X(E, n, dts, 3, EM_EW_SHAPE_##pr)
#define EM_EW_ROW_CAST(X, E, n, dts, pr)
#define EM_EW_ROW_REDUCE(X, E, n, dts, pr)
#define EM_EW_ROW_SCAN(X, E, n, dts, pr)
#define EM_EW_ROW_MATMUL(X, E, n, dts, pr)
#define EM_EW_ROW_VIEW(X, E, n, dts, pr)
#define EM_EW_ROW_COPY(X, E, n, dts, pr)
#define EM_EW_ROW_FACTORY(X, E, n, dts, pr)
#define EM_EW_ROW_RANDOM(X, E, n, dts, pr)
#define EM_EW_ROW_FUSED(X, E, n, dts, pr)
#define EM_EW_ROW_OTHER(X, E, n, dts, pr)
/* The C signature of an elementwise op's scalar definition, by promotion
 * rule: SAME (every operand and the result in the compute dtype), PRED (the
 * result is bool) or WHERE (the first operand is bool). */
#define EM_EW_SHAPE_SAME SAME
#define EM_EW_SHAPE_INT_TO_FLOAT SAME
#define EM_EW_SHAPE_FLOAT_ONLY SAME
#define EM_EW_SHAPE_LOGICAL SAME
#define EM_EW_SHAPE_COMPARE PRED
#define EM_EW_SHAPE_PRED PRED
#define EM_EW_SHAPE_WHERE WHERE

typedef enum em_op_kind { /* ORDER em_op_kind: python/csrc/ops.c names them */
    EM_KIND_UNARY,
    EM_KIND_BINARY,
    EM_KIND_TERNARY,
    EM_KIND_CAST,
    EM_KIND_REDUCE,
    EM_KIND_SCAN,
    EM_KIND_MATMUL,
    EM_KIND_VIEW,
    EM_KIND_COPY,
    EM_KIND_OTHER,
    EM_KIND_FACTORY,
    EM_KIND_RANDOM,
    EM_KIND_FUSED,
} em_op_kind;

/* What a reduction accumulates (ops.def's dtypes column for REDUCE rows;
 * the eager kernel's per-element rule). Some need a first pass: SUMSQDEV
 * the mean, SUMEXP the max. */
typedef enum em_reduction {
    EM_RED_NONE, /* not a reduction */
    EM_RED_SUM,
    EM_RED_PROD,
    EM_RED_MAX,
    EM_RED_MIN,
    EM_RED_ARGMAX,
    EM_RED_ARGMIN,
    EM_RED_ALL,
    EM_RED_ANY,
    EM_RED_SUMSQDEV, /* sum of (x - mean)^2 */
    EM_RED_SUMEXP,   /* sum of exp(x - max) */
    EM_RED_PNORM,    /* by the ord attribute: SUMSQDEV-like for 2, |x| sums, max/min |x|, counts */
} em_reduction;

/* How an op's result dtype follows from its inputs. */
typedef enum em_promote { /* ORDER em_promote: python/csrc/ops.c names them */
    EM_PROMOTE_NONE,         /* not applicable (fused: types are explicit)   */
    EM_PROMOTE_SAME,         /* PyTorch's promotion of the inputs            */
    EM_PROMOTE_INT_TO_FLOAT, /* as SAME, then bool/int become float32        */
    EM_PROMOTE_SUM,          /* as SAME, then bool/int become int64          */
    EM_PROMOTE_FLOAT_ONLY,   /* input must be floating point                 */
    EM_PROMOTE_MATCH,        /* inputs must all have the same dtype          */
    EM_PROMOTE_ATTR,         /* from the dtype attribute                     */
    EM_PROMOTE_COMPARE,      /* bool; computed in the promoted input dtype   */
    EM_PROMOTE_PRED,         /* bool; a predicate of the input's values      */
    EM_PROMOTE_LOGICAL,      /* bool; inputs read as truth values            */
    EM_PROMOTE_WHERE,        /* where(cond, a, b): cond bool, a/b promoted   */
    EM_PROMOTE_INDEX,        /* int64 indices (argmax)                       */
} em_promote;

/* Op properties. Passes read these, never lists of op names. */
enum {
    EM_F_PURE = 1u << 0,        /* no side effects: may be removed or merged     */
    EM_F_ELEMENTWISE = 1u << 1, /* out[i] = f(in[i]...) with broadcasting       */
    EM_F_COMMUTATIVE = 1u << 2,
    EM_F_VIEW = 1u << 3,      /* result aliases the input's storage            */
    EM_F_BROADCAST = 1u << 4, /* a pure broadcast: fusible as index arithmetic */
    EM_F_NO_BOOL = 1u << 5,   /* rejects bool inputs                           */
    EM_F_RANDOM = 1u << 6,    /* draws from the random generator               */
    EM_F_INT_DIV = 1u << 7,   /* integer division: on integer dtypes the eager
                                 kernel raises on a zero divisor, so it is not
                                 fused there (a kernel cannot raise)           */
    EM_F_DATA_DEPENDENT = 1u << 8, /* the result's shape depends on the input's
                                      values: the kernel allocates it, and a
                                      trace cannot record it                  */
    /* For the Python layer, which makes ember.<name>, Tensor.<name> and
     * Tensor.<name>_ from the table: */
    EM_F_NO_METHOD = 1u << 9, /* PyTorch has no Tensor method for it (an
                                 activation: gelu, silu, softplus)           */
    EM_F_HIDDEN = 1u << 10,   /* no Python name of its own: reached through
                                 another function (gelu(approximate="tanh")) */
    EM_F_COSTLY = 1u << 11,   /* an elementwise op whose element costs tens of
                                 ns (a libm Bessel function, a recurrence):
                                 worth the threads from small sizes on      */
};

/* How an attribute's value is kept in em_attrs, so that the code treating
 * attributes alike (the IR printer and parser, cse) needs no case per
 * attribute: a list of integers (the field and its count n_<field>), an
 * integer, a bool, a double; SPECIAL ones by their own rule (value, printed
 * at its dtype's precision; alpha, unset meaning 1; shape and dtype, which
 * the result type implies). */
typedef enum em_attr_kind {
    EM_ATTR_INTS,
    EM_ATTR_INT,
    EM_ATTR_BOOL,
    EM_ATTR_DOUBLE,
    EM_ATTR_SPECIAL,
} em_attr_kind;

/* Attribute keys, in the order IR text prints them: X(ENUM, name, kind).
 * ORDER ATTR */
#define EM_ATTR_LIST(X)                                                                            \
    X(DIMS, dims, INTS)                                                                            \
    X(KEEPDIM, keepdim, BOOL)                                                                      \
    X(SHAPE, shape, SPECIAL)                                                                       \
    X(DTYPE, dtype, SPECIAL)                                                                       \
    X(VALUE, value, SPECIAL)                                                                       \
    X(START, start, DOUBLE)                                                                        \
    X(END, end, DOUBLE)                                                                            \
    X(STEP, step, DOUBLE)                                                                          \
    X(CORRECTION, correction, DOUBLE)                                                              \
    X(ORD, ord, DOUBLE)                                                                            \
    X(SHIFTS, shifts, INTS)                                                                        \
    X(DIAGONAL, diagonal, INT)                                                                     \
    X(ACCUMULATE, accumulate, BOOL)                                                                \
    X(LAYOUT, layout, INTS)                                                                        \
    X(ALPHA, alpha, SPECIAL)                                                                       \
    X(KERNEL, kernel, INTS)                                                                        \
    X(STRIDE, stride, INTS)                                                                        \
    X(PADDING, padding, INTS)                                                                      \
    X(DILATION, dilation, INTS)                                                                    \
    X(GROUPS, groups, INT)                                                                         \
    X(CEIL_MODE, ceil_mode, BOOL)                                                                  \
    X(COUNT_INCLUDE_PAD, count_include_pad, BOOL)                                                  \
    X(DIVISOR, divisor, INT)                                                                       \
    X(DESCENDING, descending, BOOL)                                                                \
    X(STABLE, stable, BOOL)                                                                        \
    X(SORTED, sorted, BOOL)                                                                        \
    X(K, k, INT)                                                                                   \
    X(RIGHT, right, BOOL)                                                                          \
    X(MINLENGTH, minlength, INT)                                                                   \
    X(UPPER, upper, BOOL)                                                                          \
    X(FULL, full, BOOL)                                                                            \
    X(REDUCE_OP, reduce_op, INT)                                                                   \
    X(PROCESS_GROUP, process_group, INT)                                                          \
    X(OFFSET, offset, INT)

enum {
#define X(E, n, k) EM_A_BIT_##E,
    EM_ATTR_LIST(X)
#undef X
        EM_A_COUNT
};
_Static_assert(EM_A_COUNT <= 64, "attribute masks are uint64_t");
/* The mask of attribute `bit`. */
#define EM_A_MASK(bit) ((uint64_t)1 << (bit))
enum {
#define X(E, n, k) EM_A_##E = 1ull << EM_A_BIT_##E,
    EM_ATTR_LIST(X)
#undef X
};
/* Attributes an op may go without (IR text leaves them out at their
 * default): a result layout (a matmul's, which only passes choose, or a
 * channels-last convolution's) and a matmul's scale. */
#define EM_A_OPTIONAL ((uint64_t)(EM_A_LAYOUT | EM_A_ALPHA))

/* The sliding-window ops (convolution, pooling, unfold and fold) see their
 * input as (N, C, spatial...) with 1 to EM_MAX_SPATIAL spatial dims; their
 * kernel, stride and dilation attributes hold one entry per spatial dim,
 * padding two: the padding before each dim, then the padding after each. */
#define EM_MAX_SPATIAL 3

/* Attribute values of one op call. Which fields mean something is given by
 * the op's attrs mask. shape and dtype always equal the result's, so IR text
 * leaves them out and the parser restores them from the result type. */
typedef struct em_attrs {
    int n_dims;
    int64_t dims[EM_MAX_DIMS]; /* reduce: dims reduced (sorted, >= 0); permute: order */
    bool keepdim;
    int n_shape;
    int64_t shape[EM_MAX_DIMS];
    em_dtype dtype;
    double value;    /* full: fill value for float and bool dtypes */
    int64_t value_i; /* full: fill value for integer dtypes (exact beyond 2^53) */
    double start, end, step;
    double correction; /* var/std: divide by n - correction */
    double ord;        /* norm: the p of the p-norm (inf allowed) */
    int n_shifts;
    int64_t shifts[EM_MAX_DIMS]; /* roll: one shift per dim of dims */
    int64_t diagonal;            /* tril/triu: which diagonal bounds the triangle */
    bool accumulate;             /* scatter/index_put: add instead of overwrite */
    /* The order in which the result's dims lie in memory, outermost first;
     * n_layout 0: contiguous. matmul: the last dim last (the layout pass
     * chooses it so that a permute of the result is contiguous). conv:
     * channels-last, (0, 2, ..., 1), which the frontend asks for where
     * PyTorch's convolution keeps a channels-last input's layout. */
    int n_layout;
    int64_t layout[EM_MAX_DIMS];
    /* matmul: the product times alpha, a power of two (exact: BLAS's alpha,
     * where canonicalize folds an operand's scale); 0: unset, which is 1. */
    double alpha;
    /* sliding windows (EM_MAX_SPATIAL): the window's size (pooling, unfold;
     * a convolution's is its weight's), its step, the zeros (or, pooling,
     * nothing) around the input, the spacing of its taps */
    int n_kernel, n_stride, n_padding, n_dilation;
    int64_t kernel[EM_MAX_DIMS], stride[EM_MAX_DIMS], padding[EM_MAX_DIMS], dilation[EM_MAX_DIMS];
    int64_t groups;         /* convolution: channel groups */
    bool ceil_mode;         /* pooling: a last partial window counts */
    bool count_include_pad; /* avg_pool: padding counts in the divisor */
    int64_t divisor;        /* avg_pool: divide by this instead (0: unset) */
    /* sorting and selection (runtime/cpu/sort.c): dims holds the one dim */
    bool descending; /* sort: largest first; topk: the largest k */
    bool stable;     /* sort: equal values keep their order (ember's sorts always do) */
    bool sorted;     /* topk: the k in order (else in the order they lie in the input) */
    int64_t k;       /* topk: how many; kthvalue: which, from 1 */
    bool right;      /* searchsorted: the last place the value fits, not the first */
    int64_t minlength; /* bincount: at least this many bins */
    /* linear algebra (runtime/cpu/linalg.c) */
    bool upper; /* solve_triangular: the matrix is upper triangular; eigh: read its upper triangle */
    bool full;  /* svd: full_matrices; qr: mode 'complete' */
    /* collectives (runtime/collective.c): how values combine (em_reduce_op's
     * numbering, torch.distributed.ReduceOp's order) and the process
     * group's id */
    int64_t reduce_op;
    int64_t process_group;
    /* as_strided and as_strided_scatter: where the view starts in the 1-d
     * input (its strides are `stride`) */
    int64_t offset;
    /* factories: the device the result lives on (zeroed: the CPU; ops_api's
     * factories fill in the thread's default device, em_default_device) */
    em_device device;
} em_attrs;

/* Where attribute `bit` lives in em_attrs (EM_ATTR_LIST's kind): offset is
 * the field's, count the offset of an INTS list's count (an int). */
typedef struct em_attr_field {
    em_attr_kind kind;
    size_t offset, count;
} em_attr_field;
const em_attr_field *em_attr_field_of(int bit);
/* An INTS attribute's entries in a, and their count in *n. */
static inline const int64_t *em_attr_ints(const em_attrs *a, const em_attr_field *f, int *n) {
    *n = *(const int *)(const void *)((const char *)a + f->count);
    return (const int64_t *)(const void *)((const char *)a + f->offset);
}

/* A matmul's scale: its alpha attribute, 1 when unset. */
static inline double em_matmul_alpha(const em_attrs *a) { return a && a->alpha != 0 ? a->alpha : 1.0; }

typedef struct em_op_info {
    const char *name;
    em_op_kind kind;
    int n_in, n_out; /* -1: any */
    em_promote promote;
    uint32_t flags;
    uint64_t attrs;  /* EM_A_* mask */
    uint32_t dtypes; /* elementwise: compute dtypes defined (1 << em_dtype); 0: any */
    em_reduction reduction;
} em_op_info;

const em_op_info *em_op_get(em_op op);
static inline const char *em_op_name(em_op op) { return em_op_get(op)->name; }
bool em_op_from_name(const char *name, size_t len, em_op *out);
const char *em_attr_name(int bit);

/* Autocast, per thread: the dtype matmuls and convolutions cast their
 * float32 operands to, or -1 when off (the previous value is returned). */
int em_autocast_dtype(void);
int em_set_autocast_dtype(int dtype);
/* Runs `op` eagerly: infers result types, allocates results, runs the
 * kernel, and reports the call to the trace hook. On success out[0..n_out)
 * hold new references; on failure they are untouched. */
em_status em_op_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                    em_tensor **out, int n_out);
/* Runs op's kernel as a compiled graph does: inputs of the types the graph
 * was verified with, results of `types` (a graph's result types). out[i]
 * given (borrowed) is the memory result i is written into, a contiguous
 * tensor of that type (a buffer from the graph's memory plan); NULL: a
 * new one. On success out[] holds new references. No inference, no trace
 * hook, no autograd: the graph made those choices already. Ops that make
 * their own results (views, contiguous) take out[] NULL. */
em_status em_op_run_planned(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                            const em_type *types, em_tensor **out, int n_out);
/* Runs `op` and writes its single result into `out`, which may be one of the
 * inputs (x.add_(y) is ADD with out = x). Like PyTorch it refuses a result
 * that does not have out's shape or cannot be cast to out's dtype (a float
 * result into an int tensor), and writing into a tensor whose elements
 * overlap; an output that partially overlaps an input is computed through a
 * temporary. Bumps out's version counter and reports a mutation. */
em_status em_op_run_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                            em_tensor *out);
/* PyTorch's rule for writing results of dtype `from` into a tensor of `to`:
 * no float into integers or bool, no integers into bool. */
bool em_can_cast(em_dtype from, em_dtype to);

/* Infers result types through the op table (used by the IR builder and
 * verifier, which have types but no tensors). */
em_status em_op_infer(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                      int n_out);

/* ---- type promotion (PyTorch's rules) ---- */

em_dtype em_promote_types(em_dtype a, em_dtype b);
/* The dtype an op over these operands computes in: dimensioned tensors
 * outrank 0-d ones within a category; a 0-d operand of a higher category
 * lifts the result to its dtype. */
em_dtype em_result_type(const em_type *const *ops, int n);
/* The dtype a Python number of `cat` takes when combined with `t` (PyTorch's
 * wrapped-number rule), used to materialise scalars before an op runs. */
em_dtype em_scalar_operand_dtype(em_dtype tensor_dtype, em_dtype_category scalar_cat);
/* For an elementwise op: the dtype its scalar definition computes in, given
 * its operand types and result dtype (float16/bfloat16 compute in float32);
 * the dtype operand i is converted to before the call; and the dtype the call
 * returns (converted to the result dtype if they differ). The eager kernels
 * and the code generators all follow these, which is how they agree. */
em_dtype em_ew_compute_dtype(em_op op, const em_type *in, int n_in, em_dtype result);
em_dtype em_ew_operand_dtype(em_op op, int i, em_dtype compute);
em_dtype em_ew_native_result(em_op op, em_dtype compute);
/* The dtype operand i is first rounded to, on its way to the operand dtype:
 * when the operands' common dtype is float16 or bfloat16, every operand of
 * another dtype is rounded to it first, as PyTorch casts inputs to the common
 * dtype before a kernel widens them (bf16 x * float32 0-d y uses bf16(y)).
 * Otherwise the operand dtype itself. */
em_dtype em_ew_operand_via(em_op op, int i, const em_type *in, int n_in, em_dtype result);

/* ---- elementwise chains (runtime/cpu/ew_chain.c) ---- */

/* One step of a chain: slot `out` = op(slot in[0], ..., slot in[n_in - 1]). */
typedef struct em_ew_step {
    em_op op;
    int n_in;
    int in[3];
    int out;
} em_ew_step;

/* Runs a chain of elementwise steps over `numel` elements block by block,
 * the values between steps in buffers that stay in the L1 cache (a fused
 * node with no compiled kernel). Slot i is tensors[i] where that is not
 * NULL: a contiguous CPU tensor of numel elements (an input, or a result
 * the caller allocated) or of one element (read as a broadcast scalar);
 * else a temporary. types[i] is every slot's type. Returns false when it
 * cannot run the chain as asked (a step whose loop would convert dtypes or
 * check operands, a layout it does not take, no memory): the caller then
 * runs the ops one by one, which gives the same bits. */
bool em_ew_chain_run(const em_ew_step *steps, int n_steps, em_tensor *const *tensors, const em_type *types,
                     int n_slots, int64_t numel);

/* ---- collectives ---- */

/* Runs a collective on `buf` (a contiguous CPU tensor, combined in place
 * across the processes of group `group` with reduce op `reduce_op`) and
 * waits for it. The runtime knows no MPI: the process-group layer
 * (distributed/) installs this when a process group starts, and the
 * all_reduce op's kernel (a node a compiled graph can hold) calls it. */
typedef em_status (*em_collective_fn)(em_tensor *buf, int64_t reduce_op, int64_t group);
void em_set_collective_handler(em_collective_fn fn);

/* ---- trace hook ---- */

/* Things a trace must know about besides ops. */
typedef enum em_trace_event {
    EM_EVENT_HOST_SYNC, /* .item(), .numpy(), printing read a tensor's values */
    EM_EVENT_MUTATION,  /* an in-place op wrote into a tensor                 */
    EM_EVENT_RNG_SWAP,  /* a random op is about to draw from a Generator's own
                           stream rather than the global one                */
    EM_EVENT_GRAD_READ, /* t's .grad is about to be read (by Python or by the
                           autograd engine accumulating into it)            */
    EM_EVENT_GRAD_WRITE, /* t's .grad is about to be replaced (None, or
                           another tensor)                                  */
    EM_EVENT_ALIAS,     /* t was just made as a history-free alias of a tensor
                           (detach(), a saved tensor) and shares its value  */
} em_trace_event;

/* Called after every op that ran through em_op_run at nesting depth 0 (ops
 * that kernels run internally are not reported). Thread-local. */
typedef struct em_trace_hook {
    void (*on_op)(void *ctx, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                  em_tensor *const *out, int n_out);
    /* `what` names the event's cause (".item()", "add_"); t is the tensor. */
    void (*on_event)(void *ctx, em_trace_event ev, const char *what, const em_tensor *t);
    void *ctx;
    /* After an in-place op at depth 0 wrote op(in) into `out` (broadcast to
     * its shape, cast to its dtype); NULL: reported as EM_EVENT_MUTATION. */
    void (*on_inplace)(void *ctx, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                       em_tensor *out);
    /* A tensor some trace has seen (em_trace_gen != 0) is being freed. */
    void (*on_free)(void *ctx, const em_tensor *t);
} em_trace_hook;

/* Installs `hook` for this thread (NULL removes it); returns the previous. */
const em_trace_hook *em_set_trace_hook(const em_trace_hook *hook);

/* ---- interceptors: the layers dispatch tells about ops (issue 41, item 2) ----
 *
 * The layers that act on every op the user runs (ops at nesting depth 0,
 * not those kernels run inside) form an ordered stack, as PyTorch's
 * dispatch keys do: the tracer first (the results autograd saves are
 * aliases that must carry the results' graph values), then autograd, then
 * the profiler (an op's time includes its recording, as in PyTorch).
 * Dispatch knows none by name: each layer installs its interceptor the
 * first time it has something to do (the tracer when a hook is first set,
 * autograd when a tensor first gets autograd state, the profiler when it
 * starts), so an op costs a layer nothing before it exists. Any entry may
 * be NULL. */
typedef enum em_interceptor_rank {
    EM_INTERCEPT_TRACE,
    EM_INTERCEPT_AUTOGRAD,
    EM_INTERCEPT_PROFILE,
    EM_INTERCEPT_COUNT
} em_interceptor_rank;

typedef struct em_interceptor {
    const char *name;
    /* Before an out-of-place op's kernel runs (a clock starts). */
    void (*before_op)(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs);
    /* After an op made out[] from in[]. A failure undoes the op: its
     * results are released and the caller gets the failure. */
    em_status (*after_op)(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *const *out,
                          int n_out);
    /* Before an in-place op writes op(in) into `target`: may refuse it;
     * *state (NULL at first) goes to after_inplace, or to abort_inplace
     * when the write does not happen. */
    em_status (*before_inplace)(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                                void **state);
    void (*after_inplace)(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                          void *state);
    void (*abort_inplace)(void *state);
} em_interceptor;

/* Puts `ic` (static: it must outlive every op) at its rank of the stack
 * (runtime/interceptor.c), which dispatch reads. */
void em_interceptor_install(em_interceptor_rank rank, const em_interceptor *ic);
extern const em_interceptor *em_interceptors[EM_INTERCEPT_COUNT];

/* A tracer's mark on a tensor, its EM_LAYER_TRACE word (tensor.h): the
 * generation of the trace that saw it (0: none) and its value there. A
 * dying marked tensor is reported to the thread's hook (on_free). */
uint32_t em_trace_gen(const em_tensor *t);
uint32_t em_trace_value(const em_tensor *t);
void em_trace_mark(em_tensor *t, uint32_t gen, uint32_t value);
const em_trace_hook *em_get_trace_hook(void);
/* Reports an event to the current hook, if any. */
void em_note_event(em_trace_event ev, const char *what, const em_tensor *t);
static inline void em_note_host_sync(const char *what, const em_tensor *t) {
    em_note_event(EM_EVENT_HOST_SYNC, what, t);
}

/* ---- user-facing ops: new reference or NULL ---- */

em_tensor *em_neg(em_tensor *a);
em_tensor *em_exp(em_tensor *a);
em_tensor *em_log(em_tensor *a);
em_tensor *em_tanh(em_tensor *a);
em_tensor *em_sigmoid(em_tensor *a);
em_tensor *em_relu(em_tensor *a);
em_tensor *em_cast(em_tensor *a, em_dtype dtype);
em_tensor *em_add(em_tensor *a, em_tensor *b);
em_tensor *em_sub(em_tensor *a, em_tensor *b);
em_tensor *em_mul(em_tensor *a, em_tensor *b);
em_tensor *em_div(em_tensor *a, em_tensor *b);
em_tensor *em_maximum(em_tensor *a, em_tensor *b);
em_tensor *em_pow(em_tensor *a, em_tensor *b);
/* Generic single-result call for elementwise ops by enum. */
em_tensor *em_unary(em_op op, em_tensor *a);
em_tensor *em_binary(em_op op, em_tensor *a, em_tensor *b);
em_tensor *em_ternary(em_op op, em_tensor *a, em_tensor *b, em_tensor *c);

/* dims may be negative; n_dims == 0 (or dims NULL) reduces every dim. */
em_tensor *em_sum(em_tensor *a, const int64_t *dims, int n_dims, bool keepdim);
em_tensor *em_mean(em_tensor *a, const int64_t *dims, int n_dims, bool keepdim);
/* Any reduction row (sum, prod, amax, all, var, ...); correction and ord
 * are read by var/std and norm. argmax/argmin take one dim or none. */
em_tensor *em_reduce(em_op op, em_tensor *a, const int64_t *dims, int n_dims, bool keepdim,
                     double correction, double ord);
/* One result of reduction `op` (attrs: its correction, ord) over the
 * contiguous run x[0..n) of dtype `dt` (n > 0), written as `out_dt` to *out:
 * bit for bit what em_reduce gives for a tensor whose reduced dims are such
 * rows. Compiled row kernels (a reduction fused with its producers and
 * consumers) call it on each row they computed, so fusing a reduction never
 * changes its rounding. The op must be a reduction, logsumexp of a float. */
void em_reduce_row(em_op op, const em_attrs *attrs, em_dtype dt, const void *x, int64_t n,
                   em_dtype out_dt, void *out);
/* out = a @ b, as em_op_run(EM_OP_MATMUL) computes it (the same BLAS calls
 * on the same blocks, so the same bits), calling epilogue(ctx, begin, end)
 * on each range [begin, end) of out's elements as soon as it is computed,
 * on the thread that computed it, while it is still in cache: a compiled
 * GEMM epilogue (bias, activation, residual) applied there instead of in
 * another pass over memory. Every element is handed over exactly once. out
 * is contiguous, of the product's shape and of a's dtype (float32 or
 * float64); a and b are float tensors of that dtype. */
em_status em_matmul_epilogue(em_tensor *a, em_tensor *b, double alpha, em_tensor *out, em_parallel_fn epilogue,
                             void *ctx);
/* cumsum, cumprod, softmax, log_softmax along `dim`. */
em_tensor *em_scan(em_op op, em_tensor *a, int64_t dim);
em_tensor *em_matmul(em_tensor *a, em_tensor *b);

/* shape may contain one -1. reshape returns a view when the geometry allows,
 * else a copy; view fails instead of copying. */
em_tensor *em_reshape(em_tensor *a, const int64_t *shape, int n);
em_tensor *em_view(em_tensor *a, const int64_t *shape, int n);
em_tensor *em_permute(em_tensor *a, const int64_t *dims, int n);
em_tensor *em_transpose(em_tensor *a, int64_t d0, int64_t d1);
/* shape entries of -1 keep the input's size. */
em_tensor *em_expand(em_tensor *a, const int64_t *shape, int n);
/* Returns `a` itself (a new reference) when already contiguous. */
em_tensor *em_contiguous(em_tensor *a);
/* A contiguous copy with its own memory (a cast to a's own dtype). */
em_tensor *em_clone(em_tensor *a);
/* t on device d: t itself there already, else a copy (onto meta: a tensor
 * of t's shape, dtype and dense strides, holding nothing; out of meta: an
 * error, there being nothing to copy). Not recorded by autograd. */
em_tensor *em_to_device(em_tensor *t, em_device d);
/* em_to_device as autograd records it (PyTorch's ToCopyBackward0): a copy
 * to another device whose gradient goes back to t's device. */
em_tensor *em_to_device_recorded(em_tensor *t, em_device d);
/* The source of target.copy_(value) on target's device: value itself where
 * it already is (or is a 0-d host scalar, or either side holds no data),
 * else its copy there (PyTorch's copy_ crosses devices; no other op does).
 * A new reference, or NULL with the error. */
em_tensor *em_copy_source(em_tensor *value, em_tensor *target);
/* Same dtype, shape and values, bit for bit (so a NaN equals itself):
 * how a value guard compares what a run computed with what a trace saw. */
bool em_equal_bits(em_tensor *a, em_tensor *b);
/* target.copy_(value) as a compiled run's write-back does it: when value
 * is target itself (computed in its memory) only the version is bumped;
 * when nothing else sees either memory target adopts value's storage (no
 * copy; em_tensor_adopt_storage); otherwise value is copied in. value keeps
 * its reference either way. */
em_status em_assign(em_tensor *target, em_tensor *value);
/* The same, but value's memory is never taken: value is someone else's
 * too (a result handed to the caller), so its bytes are copied. */
em_status em_assign_copy(em_tensor *target, em_tensor *value);

/* Python-style slicing of dim: start/end clamped into range (negative ones
 * count from the end), step > 0. */
em_tensor *em_slice(em_tensor *a, int64_t dim, int64_t start, int64_t end, int64_t step);
/* a split along dim into n pieces of sizes[0..n) (summing to its size):
 * views, into out[0..n) (new references), sharing one autograd node whose
 * backward is one cat of their gradients (named as PyTorch's:
 * SplitWithSizesBackward0 when the sizes were given, else SplitBackward0). */
em_status em_split(em_tensor *a, int64_t dim, const int64_t *sizes, int n, bool with_sizes, em_tensor **out);
/* dim fixed at index (negative counts from the end); the dim goes away. */
em_tensor *em_select(em_tensor *a, int64_t dim, int64_t index);
/* The diagonal `offset` of the matrices over dim1 and dim2, a view: its
 * entries as the last dim, after the other dims. */
em_tensor *em_diagonal(em_tensor *a, int64_t offset, int64_t dim1, int64_t dim2);
em_tensor *em_unsqueeze(em_tensor *a, int64_t dim);
/* dims NULL / n == 0: every dim of size 1. */
em_tensor *em_squeeze(em_tensor *a, const int64_t *dims, int n);
em_tensor *em_flip(em_tensor *a, const int64_t *dims, int n);
em_tensor *em_roll(em_tensor *a, const int64_t *shifts, const int64_t *dims, int n);
/* Concatenation along dim; tensors are promoted to a common dtype. */
em_tensor *em_cat(em_tensor *const *ts, int n, int64_t dim);
em_tensor *em_tril(em_tensor *a, int64_t diagonal);
em_tensor *em_triu(em_tensor *a, int64_t diagonal);
em_tensor *em_index_select(em_tensor *a, int64_t dim, em_tensor *index);
em_tensor *em_gather(em_tensor *a, int64_t dim, em_tensor *index);
em_tensor *em_scatter(em_tensor *a, int64_t dim, em_tensor *index, em_tensor *src, bool accumulate);
/* a[idx[0], ..., idx[k-1]] for integer tensors indexing dims (increasing). */
em_tensor *em_index(em_tensor *a, em_tensor *const *idx, const int64_t *dims, int k);
/* A copy of a with a[idx...] = values (+= with accumulate). */
em_tensor *em_index_put(em_tensor *a, em_tensor *const *idx, const int64_t *dims, int k,
                        em_tensor *values, bool accumulate);
em_tensor *em_one_hot(em_tensor *a, int64_t num_classes);
/* Layer norm over the last k dims: (x - mean) / sqrt(var + eps), times
 * weight and plus bias when given (a bias needs a weight), both shaped
 * like those dims. */
em_tensor *em_layer_norm(em_tensor *x, int k, em_tensor *weight, em_tensor *bias, double eps);
em_tensor *em_nonzero(em_tensor *a);
em_tensor *em_masked_select(em_tensor *a, em_tensor *mask);

em_tensor *em_empty(const int64_t *shape, int n, em_dtype dtype);
em_tensor *em_linspace(double start, double end, int64_t steps, em_dtype dtype);
em_tensor *em_eye(int64_t n, int64_t m, em_dtype dtype);
em_tensor *em_randint(int64_t low, int64_t high, const int64_t *shape, int n, em_dtype dtype);
em_tensor *em_randperm(int64_t n, em_dtype dtype);
/* The device the factories below make their results on: the CPU unless
 * set, per thread (PyTorch's `with torch.device(...)` and
 * set_default_device). em_set_default_device returns the one before. */
em_device em_default_device(void);
em_device em_set_default_device(em_device d);
/* Factories on an explicit device, whatever the default: what the runtime
 * uses for tensors made to go with others (autograd's zeros and seeds). */
em_tensor *em_full_on(em_device d, const int64_t *shape, int n, double value, em_dtype dtype);
em_tensor *em_arange_on(em_device d, double start, double end, double step, em_dtype dtype);
em_tensor *em_eye_on(em_device d, int64_t n, int64_t m, em_dtype dtype);
em_tensor *em_full(const int64_t *shape, int n, double value, em_dtype dtype);
/* full() with an integer fill value, exact for int64 tensors. */
em_tensor *em_full_i64(const int64_t *shape, int n, int64_t value, em_dtype dtype);
em_tensor *em_zeros(const int64_t *shape, int n, em_dtype dtype);
em_tensor *em_ones(const int64_t *shape, int n, em_dtype dtype);
em_tensor *em_arange(double start, double end, double step, em_dtype dtype);
em_tensor *em_rand(const int64_t *shape, int n, em_dtype dtype);
em_tensor *em_randn(const int64_t *shape, int n, em_dtype dtype);

/* ---- geometry shared by eager views and the code generators ---- */

/* Shape, strides and the change of offset (in elements) of view op `op`
 * applied to a tensor of the given geometry (the op's rule in
 * runtime/view_rules.c). Returns
 * false when a reshape cannot be expressed as a view of these strides
 * (without an error), or when the attributes do not fit (with one). */
bool em_view_geometry(em_op op, const int64_t *shape, const int64_t *strides, int ndim,
                      const em_attrs *attrs, int64_t *out_shape, int64_t *out_strides,
                      int *out_ndim, int64_t *offset_delta);
/* *out = view op `op` of src, on any device: an alias by the op's rule, or,
 * for a reshape whose strides allow no view, an alias of dense_copy(src)
 * (the device's own contiguous copy: a new reference, or NULL with the
 * error), as PyTorch's reshape copies. */
em_status em_view_apply(em_op op, em_tensor *src, const em_attrs *attrs, em_tensor *(*dense_copy)(em_tensor *),
                        em_tensor **out);
/* out = flip(x) (a copy of x's view with negative strides) and out =
 * roll(x) (2^k block copies, each rolled dim split in two: one pass over
 * memory), on any device, through the device's copy(dst, src). */
em_status em_flip_apply(em_tensor *x, const em_attrs *a, em_tensor *out, em_status (*copy)(em_tensor *, em_tensor *));
em_status em_roll_apply(em_tensor *x, const em_attrs *a, em_tensor *out, em_status (*copy)(em_tensor *, em_tensor *));

/* Strides (in any unit) of an operand of the given shape read over a
 * to_ndim-dim iteration space it broadcasts to: right-aligned, 0 where the
 * operand is missing the dim or has size 1. */
void em_broadcast_strides(const int64_t *shape, const int64_t *strides, int ndim, int to_ndim,
                          int64_t *out);
/* Simplifies an iteration over `shape` (ndim dims) by n_ops operands with
 * strides[k][d]: drops dims of size 1 and merges neighbouring dims that every
 * operand steps across evenly, in place. Returns the new number of dims (0
 * when one element remains). The eager iterator and the code generators use
 * it alike, so they walk memory the same way. */
int em_coalesce_dims(int64_t *shape, int ndim, int64_t (*strides)[EM_MAX_DIMS], int n_ops);

/* Broadcasts two shapes (right-aligned) into `out`, which must not alias a or
 * b. Returns false if they do not fit. */
bool em_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out,
                         int *nout);

#ifdef __cplusplus
}
#endif
#endif
