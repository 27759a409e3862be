/*
 * line_source.c - the eager ops of the CUDA device that run along lines:
 * cumsum, cumprod, softmax, log_softmax (the op table's SCAN rows) and
 * layer_norm, as CUDA C, in every dtype their inference accepts.
 *
 * A line is the elements along the op's dim (layer_norm: the normalized
 * trailing dims, flattened); lines are independent. The arithmetic is the
 * CPU's general path (runtime/cpu/scan.c, norm.c), written again here as
 * text over the same scalar definitions (a line's first element starts
 * its scan, so a -0 stays -0): elements read as double (floats)
 * or int64 (integer cumsum/cumprod, wrapping); softmax subtracts the
 * line's max (all -inf: 0), takes exp in float for float32 and the 16-bit
 * floats (sc_exp_f32, as the CPU) and libm's in float64, sums in double;
 * log_softmax is (x - max) - log(sum); layer_norm takes the mean, then the
 * squared deviations from it (two passes), biased, in double. Two layouts:
 *
 *   em_cuda_<kernel>_thread(n_lines, g, out, in[, weight[, bias]], eps)
 *       one thread per line, in order: the CPU's order of additions, so
 *       cumsum and the float64 results are the CPU's bits; for many short
 *       lines and for lines that lie side by side (a scan over dim 0);
 *   em_cuda_<kernel>_block(n_lines, g, out, in[, weight[, bias]], eps)
 *       one block per line (grid-stride over lines), blockDim.x a multiple
 *       of 32 up to 1024: the max and sums fold across the block (warp
 *       shuffles, then shared memory), cumsum and cumprod scan a chunk of
 *       blockDim.x elements at a time carrying the total; for long lines.
 *       Additions in another order: within an ulp of the double sums before
 *       the final rounding.
 *
 * float32 softmax and layer_norm on the CPU take a faster path of float
 * lanes (rowexp.h, norm.c's rows_f32); the GPU's double sums agree with it
 * to an ulp or two of float32.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "source_text.h"

static bool is_line_op(em_op op) {
    return op == EM_OP_CUMSUM || op == EM_OP_CUMPROD || op == EM_OP_SOFTMAX || op == EM_OP_LOG_SOFTMAX ||
           op == EM_OP_LAYER_NORM;
}

/* ---- the ops' bodies ---- */

/* In the texts: V the value type; x(j) element j of the line as V;
 * put(j, v) stores v; len the line's length; affine(j, v) layer_norm's v
 * times weight j plus bias j (those given); eps. The block bodies use em_block_fold
 * (every thread gets the result) and em_block_scan. */
typedef struct {
    em_op op;
    const char *thread;
    const char *block;
} line_rule;

#define SOFTMAX_MAX_THREAD                                                                         \
    "    V m = -(V)INFINITY;\n"                                                                    \
    "    for (long long j = 0; j < len; j++) { V v = x(j); if (v != v || v > m) m = v; }\n"        \
    "    if (em_isinf(m)) m = m > 0 ? m : (V)0;\n"
#define SOFTMAX_MAX_BLOCK                                                                          \
    "    V m = -(V)INFINITY;\n"                                                                    \
    "    for (long long j = threadIdx.x; j < len; j += blockDim.x) { V v = x(j); if (v != v || v > m) m = v; }\n" \
    "    m = em_block_fold(m, em_fold_max(), -(V)INFINITY);\n"                                     \
    "    if (em_isinf(m)) m = m > 0 ? m : (V)0;\n"

static const line_rule rules[] = {
    {EM_OP_CUMSUM,
     "    V acc = 0;\n    for (long long j = 0; j < len; j++) { acc = j ? em_add(acc, x(j)) : x(j); put(j, acc); }\n",
     "    V carry = 0;\n"
     "    for (long long at = 0; at < len; at += blockDim.x) {\n"
     "        long long j = at + threadIdx.x;\n"
     "        V total, v = em_block_scan(j < len ? x(j) : (V)0, em_fold_add(), (V)0, &total);\n"
     "        if (j < len) put(j, at ? em_add(carry, v) : v); /* (the first chunk: -0 stays) */\n"
     "        carry = em_add(carry, total);\n"
     "    }\n"},
    {EM_OP_CUMPROD,
     "    V acc = 1;\n    for (long long j = 0; j < len; j++) { acc = j ? em_mul(acc, x(j)) : x(j); put(j, acc); }\n",
     "    V carry = 1;\n"
     "    for (long long at = 0; at < len; at += blockDim.x) {\n"
     "        long long j = at + threadIdx.x;\n"
     "        V total, v = em_block_scan(j < len ? x(j) : (V)1, em_fold_mul(), (V)1, &total);\n"
     "        if (j < len) put(j, at ? em_mul(carry, v) : v); /* (the first chunk: -0 stays) */\n"
     "        carry = em_mul(carry, total);\n"
     "    }\n"},
    {EM_OP_SOFTMAX,
     SOFTMAX_MAX_THREAD "    V s = 0;\n    for (long long j = 0; j < len; j++) s += em_exp_term(x(j) - m);\n"
                        "    for (long long j = 0; j < len; j++) put(j, em_exp_term(x(j) - m) / s);\n",
     SOFTMAX_MAX_BLOCK "    V s = 0;\n"
                       "    for (long long j = threadIdx.x; j < len; j += blockDim.x) s += em_exp_term(x(j) - m);\n"
                       "    s = em_block_fold(s, em_fold_add(), (V)0);\n"
                       "    for (long long j = threadIdx.x; j < len; j += blockDim.x) put(j, em_exp_term(x(j) - m) / s);\n"},
    {EM_OP_LOG_SOFTMAX,
     SOFTMAX_MAX_THREAD "    V s = 0;\n    for (long long j = 0; j < len; j++) s += em_exp_term(x(j) - m);\n"
                        "    V ls = sc_log_f64(s);\n"
                        "    for (long long j = 0; j < len; j++) put(j, (x(j) - m) - ls);\n",
     SOFTMAX_MAX_BLOCK "    V s = 0;\n"
                       "    for (long long j = threadIdx.x; j < len; j += blockDim.x) s += em_exp_term(x(j) - m);\n"
                       "    V ls = sc_log_f64(em_block_fold(s, em_fold_add(), (V)0));\n"
                       "    for (long long j = threadIdx.x; j < len; j += blockDim.x) put(j, (x(j) - m) - ls);\n"},
    {EM_OP_LAYER_NORM,
     "    V s = 0, ss = 0;\n"
     "    for (long long j = 0; j < len; j++) s += x(j);\n"
     "    V mean = s / (V)len;\n"
     "    for (long long j = 0; j < len; j++) ss += (x(j) - mean) * (x(j) - mean);\n"
     "    V rstd = 1.0 / sc_sqrt_f64(ss / (V)len + eps);\n"
     "    for (long long j = 0; j < len; j++) put(j, affine(j, (x(j) - mean) * rstd));\n",
     "    V s = 0, ss = 0;\n"
     "    for (long long j = threadIdx.x; j < len; j += blockDim.x) s += x(j);\n"
     "    V mean = em_block_fold(s, em_fold_add(), (V)0) / (V)len;\n"
     "    for (long long j = threadIdx.x; j < len; j += blockDim.x) ss += (x(j) - mean) * (x(j) - mean);\n"
     "    V rstd = 1.0 / sc_sqrt_f64(em_block_fold(ss, em_fold_add(), (V)0) / (V)len + eps);\n"
     "    for (long long j = threadIdx.x; j < len; j += blockDim.x) put(j, affine(j, (x(j) - mean) * rstd));\n"},
};

static const line_rule *rule_of(em_op op) {
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
        if (rules[i].op == op) return &rules[i];
    return NULL;
}

/* ---- checks and the list ---- */

static em_status infer(const em_cuda_line_kernel *k, em_dtype *out) {
    em_type in[3];
    for (int i = 0; i < 3; i++) in[i] = (em_type){.dtype = k->in, .ndim = 1, .shape = {2}};
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.value = 1e-5;
    em_type r;
    em_status st = em_op_infer(k->op, in, k->op == EM_OP_LAYER_NORM ? k->n_in : 1, &a, &r, 1);
    if (st == EM_OK) *out = r.dtype;
    return st;
}

em_status em_cuda_line_check(const em_cuda_line_kernel *k) {
    if (k->op < 0 || k->op >= EM_OP_COUNT || !is_line_op(k->op))
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s is not an op along lines (cumsum, cumprod, softmax, "
                                                "log_softmax, layer_norm)",
                        k->op >= 0 && k->op < EM_OP_COUNT ? em_op_name(k->op) : "(bad op)");
    const char *name = em_op_name(k->op);
    if (k->in < 0 || k->in >= EM_DTYPE_COUNT || k->out < 0 || k->out >= EM_DTYPE_COUNT)
        return em_error(EM_ERR_VALUE, "cuda: %s: bad dtype", name);
    if (k->n_in != 1 && !(k->op == EM_OP_LAYER_NORM && k->n_in >= 1 && k->n_in <= 3))
        return em_error(EM_ERR_VALUE, "cuda: %s takes %s, not %d operands", name,
                        k->op == EM_OP_LAYER_NORM ? "1 to 3 (input, weight, bias)" : "1", k->n_in);
    em_dtype out = EM_DTYPE_COUNT;
    em_status inferred = infer(k, &out);
    return em_cuda_check_inferred(name, k->in, k->out, inferred, out);
}

int em_cuda_line_all(em_dtype dt, em_cuda_line_kernel *ks, int max) {
    int n = 0;
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++)
        for (int n_in = 1; n_in <= (rules[r].op == EM_OP_LAYER_NORM ? 3 : 1); n_in++) {
            em_cuda_line_kernel k = {.op = rules[r].op, .in = dt, .n_in = n_in};
            if (infer(&k, &k.out) != EM_OK) {
                em_clear_error();
                continue;
            }
            if (n < max) ks[n] = k;
            n++;
        }
    return n;
}

void em_cuda_line_name(const em_cuda_line_kernel *k, em_cuda_line_layout layout, char *out, size_t n) {
    static const char *const affine[4] = {"", "", "_w", "_wb"};
    snprintf(out, n, "em_cuda_%s%s_%s_to_%s_%s", em_op_name(k->op), k->op == EM_OP_LAYER_NORM ? affine[k->n_in] : "",
             em_cuda_sfx(k->in), em_cuda_sfx(k->out), layout == EM_CUDA_LINE_BLOCK ? "block" : "thread");
}

/* ---- the source ---- */

static void preamble(em_strbuf *s) {
    em_strbuf_printf(
        s,
        "/* ember: eager ops along lines (generated from ops.def and ops_math.h) */\n"
        "#include \"ember/ops_math.h\"\n" EM_CUDA_FOLD_HELPERS
        "struct em_cuda_line_geometry {\n"
        "    int k_ndim;\n"
        "    long long k_shape[%d], k_in[%d], k_out[%d];\n"
        "    long long len, in_step, out_step;\n"
        "};\n"
        "/* line o's first element in the input (returned) and the output (*at) */\n"
        "static __device__ __forceinline__ long long em_line_start(const em_cuda_line_geometry &g, long long o,\n"
        "                                                          long long *at) {\n"
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
        "struct em_fold_add { template <class V> __device__ V operator()(V a, V b) const { return em_add(a, b); } };\n"
        "struct em_fold_mul { template <class V> __device__ V operator()(V a, V b) const { return em_mul(a, b); } };\n"
        "struct em_fold_max {\n"
        "    template <class V> __device__ V operator()(V a, V b) const { return b != b || b > a ? b : a; }\n"
        "};\n"
        "/* v folded over the block's threads; every thread gets the result.\n"
        " * blockDim.x is a multiple of 32 (every lane of every warp exists). */\n"
        "template <class V, class F> static __device__ V em_block_fold(V v, F f, V identity) {\n"
        "    __shared__ V part[33];\n"
        "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;\n"
        "    for (int by = 16; by > 0; by >>= 1) {\n"
        "        V o = __shfl_down_sync(0xffffffffu, v, by);\n"
        "        if (lane + by < 32) v = f(v, o);\n"
        "    }\n"
        "    if (lane == 0) part[warp] = v;\n"
        "    __syncthreads();\n"
        "    if (warp == 0) {\n"
        "        v = lane < n_warps ? part[lane] : identity;\n"
        "        for (int by = 16; by > 0; by >>= 1) {\n"
        "            V o = __shfl_down_sync(0xffffffffu, v, by);\n"
        "            if (lane + by < 32) v = f(v, o);\n"
        "        }\n"
        "        if (lane == 0) part[32] = v;\n"
        "    }\n"
        "    __syncthreads();\n"
        "    v = part[32];\n"
        "    __syncthreads();\n"
        "    return v;\n"
        "}\n"
        "/* The inclusive scan of v over the block's threads, in thread order;\n"
        " * *total the fold of all of them. */\n"
        "template <class V, class F> static __device__ V em_block_scan(V v, F f, V identity, V *total) {\n"
        "    __shared__ V part[32];\n"
        "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;\n"
        "    for (int by = 1; by < 32; by <<= 1) {\n"
        "        V o = __shfl_up_sync(0xffffffffu, v, by);\n"
        "        if (lane >= by) v = f(o, v);\n"
        "    }\n"
        "    if (lane == 31) part[warp] = v;\n"
        "    __syncthreads();\n"
        "    if (warp == 0) {\n"
        "        V w = lane < n_warps ? part[lane] : identity;\n"
        "        for (int by = 1; by < 32; by <<= 1) {\n"
        "            V o = __shfl_up_sync(0xffffffffu, w, by);\n"
        "            if (lane >= by) w = f(o, w);\n"
        "        }\n"
        "        part[lane] = w;\n"
        "    }\n"
        "    __syncthreads();\n"
        "    if (warp > 0) v = f(part[warp - 1], v);\n"
        "    *total = part[n_warps - 1];\n"
        "    __syncthreads();\n"
        "    return v;\n"
        "}\n",
        EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS);
}

/* The kernel's element access, in a namespace of its own: x(j), put(j, v),
 * affine(j, v), em_exp_term (softmax's exp: in float below float64). */
static void accessors(em_strbuf *s, const em_cuda_line_kernel *k, const char *name) {
    bool fl = em_dtype_is_float(k->in);
    const char *V = fl ? "double" : "em_sc_i64", *vs = fl ? "f64" : "i64";
    const char *T = em_cuda_ctype(k->in), *O = em_cuda_ctype(k->out);
    em_strbuf_printf(s, "namespace %s_ns {\ntypedef %s V;\n", name, V);
    em_strbuf_printf(s, "struct line {\n    const %s *in; const %s *wt; const %s *bs; %s *out; long long is, os;\n", T, T,
                     T, O);
    if (k->in == (fl ? EM_DTYPE_F64 : EM_DTYPE_I64))
        em_strbuf_puts(s, "    __device__ V x(long long j) const { return in[j * is]; }\n");
    else
        em_strbuf_printf(s, "    __device__ V x(long long j) const { return sc_cast_%s_%s(in[j * is]); }\n",
                         em_cuda_sfx(k->in), vs);
    em_dtype v = fl ? EM_DTYPE_F64 : EM_DTYPE_I64;
    if (k->out == v)
        em_strbuf_puts(s, "    __device__ void put(long long j, V v) const { out[j * os] = v; }\n");
    else
        em_strbuf_printf(s, "    __device__ void put(long long j, V v) const { out[j * os] = sc_cast_%s_%s(v); }\n", vs,
                         em_cuda_sfx(k->out));
    if (k->op == EM_OP_LAYER_NORM) {
        /* v times the weight plus the bias, each only when given (as the
         * CPU: no multiply by 1, no add of 0, which would turn -0 into +0) */
        static const char *const affine[4] = {"v", "v", "v * W(wt[j])", "v * W(wt[j]) + W(bs[j])"};
        if (k->in == EM_DTYPE_F64)
            em_strbuf_puts(s, "#define W(e) (e)\n");
        else
            em_strbuf_printf(s, "#define W(e) sc_cast_%s_f64(e)\n", em_cuda_sfx(k->in));
        em_strbuf_printf(s, "    __device__ V affine(long long j, V v) const { (void)j; return %s; }\n#undef W\n",
                         affine[k->n_in]);
    }
    em_strbuf_puts(s, "};\n");
    if (k->op == EM_OP_SOFTMAX || k->op == EM_OP_LOG_SOFTMAX)
        em_strbuf_printf(s, "static __device__ __forceinline__ V em_exp_term(V d) { return %s; }\n",
                         k->in == EM_DTYPE_F64 ? "sc_exp_f64(d)" : "(V)sc_exp_f32((float)d)");
    em_strbuf_puts(s, "}\n");
}

static void kernel(em_strbuf *s, const em_cuda_line_kernel *k, const char *name, em_cuda_line_layout layout) {
    const char *T = em_cuda_ctype(k->in);
    em_strbuf_printf(s, "extern \"C\" __global__ void %s_%s(long long n_lines, em_cuda_line_geometry g, %s *__restrict__ out, "
                        "const %s *__restrict__ in",
                     name, layout == EM_CUDA_LINE_BLOCK ? "block" : "thread", em_cuda_ctype(k->out), T);
    if (k->op == EM_OP_LAYER_NORM && k->n_in > 1) em_strbuf_printf(s, ", const %s *__restrict__ weight", T);
    if (k->op == EM_OP_LAYER_NORM && k->n_in > 2) em_strbuf_printf(s, ", const %s *__restrict__ bias", T);
    em_strbuf_printf(s, ", double eps) {\n    using namespace %s_ns;\n    (void)eps;\n", name);
    if (layout == EM_CUDA_LINE_BLOCK)
        em_strbuf_puts(s, "    for (long long o = blockIdx.x; o < n_lines; o += gridDim.x) {\n");
    else
        em_strbuf_puts(s, "    long long step = (long long)gridDim.x * blockDim.x;\n"
                          "    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n_lines; o += step) {\n");
    em_strbuf_printf(s, "    long long at, start = em_line_start(g, o, &at), len = g.len;\n"
                        "    line l = {in + start, %s, %s, out + at, g.in_step, g.out_step};\n"
                        "#define x(j) l.x(j)\n#define put(j, v) l.put(j, v)\n#define affine(j, v) l.affine(j, v)\n",
                     k->op == EM_OP_LAYER_NORM && k->n_in > 1 ? "weight" : "nullptr",
                     k->op == EM_OP_LAYER_NORM && k->n_in > 2 ? "bias" : "nullptr");
    const line_rule *r = rule_of(k->op);
    em_strbuf_puts(s, layout == EM_CUDA_LINE_BLOCK ? r->block : r->thread);
    em_strbuf_puts(s, "#undef x\n#undef put\n#undef affine\n    }\n}\n");
}

char *em_cuda_line_source(const em_cuda_line_kernel *ks, int n) {
    for (int i = 0; i < n; i++)
        if (em_cuda_line_check(&ks[i]) != EM_OK) return NULL;
    em_strbuf s;
    em_strbuf_init(&s);
    preamble(&s);
    for (int i = 0; i < n; i++) {
        char name[160];
        em_cuda_line_name(&ks[i], EM_CUDA_LINE_THREAD, name, sizeof name);
        name[strlen(name) - strlen("_thread")] = '\0';
        accessors(&s, &ks[i], name);
        kernel(&s, &ks[i], name, EM_CUDA_LINE_THREAD);
        kernel(&s, &ks[i], name, EM_CUDA_LINE_BLOCK);
    }
    return em_cuda_source_take(&s);
}

em_status em_cuda_line_ptx(const em_cuda_line_kernel *ks, int n, int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_line_source(ks, n), "ember_lines.cu", sm, ptx);
}
