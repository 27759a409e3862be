/*
 * reduce_source.c - the eager reductions of the CUDA device as CUDA C:
 * sum, mean, prod, amax, amin, argmax, argmin, all, any, var, std, norm,
 * logsumexp, in every dtype the op table's inference accepts.
 *
 * A reduction is a fold (the op table's em_reduction column; the p-norm's
 * split by its ord, as runtime/cpu/reduce.c splits it) and a finish (the
 * op's: mean divides by the count, std takes a square root, ...). Folds
 * are rules in one table: the identity, what one element contributes, and
 * how two partial results combine, so a block's threads, its warps and a
 * single thread all fold the same way. Elements are folded in the value
 * type, the CPU's (runtime/cpu/reduce.c): double for every float dtype,
 * int64 for integers and bool (sums and products wrap). PyTorch's CUDA
 * reductions fold float32 in float32, which overflows where the CPU does
 * not (the norm of 1e30) and drifts from the CPU by the length of the
 * reduction; reductions are bound by memory, and a data-centre GPU adds
 * doubles at several times the rate its memory delivers floats, so double
 * costs no time there. Results then differ from the CPU's only by the
 * order of the double additions, before the final rounding: float32 results
 * are almost always the same bits; arg-reductions, max/min, all/any and
 * integer folds agree exactly. The math calls are ops_math.h's, the CPU's
 * definitions.
 *
 * The input's dims split into kept dims K (an output's) and reduced dims R,
 * each coalesced by the caller into an em_cuda_reduce_geometry. Two layouts:
 *
 *   em_cuda_<kernel>_block(n_out, n_red, g, out, in, centers, p)
 *       one block per output (grid-stride over outputs): the threads stride
 *       over R, then fold by warp shuffles and across warps through shared
 *       memory; for long reductions (a row's sum, a whole tensor's max);
 *   em_cuda_<kernel>_thread(n_out, n_red, g, out, in, centers, p)
 *       one thread per output, R in order; for many short reductions, and
 *       for columns (a sum over dim 0), where adjacent threads read adjacent
 *       addresses;
 *   em_cuda_<kernel>_split(n_out, n_red, g, part, in, centers, p, chunks),
 *   then em_cuda_<kernel>_join(n_out, n_red, g, out, part, centers, p, chunks)
 *       for few long reductions (a whole tensor's sum): each output's R in
 *       `chunks` interleaved parts, one block each, whose partial results
 *       (16 bytes each: the value type and an index) one more block per
 *       output folds. One block alone would leave all but one of the
 *       GPU's multiprocessors idle (a sum of 2^26 floats: 99 ms, not 0.1).
 *
 * var and std take the mean first (a mean kernel), logsumexp the max (an
 * amax kernel): `centers` holds one per output, in the value type. `p` is
 * the correction (var, std) or the ord (norm).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "source_text.h"

/* ---- folds ---- */

typedef enum {
    F_SUM, F_PROD, F_MAX, F_MIN, F_ARGMAX, F_ARGMIN, F_ALL, F_ANY,
    F_SUMSQDEV, F_SUMABS, F_SUMPOW, F_MAXABS, F_MINABS, F_COUNTNZ, F_SUMEXP,
} fold;

/* In the texts: a and b are partial results {v, i} (i: an arg-reduction's
 * index), x an element in the value type V, c the output's center (V). */
typedef struct {
    const char *name;    /* in kernel names: the norm's ord */
    const char *init;    /* a.v's identity; a.i starts at -1 */
    const char *lift;    /* b.v from x */
    const char *combine; /* a from a and b */
} fold_rule;

#define SUM_COMBINE "a.v = em_add(a.v, b.v);"
#define MAX_COMBINE "if (em_isnan(b.v) || b.v > a.v) a.v = b.v;"
#define MIN_COMBINE "if (em_isnan(b.v) || b.v < a.v) a.v = b.v;"
static const fold_rule folds[] = {
    /* ORDER fold */
    [F_SUM] = {"", "0", "x", SUM_COMBINE},
    [F_PROD] = {"", "1", "x", "a.v = em_mul(a.v, b.v);"},
    [F_MAX] = {"", "em_lowest<V>()", "x", MAX_COMBINE},
    [F_MIN] = {"", "em_highest<V>()", "x", MIN_COMBINE},
    [F_ARGMAX] = {"", "em_lowest<V>()", "x", "if (em_arg_takes(a.v, a.i, b.v, b.i, false)) a = b;"},
    [F_ARGMIN] = {"", "em_highest<V>()", "x", "if (em_arg_takes(a.v, a.i, b.v, b.i, true)) a = b;"},
    [F_ALL] = {"", "1", "(V)(x != 0)", "a.v = (V)(a.v && b.v);"},
    [F_ANY] = {"", "0", "(V)(x != 0)", "a.v = (V)(a.v || b.v);"},
    [F_SUMSQDEV] = {"2", "0", "(x - c) * (x - c)", SUM_COMBINE},
    [F_SUMABS] = {"1", "0", "em_abs(x)", SUM_COMBINE},
    [F_SUMPOW] = {"p", "0", "em_pow(em_abs(x), (V)p)", SUM_COMBINE},
    [F_MAXABS] = {"inf", "0", "em_abs(x)", MAX_COMBINE},
    [F_MINABS] = {"neginf", "em_highest<V>()", "em_abs(x)", MIN_COMBINE},
    [F_COUNTNZ] = {"0", "0", "(V)(x != 0)", SUM_COMBINE},
    [F_SUMEXP] = {"", "0", "em_exp(x - c)", SUM_COMBINE},
};

static fold fold_of(const em_cuda_reduce_kernel *k) {
    static const fold by_reduction[] = {
        /* ORDER em_reduction */
        [EM_RED_SUM] = F_SUM,       [EM_RED_PROD] = F_PROD,     [EM_RED_MAX] = F_MAX,
        [EM_RED_MIN] = F_MIN,       [EM_RED_ARGMAX] = F_ARGMAX, [EM_RED_ARGMIN] = F_ARGMIN,
        [EM_RED_ALL] = F_ALL,       [EM_RED_ANY] = F_ANY,       [EM_RED_SUMSQDEV] = F_SUMSQDEV,
        [EM_RED_SUMEXP] = F_SUMEXP,
    };
    em_reduction r = em_op_get(k->op)->reduction;
    if (r != EM_RED_PNORM) return by_reduction[r];
    double ord = k->ord;
    return ord == 2.0 ? F_SUMSQDEV /* about 0: no centers */
           : ord == 1.0       ? F_SUMABS
           : ord == INFINITY  ? F_MAXABS
           : ord == -INFINITY ? F_MINABS
           : ord == 0.0       ? F_COUNTNZ
                              : F_SUMPOW;
}

/* The op's finish: y (V) from the fold's a, the count n, p and c. */
static const char *finish_of(const em_cuda_reduce_kernel *k) {
    switch (k->op) {
    case EM_OP_MEAN: return "y = a.v / (V)n;";
    case EM_OP_ARGMAX:
    case EM_OP_ARGMIN: return "y = a.i;";
    case EM_OP_VAR: return "V dof = (V)n - (V)p; y = a.v / (dof > 0 ? dof : (V)0);";
    case EM_OP_STD: return "V dof = (V)n - (V)p; y = em_sqrt(a.v / (dof > 0 ? dof : (V)0));";
    case EM_OP_LOGSUMEXP: return "y = em_isinf(c) ? c : c + em_log(a.v);";
    case EM_OP_NORM:
        switch (fold_of(k)) {
        case F_SUMSQDEV: return "y = em_sqrt(a.v);";
        case F_SUMPOW: return "y = em_pow(a.v, (V)(1.0 / p));";
        default: return "y = a.v;";
        }
    default: return "y = a.v;";
    }
}

/* ---- dtypes ---- */

/* The value type elements are folded in: double when the input or the
 * result is a float (logsumexp of integers), else int64. */
static em_dtype value_dtype(const em_cuda_reduce_kernel *k) {
    return em_dtype_is_float(k->in) || em_dtype_is_float(k->out) ? EM_DTYPE_F64 : EM_DTYPE_I64;
}

/* ---- checks and the list ---- */

static em_status infer(const em_cuda_reduce_kernel *k, em_dtype *out) {
    em_type in = {.dtype = k->in, .ndim = 1, .shape = {2}};
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.ord = k->ord;
    a.correction = 1;
    em_type r;
    em_status st = em_op_infer(k->op, &in, 1, &a, &r, 1);
    if (st == EM_OK) *out = r.dtype;
    return st;
}

em_status em_cuda_reduce_check(const em_cuda_reduce_kernel *k) {
    if (k->op < 0 || k->op >= EM_OP_COUNT || em_op_get(k->op)->kind != EM_KIND_REDUCE)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s is not a reduction",
                        k->op >= 0 && k->op < EM_OP_COUNT ? em_op_name(k->op) : "(bad op)");
    const char *name = em_op_name(k->op);
    if (k->in < 0 || k->in >= EM_DTYPE_COUNT || k->out < 0 || k->out >= EM_DTYPE_COUNT)
        return em_error(EM_ERR_VALUE, "cuda: %s: bad dtype", name);
    em_dtype out = EM_DTYPE_COUNT;
    em_status inferred = infer(k, &out);
    return em_cuda_check_inferred(name, k->in, k->out, inferred, out);
}

int em_cuda_reduce_all(em_dtype dt, em_cuda_reduce_kernel *ks, int max) {
    static const double ords[] = {2.0, 1.0, INFINITY, -INFINITY, 0.0, 3.0};
    int n = 0;
    for (int op = 0; op < EM_OP_COUNT; op++) {
        if (em_op_get((em_op)op)->kind != EM_KIND_REDUCE) continue;
        bool norm = em_op_get((em_op)op)->reduction == EM_RED_PNORM;
        for (int o = 0; o < (norm ? (int)(sizeof ords / sizeof *ords) : 1); o++) {
            em_cuda_reduce_kernel k = {.op = (em_op)op, .in = dt, .ord = norm ? ords[o] : 0.0};
            if (infer(&k, &k.out) != EM_OK) {
                em_clear_error();
                continue;
            }
            if (n < max) ks[n] = k;
            n++;
        }
    }
    return n;
}

void em_cuda_reduce_name(const em_cuda_reduce_kernel *k, em_cuda_reduce_layout layout, char *out, size_t n) {
    snprintf(out, n, "em_cuda_%s%s_%s_to_%s_%s", em_op_name(k->op),
             em_op_get(k->op)->reduction == EM_RED_PNORM ? folds[fold_of(k)].name : "", em_cuda_sfx(k->in), em_cuda_sfx(k->out),
             layout == EM_CUDA_REDUCE_BLOCK    ? "block"
             : layout == EM_CUDA_REDUCE_THREAD ? "thread"
             : layout == EM_CUDA_REDUCE_SPLIT  ? "split"
                                               : "join");
}

/* ---- the source ---- */

/* What every reduction source shares: the geometry (as the host's
 * em_cuda_reduce_geometry lays it out), offsets, and the folds' helpers. */
static void preamble(em_strbuf *s) {
    em_strbuf_printf(
        s,
        "/* ember: eager reductions (generated from ops.def and ops_math.h) */\n"
        "#include \"ember/ops_math.h\"\n" EM_CUDA_FOLD_HELPERS
        "struct em_cuda_reduce_geometry {\n"
        "    int k_ndim, r_ndim;\n"
        "    long long k_shape[%d], k_in[%d], k_out[%d];\n"
        "    long long r_shape[%d], r_in[%d];\n"
        "};\n"
        "/* output o's offsets in the input (returned) and in the output (*at) */\n"
        "static __device__ __forceinline__ long long em_k_offset(const em_cuda_reduce_geometry &g, long long o,\n"
        "                                                        long long *at) {\n"
        "    long long in = 0, out = 0;\n"
        "    for (int d = g.k_ndim - 1; d >= 0; d--) {\n"
        "        long long i = o %% g.k_shape[d];\n"
        "        o /= g.k_shape[d];\n"
        "        in += i * g.k_in[d];\n"
        "        out += i * g.k_out[d];\n"
        "    }\n"
        "    *at = out;\n"
        "    return in;\n"
        "}\n"
        "static __device__ __forceinline__ long long em_r_offset(const em_cuda_reduce_geometry &g, long long r) {\n"
        "    if (g.r_ndim == 1) return r * g.r_in[0];\n"
        "    long long in = 0;\n"
        "    for (int d = g.r_ndim - 1; d >= 0; d--) {\n"
        "        in += (r %% g.r_shape[d]) * g.r_in[d];\n"
        "        r /= g.r_shape[d];\n"
        "    }\n"
        "    return in;\n"
        "}\n"
        "template <class V> struct em_acc { V v; long long i; };\n"
        "template <class V> static __device__ __forceinline__ bool em_isnan(V x) { return x != x; }\n"
        "template <class V> static __device__ __forceinline__ V em_lowest();\n"
        "template <> __device__ __forceinline__ double em_lowest<double>() { return -(double)INFINITY; }\n"
        "template <> __device__ __forceinline__ em_sc_i64 em_lowest<em_sc_i64>() { return EM_SC_I64_MIN; }\n"
        "template <class V> static __device__ __forceinline__ V em_highest();\n"
        "template <> __device__ __forceinline__ double em_highest<double>() { return (double)INFINITY; }\n"
        "template <> __device__ __forceinline__ em_sc_i64 em_highest<em_sc_i64>() { return EM_SC_I64_MAX; }\n"
        "static __device__ __forceinline__ double em_abs(double x) { return sc_abs_f64(x); }\n"
        "static __device__ __forceinline__ double em_pow(double x, double y) { return sc_pow_f64(x, y); }\n"
        "static __device__ __forceinline__ double em_exp(double x) { return sc_exp_f64(x); }\n"
        "static __device__ __forceinline__ double em_log(double x) { return sc_log_f64(x); }\n"
        "static __device__ __forceinline__ double em_sqrt(double x) { return sc_sqrt_f64(x); }\n"
        "/* Does b (value bv at index bi; -1: none) replace a in an arg-reduction?\n"
        " * NaN beats every number, and of equals (NaNs too) the first index wins:\n"
        " * the CPU's rule, whatever order the partial results meet in. */\n"
        "template <class V>\n"
        "static __device__ __forceinline__ bool em_arg_takes(V av, long long ai, V bv, long long bi, bool least) {\n"
        "    if (bi < 0) return false;\n"
        "    if (ai < 0) return true;\n"
        "    bool an = em_isnan(av), bn = em_isnan(bv);\n"
        "    if (an || bn) return bn && (!an || bi < ai);\n"
        "    return (least ? bv < av : bv > av) || (bv == av && bi < ai);\n"
        "}\n",
        EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS);
}

/* The fold's functions for kernel k, named <name>_*: one element read at
 * `in` + offset into a partial result; two partial results combined; the
 * output from a partial result. */
static void fold_functions(em_strbuf *s, const em_cuda_reduce_kernel *k, const char *name) {
    const fold_rule *f = &folds[fold_of(k)];
    em_dtype v = value_dtype(k);
    const char *V = em_cuda_ctype(v);
    em_strbuf_printf(s, "namespace %s_ns {\ntypedef %s V;\ntypedef em_acc<V> A;\n", name, V);
    em_strbuf_printf(s, "static __device__ __forceinline__ void combine(A &a, const A &b) { %s }\n", f->combine);
    em_strbuf_printf(s, "static __device__ __forceinline__ A lift(const %s *in, long long at, long long r, V c, double p) {\n"
                        "    (void)c; (void)p;\n    V x = ",
                     em_cuda_ctype(k->in));
    em_cuda_convert(s, "in[at]", k->in, v);
    em_strbuf_printf(s, ";\n    A b;\n    b.v = %s;\n    b.i = r;\n    return b;\n}\n", f->lift);
    em_strbuf_printf(s, "static __device__ __forceinline__ A identity() { A a; a.v = %s; a.i = -1; return a; }\n", f->init);
    em_dtype y = (k->op == EM_OP_ARGMAX || k->op == EM_OP_ARGMIN) ? EM_DTYPE_I64 : v;
    em_strbuf_printf(s, "static __device__ __forceinline__ %s finish(const A &a, long long n, V c, double p) {\n"
                        "    (void)n; (void)c; (void)p;\n    %s y;\n    %s\n    return ",
                     em_cuda_ctype(k->out), em_cuda_ctype(y), finish_of(k));
    em_cuda_convert(s, "y", y, k->out);
    em_strbuf_puts(s, ";\n}\n");
    /* a partial result handed between lanes: __shfl_down_sync moves 32 and
     * 64-bit words, so a value travels as itself and an index as 64 bits */
    em_strbuf_puts(s, "static __device__ __forceinline__ A shuffle_down(const A &a, int by) {\n"
                      "    A b;\n    b.v = __shfl_down_sync(0xffffffffu, a.v, by);\n"
                      "    b.i = __shfl_down_sync(0xffffffffu, a.i, by);\n    return b;\n}\n}\n");
}

static void kernel_parameters(em_strbuf *s, const em_cuda_reduce_kernel *k, const char *name, const char *layout) {
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void %s_%s(long long n_out, long long n_red, em_cuda_reduce_geometry g,\n"
                     "    %s *__restrict__ out, const %s *__restrict__ in, const %s_ns::V *__restrict__ centers, "
                     "double p) {\n    using namespace %s_ns;\n",
                     name, layout, em_cuda_ctype(k->out), em_cuda_ctype(k->in), name, name);
}

/* A block's threads' partial results folded into thread 0's (the value
 * the others return is unspecified): by warp shuffles, then across warps
 * through shared memory. Every thread of the block calls it. */
static void block_fold(em_strbuf *s) {
    em_strbuf_puts(s, "static __device__ __forceinline__ A fold_block(A a) {\n"
                      "    __shared__ A warps[32];\n"
                      "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;\n"
                      "    for (int by = 16; by > 0; by >>= 1) {\n"
                      "        A b = shuffle_down(a, by);\n"
                      "        if (lane + by < 32) combine(a, b);\n"
                      "    }\n"
                      "    if (lane == 0) warps[warp] = a;\n"
                      "    __syncthreads();\n"
                      "    if (warp == 0) {\n"
                      "        a = lane < n_warps ? warps[lane] : identity();\n"
                      "        for (int by = 16; by > 0; by >>= 1) {\n"
                      "            A b = shuffle_down(a, by);\n"
                      "            if (lane + by < 32) combine(a, b);\n"
                      "        }\n"
                      "    }\n"
                      "    __syncthreads(); /* (warps[] is free for the next call) */\n"
                      "    return a;\n"
                      "}\n");
}

static void block_kernel(em_strbuf *s, const em_cuda_reduce_kernel *k, const char *name) {
    kernel_parameters(s, k, name, "block");
    em_strbuf_puts(s, "    for (long long o = blockIdx.x; o < n_out; o += gridDim.x) {\n"
                      "        long long at, base = em_k_offset(g, o, &at);\n"
                      "        V c = centers ? centers[o] : (V)0;\n"
                      "        A a = identity();\n"
                      "        for (long long r = threadIdx.x; r < n_red; r += blockDim.x) {\n"
                      "            A b = lift(in, base + em_r_offset(g, r), r, c, p);\n"
                      "            combine(a, b);\n"
                      "        }\n"
                      "        a = fold_block(a);\n"
                      "        if (threadIdx.x == 0) out[at] = finish(a, n_red, c, p);\n"
                      "    }\n"
                      "}\n");
}

/* The split layout's two kernels. _split: block b folds chunk b % chunks of
 * output b / chunks (the chunks interleave by blockDim.x elements, so a
 * warp reads adjacent addresses) into part[b]; _join: one block per output
 * folds its chunks' partial results and finishes. Every fold is
 * associative and an arg-reduction's index is the element's own, so the
 * result is the block layout's. */
static void split_kernels(em_strbuf *s, const em_cuda_reduce_kernel *k, const char *name) {
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void %s_split(long long n_out, long long n_red, em_cuda_reduce_geometry g,\n"
                     "    %s_ns::A *__restrict__ part, const %s *__restrict__ in, const %s_ns::V *__restrict__ centers, "
                     "double p, long long chunks) {\n    using namespace %s_ns;\n",
                     name, name, em_cuda_ctype(k->in), name, name);
    em_strbuf_puts(s, "    for (long long b = blockIdx.x; b < n_out * chunks; b += gridDim.x) {\n"
                      "        long long o = b / chunks, chunk = b % chunks;\n"
                      "        long long at, base = em_k_offset(g, o, &at);\n"
                      "        V c = centers ? centers[o] : (V)0;\n"
                      "        A a = identity();\n"
                      "        for (long long r = chunk * blockDim.x + threadIdx.x; r < n_red; r += chunks * blockDim.x) {\n"
                      "            A e = lift(in, base + em_r_offset(g, r), r, c, p);\n"
                      "            combine(a, e);\n"
                      "        }\n"
                      "        a = fold_block(a);\n"
                      "        if (threadIdx.x == 0) part[b] = a;\n"
                      "    }\n"
                      "}\n");
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void %s_join(long long n_out, long long n_red, em_cuda_reduce_geometry g,\n"
                     "    %s *__restrict__ out, const %s_ns::A *__restrict__ part, const %s_ns::V *__restrict__ centers, "
                     "double p, long long chunks) {\n    using namespace %s_ns;\n",
                     name, em_cuda_ctype(k->out), name, name, name);
    em_strbuf_puts(s, "    for (long long o = blockIdx.x; o < n_out; o += gridDim.x) {\n"
                      "        long long at;\n"
                      "        em_k_offset(g, o, &at);\n"
                      "        V c = centers ? centers[o] : (V)0;\n"
                      "        A a = identity();\n"
                      "        for (long long chunk = threadIdx.x; chunk < chunks; chunk += blockDim.x)\n"
                      "            combine(a, part[o * chunks + chunk]);\n"
                      "        a = fold_block(a);\n"
                      "        if (threadIdx.x == 0) out[at] = finish(a, n_red, c, p);\n"
                      "    }\n"
                      "}\n");
}

static void thread_kernel(em_strbuf *s, const em_cuda_reduce_kernel *k, const char *name) {
    kernel_parameters(s, k, name, "thread");
    em_strbuf_puts(s, "    long long step = (long long)gridDim.x * blockDim.x;\n"
                      "    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n_out; o += step) {\n"
                      "        long long at, base = em_k_offset(g, o, &at);\n"
                      "        V c = centers ? centers[o] : (V)0;\n"
                      "        A a = identity();\n"
                      "        for (long long r = 0; r < n_red; r++) {\n"
                      "            A b = lift(in, base + em_r_offset(g, r), r, c, p);\n"
                      "            combine(a, b);\n"
                      "        }\n"
                      "        out[at] = finish(a, n_red, c, p);\n"
                      "    }\n"
                      "}\n");
}

em_cuda_reduce_layout em_cuda_reduce_plan(long long n_out, long long n_red, int sms, int threads, long long *chunks) {
    *chunks = 1;
    long long busy = (long long)(sms > 0 ? sms : 1) * 4; /* (blocks that fill the machine) */
    if (n_red < 256 && n_out >= busy) return EM_CUDA_REDUCE_THREAD;
    if (n_out >= busy) return EM_CUDA_REDUCE_BLOCK;
    /* few outputs: split each into chunks of at least 8 elements a thread */
    long long want = (busy + n_out - 1) / n_out, most = n_red / ((long long)threads * 8);
    long long c = want < most ? want : most;
    if (c < 2) return EM_CUDA_REDUCE_BLOCK;
    *chunks = c;
    return EM_CUDA_REDUCE_SPLIT;
}

char *em_cuda_reduce_source(const em_cuda_reduce_kernel *ks, int n) {
    for (int i = 0; i < n; i++)
        if (em_cuda_reduce_check(&ks[i]) != EM_OK) return NULL;
    em_strbuf s;
    em_strbuf_init(&s);
    preamble(&s);
    for (int i = 0; i < n; i++) {
        char name[160];
        em_cuda_reduce_name(&ks[i], EM_CUDA_REDUCE_BLOCK, name, sizeof name);
        name[strlen(name) - strlen("_block")] = '\0';
        fold_functions(&s, &ks[i], name);
        em_strbuf_printf(&s, "namespace %s_ns {\n", name);
        block_fold(&s);
        em_strbuf_puts(&s, "}\n");
        block_kernel(&s, &ks[i], name);
        thread_kernel(&s, &ks[i], name);
        split_kernels(&s, &ks[i], name);
    }
    return em_cuda_source_take(&s);
}

em_status em_cuda_reduce_ptx(const em_cuda_reduce_kernel *ks, int n, int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_reduce_source(ks, n), "ember_reduce.cu", sm, ptx);
}
