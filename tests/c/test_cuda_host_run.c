/*
 * test_cuda_host_run.c - the CUDA kernels ember generates compute what the
 * CPU's eager kernels compute, checked without a GPU.
 *
 * The generated CUDA C is compiled by the host's C++ compiler with a
 * prelude that makes a kernel an ordinary function run by one thread of
 * one block (every kernel is a grid-stride loop, so one thread covers
 * everything). ops_math.h then takes its host branch: the same text, the
 * host's IEEE arithmetic, no contraction. What this checks is the
 * generator's own work: operand conversions, float16/bfloat16 through
 * float32, result dtypes, 16-byte vectors and their tails, strided and
 * broadcast indexing, the reductions' folds, identities and finishes,
 * Philox element placement. What it cannot check is NVRTC's code for the
 * device (ptxas checks that it assembles: test_cuda_codegen) and the
 * block-per-output reductions, whose warps need a GPU.
 *
 * Compared with the eager CPU op on the same data:
 *   - elementwise ops and casts: every kernel of every compute dtype, and
 *     float16 and bfloat16: to the bit (NaN matches any NaN);
 *   - reductions (one thread per output, over rows and over columns):
 *     integers, max/min, arg-reductions, all/any to the bit; float folds
 *     in double on both, in another order, so within 1e-6 of the sum of
 *     magnitudes for float32 (its last bit; float64: 1e-12;
 *     float16/bfloat16: their rounding, 1e-3);
 *   - rand and randn: the CPU's numbers, to the bit, for the same state;
 *   - gather, scatter and scatter_add, every dtype and index dtype, along
 *     both dims: to the bit, and an out-of-range index reported;
 *   - im2col, col2im, max_pool and its gradient against unfold, fold,
 *     max_pool and max_pool_grad, and advanced indexing (index,
 *     index_put) against eager: to the bit.
 *
 * Needs a C++ compiler (c++, g++ or clang++); without one it is skipped
 * (exit 77) with the reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ember/codegen_cuda.h"
#include "ember/ops.h"
#include "ember/optim.h"
#include "ember/random.h"
#include "ember/tensor.h"
#include "../../runtime/infer/index.h"
#include "../../runtime/infer/pool.h"


static char cxx[256];
static char workdir[] = "/tmp/ember-cuda-host-XXXXXX";
static int n_builds;

/* CUDA's names for host C++: a kernel is a function; the one thread of the
 * one block is thread 0 of a grid of 1. */
static const char prelude[] =
    "#define __global__\n#define __device__\n#define __forceinline__ inline\n#define __restrict__\n"
    "#define __align__(n) alignas(n)\n#define __shared__ static\n"
    "struct em_host_dim3 { unsigned x, y, z; };\n"
    "static const em_host_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1},\n"
    "                          gridDim = {1, 1, 1};\n"
    "template <class T> static inline T __shfl_down_sync(unsigned, T v, int) { return v; }\n"
    "template <class T> static inline T __shfl_up_sync(unsigned, T v, int) { return v; }\n"
    "static inline void __syncthreads() {}\n"
    "template <class T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }\n"
    "static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long c, unsigned long long v) {\n"
    "    unsigned long long o = *p;\n    if (o == c) *p = v;\n    return o;\n}\n";

/* Compiles `source` for the host; the dlopen handle, or NULL. */
static void *build(const char *source, const char *what) {
    char cpp[512], so[512], cmd[2048];
    snprintf(cpp, sizeof cpp, "%s/k%d.cpp", workdir, n_builds);
    snprintf(so, sizeof so, "%s/k%d.so", workdir, n_builds);
    n_builds++;
    FILE *f = fopen(cpp, "w");
    if (!f) return NULL;
    fputs(prelude, f);
    fputs(source, f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "%s -std=c++17 -O0 -ffp-contract=off -fno-fast-math -w -shared -fPIC -I'%s' -o '%s' '%s' 2>&1", cxx,
             EMBER_INCLUDE_DIR, so, cpp);
    FILE *p = popen(cmd, "r");
    char out[4096] = "";
    size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[got] = '\0';
    int rc = p ? pclose(p) : -1;
    CHECK_MSG(rc == 0, "the host compiler rejects the CUDA C of %s:\n%s", what, out);
    void *h = rc == 0 ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
    CHECK_MSG(rc != 0 || h, "dlopen %s: %s", so, dlerror());
    unlink(cpp);
    unlink(so);
    return h;
}

/* ---- data ---- */

#define N 37 /* not a multiple of any vector width: the tails run */

static const double float_values[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.75, 1e-3, 100.0, -100.0, 1e30, -1e-30,
                                      INFINITY, -INFINITY, NAN, 3.14159, -2.5, 7.0, 0.25, 1e-8, 65504.0, -7.5};
static const int64_t int_values[] = {0, 1, -1, 2, -2, 3, 7, -8, 100, -100, 127, -128, 255, 32767, -32768,
                                     2147483647, -2147483647 - 1, 9007199254740993LL, INT64_MAX, INT64_MIN};

/* element i of operand `which` in dtype dt; divisors (operand 1 of
 * integers) are never zero, as the eager kernels refuse a zero divisor. */
static void fill(em_dtype dt, int which, void *out, int n) {
    unsigned r = 2463534242u + 977u * (unsigned)which;
    for (int i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        double f = i < 22 && which == 0 ? float_values[i] : ((int)(r % 4001) - 2000) / 97.0;
        int64_t v = i < 20 && which == 0 ? int_values[i] : (int64_t)(r % 301) - 150;
        if (which == 1 && i < 20) v = int_values[(i * 7) % 20] >> (i % 3 ? 40 : 0);
        if (which == 1 && v == 0) v = 3;
        em_tensor *t = em_dtype_is_float(dt) ? em_tensor_scalar(f, dt)
                       : dt == EM_DTYPE_BOOL  ? em_tensor_scalar((double)((r >> 3) & 1), dt)
                                              : em_tensor_scalar_i64(v, dt);
        static const unsigned char zero[8];
        if (which == 1 && !em_dtype_is_float(dt) && dt != EM_DTYPE_BOOL &&
            !memcmp(em_tensor_data(t), zero, em_dtype_size(dt))) { /* (zero once narrowed) */
            em_tensor_release(t);
            t = em_tensor_scalar_i64(3, dt);
        }
        memcpy((char *)out + (size_t)i * em_dtype_size(dt), em_tensor_data(t), em_dtype_size(dt));
        em_tensor_release(t);
    }
}

static em_tensor *tensor_of(em_dtype dt, const void *data, int n) {
    int64_t shape[1] = {n};
    em_tensor *t = em_tensor_empty(shape, 1, dt, em_cpu());
    if (t) memcpy(em_tensor_data(t), data, (size_t)n * em_dtype_size(dt));
    return t;
}

/* As double, for comparing (integers exactly up to 2^53; compared as
 * bytes below anyway). */
static double value(em_dtype dt, const void *data, int i) {
    em_tensor *t = tensor_of(dt, (const char *)data + (size_t)i * em_dtype_size(dt), 1);
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = EM_DTYPE_F64;
    em_tensor *d = NULL;
    em_op_run(EM_OP_CAST, &t, 1, &a, &d, 1);
    double v = d ? *(double *)em_tensor_data(d) : NAN;
    em_tensor_release(t);
    em_tensor_release(d);
    return v;
}

/* Equal to the bit, or both NaN. */
static bool same(em_dtype dt, const void *a, const void *b, int i) {
    size_t s = em_dtype_size(dt);
    if (!memcmp((const char *)a + i * s, (const char *)b + i * s, s)) return true;
    return em_dtype_is_float(dt) && isnan(value(dt, a, i)) && isnan(value(dt, b, i));
}

/* ---- elementwise ---- */

typedef void (*contig1)(long long, void *, const void *);
typedef void (*contig2)(long long, void *, const void *, const void *);
typedef void (*contig3)(long long, void *, const void *, const void *, const void *);
typedef void (*strided1)(long long, em_cuda_geometry, void *, const void *);
typedef void (*strided2)(long long, em_cuda_geometry, void *, const void *, const void *);
typedef void (*strided3)(long long, em_cuda_geometry, void *, const void *, const void *, const void *);

/* The eager op on the same operands: n results into out; false when eager
 * refuses them. */
static bool eager(const em_cuda_ew_kernel *k, void *const *in, void *out) {
    em_tensor *t[3] = {NULL}, *y = NULL;
    for (int i = 0; i < k->n_in; i++) t[i] = tensor_of(k->in[i], in[i], N);
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = k->out;
    em_status st = em_op_run(k->op, t, k->n_in, &a, &y, 1);
    bool ok = st == EM_OK && y->dtype == k->out;
    if (ok) memcpy(out, em_tensor_data(y), N * em_dtype_size(k->out));
    for (int i = 0; i < k->n_in; i++) em_tensor_release(t[i]);
    em_tensor_release(y);
    return ok;
}

static void run_contig(void *fn, const em_cuda_ew_kernel *k, void *out, void *const *in) {
    if (k->n_in == 1) ((contig1)fn)(N, out, in[0]);
    if (k->n_in == 2) ((contig2)fn)(N, out, in[0], in[1]);
    if (k->n_in == 3) ((contig3)fn)(N, out, in[0], in[1], in[2]);
}

/* The strided kernel reading operand 0 backwards (stride -1 from its last
 * element) and operand 1 broadcast (stride 0); the rest contiguous. */
static void run_strided(void *fn, const em_cuda_ew_kernel *k, void *out, void *const *in) {
    em_cuda_geometry g;
    memset(&g, 0, sizeof g);
    g.ndim = 1;
    g.shape[0] = N;
    g.strides[0][0] = 1;
    const void *p[3];
    for (int i = 0; i < k->n_in; i++) {
        g.strides[i + 1][0] = i == 0 ? -1 : i == 1 ? 0 : 1;
        p[i] = i == 0 ? (const char *)in[0] + (N - 1) * em_dtype_size(k->in[0]) : in[i];
    }
    if (k->n_in == 1) ((strided1)fn)(N, g, out, p[0]);
    if (k->n_in == 2) ((strided2)fn)(N, g, out, p[0], p[1]);
    if (k->n_in == 3) ((strided3)fn)(N, g, out, p[0], p[1], p[2]);
}

/* Each kernel of ks[0..n) in both layouts against eager; returns how many
 * kernels ran. */
static int check_ew(const em_cuda_ew_kernel *ks, int n, const char *what, int *refused) {
    char *src = em_cuda_ew_source(ks, n);
    CHECK_MSG(src != NULL, "%s: %s", what, em_last_error());
    void *h = src ? build(src, what) : NULL;
    free(src);
    if (!h) return 0;
    int ran = 0;
    _Alignas(16) unsigned char in[3][N * 8], rev[3][N * 8], want[N * 8], got[N * 8];
    for (int i = 0; i < n; i++) {
        const em_cuda_ew_kernel *k = &ks[i];
        void *ins[3] = {in[0], in[1], in[2]}, *revs[3] = {rev[0], rev[1], rev[2]};
        for (int j = 0; j < k->n_in; j++) {
            fill(k->in[j], j, in[j], N);
            size_t s = em_dtype_size(k->in[j]);
            for (int e = 0; e < N; e++) /* what the strided run reads */
                memcpy(rev[j] + e * s, in[j] + (j == 0 ? N - 1 - e : j == 1 ? 0 : e) * s, s);
        }
        char name[160];
        em_cuda_ew_name(k, EM_CUDA_CONTIG, name, sizeof name);
        if (!eager(k, ins, want)) {
            (*refused)++;
            if (getenv("EMBER_TEST_VERBOSE")) printf("eager refuses the operands of %s: %s\n", name, em_last_error());
            continue;
        }
        void *fc = dlsym(h, name);
        em_cuda_ew_name(k, EM_CUDA_STRIDED, name, sizeof name);
        void *fs = dlsym(h, name);
        CHECK_MSG(fc && fs, "%s: no kernel %s", what, name);
        if (!fc || !fs) continue;
        memset(got, 0xa5, sizeof got);
        run_contig(fc, k, got, ins);
        for (int e = 0; e < N; e++)
            if (!same(k->out, got, want, e)) {
                CHECK_MSG(0, "%s: element %d is %.17g, eager gives %.17g", name, e, value(k->out, got, e),
                      value(k->out, want, e));
                break;
            }
        if (!eager(k, revs, want)) continue;
        memset(got, 0xa5, sizeof got);
        run_strided(fs, k, got, ins);
        for (int e = 0; e < N; e++)
            if (!same(k->out, got, want, e)) {
                CHECK_MSG(0, "%s: element %d is %.17g, eager gives %.17g", name, e, value(k->out, got, e),
                      value(k->out, want, e));
                break;
            }
        ran++;
    }
    dlclose(h);
    return ran;
}

static const em_dtype stored[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_I64, EM_DTYPE_I32, EM_DTYPE_I16,
                                  EM_DTYPE_I8,  EM_DTYPE_U8,  EM_DTYPE_BOOL, EM_DTYPE_F16, EM_DTYPE_BF16};
#define N_STORED ((int)(sizeof stored / sizeof *stored))

static void elementwise_matches_eager(bool quick) {
    int ran = 0, refused = 0;
    em_cuda_ew_kernel ks[4 * EM_OP_COUNT];
    for (int d = 0; d < N_STORED; d++) {
        em_dtype dt = stored[d], compute = em_dtype_is_half(dt) ? EM_DTYPE_F32 : dt;
        if (quick && dt != EM_DTYPE_F32 && dt != EM_DTYPE_BF16) continue;
        int n = em_cuda_ew_uniform(compute, ks, 4 * EM_OP_COUNT);
        for (int i = 0; i < n && compute != dt; i++) {
            for (int j = 0; j < ks[i].n_in; j++)
                if (ks[i].in[j] == compute) ks[i].in[j] = dt;
            if (ks[i].out == compute) ks[i].out = dt;
        }
        ran += check_ew(ks, n, em_dtype_name(dt), &refused);
    }
    int n = 0;
    for (int a = 0; a < N_STORED; a++)
        for (int b = 0; b < N_STORED; b++) ks[n++] = (em_cuda_ew_kernel){EM_OP_CAST, 1, {stored[a]}, stored[b]};
    ran += check_ew(ks, n, "casts", &refused);
    em_cuda_ew_kernel mixed[] = {
        {EM_OP_ADD, 2, {EM_DTYPE_I32, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_MUL, 2, {EM_DTYPE_F16, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_LT, 2, {EM_DTYPE_BF16, EM_DTYPE_F32}, EM_DTYPE_BOOL},
        {EM_OP_WHERE, 3, {EM_DTYPE_BOOL, EM_DTYPE_F16, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_ADD, 2, {EM_DTYPE_U8, EM_DTYPE_I8}, EM_DTYPE_I16},
        {EM_OP_DIV, 2, {EM_DTYPE_I64, EM_DTYPE_I64}, EM_DTYPE_F32},
        {EM_OP_EXP, 1, {EM_DTYPE_I32}, EM_DTYPE_F32},
    };
    ran += check_ew(mixed, (int)(sizeof mixed / sizeof *mixed), "mixed dtypes", &refused);
    CHECK_MSG(ran > (quick ? 150 : 450), "only %d elementwise kernels ran", ran);
    CHECK_MSG(refused < 10, "eager refused %d kernels' operands", refused);
    printf("%d elementwise kernels (both layouts) match eager to the bit%s; %d kernels' operands refused by "
           "eager\n", ran, quick ? " (quick: float32, bfloat16, casts, mixed)" : "", refused);
}

/* ---- reductions ---- */

typedef void (*reduce_fn)(long long, long long, em_cuda_reduce_geometry, void *, const void *, const void *,
                          double);

#define ROWS 6

/* The eager reduction of x (ROWS x N) over dim `dim`: its results into
 * out, as doubles into f; the count, or -1 when eager refuses. */
static int eager_reduce(const em_cuda_reduce_kernel *k, em_tensor *x, int dim, double *f) {
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = dim;
    a.ord = k->ord;
    a.correction = 1;
    em_tensor *y = NULL, *d = NULL;
    if (em_op_run(k->op, &x, 1, &a, &y, 1) != EM_OK) {
        em_clear_error();
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.dtype = EM_DTYPE_F64;
    em_op_run(EM_OP_CAST, &y, 1, &a, &d, 1);
    int n = d ? (int)d->numel : -1;
    for (int i = 0; i < n; i++) f[i] = ((double *)em_tensor_data(d))[i];
    em_tensor_release(y);
    em_tensor_release(d);
    return n;
}

static double tolerance(const em_cuda_reduce_kernel *k) {
    em_reduction r = em_op_get(k->op)->reduction;
    bool sums = r == EM_RED_SUM || r == EM_RED_PROD || r == EM_RED_SUMSQDEV || r == EM_RED_SUMEXP ||
                r == EM_RED_PNORM;
    if (!sums || !em_dtype_is_float(k->out)) return 0.0;
    return k->out == EM_DTYPE_F64 ? 1e-12 : em_dtype_is_half(k->out) ? 1e-3 : 1e-6;
}

/* Sums and means cancel: their error is relative to the sum of the
 * magnitudes (into scale), not to the result. */
static void magnitudes(const em_cuda_reduce_kernel *k, em_tensor *x, int dim, double *scale, int n_out) {
    for (int o = 0; o < n_out; o++) scale[o] = 0.0;
    if (k->op != EM_OP_SUM && k->op != EM_OP_MEAN) return;
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = EM_DTYPE_F64;
    em_tensor *xf = NULL, *ax = NULL, *s = NULL;
    em_op_run(EM_OP_CAST, &x, 1, &a, &xf, 1);
    if (xf) em_op_run(EM_OP_ABS, &xf, 1, &a, &ax, 1);
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = dim;
    if (ax) em_op_run(k->op, &ax, 1, &a, &s, 1);
    for (int o = 0; s && o < n_out; o++) scale[o] = ((double *)em_tensor_data(s))[o];
    em_tensor_release(xf);
    em_tensor_release(ax);
    em_tensor_release(s);
}

/* The centers var/std (the mean) and logsumexp (the max) fold around, per
 * output, in the value type (double). */
static void centers(const em_cuda_reduce_kernel *k, em_tensor *x, int dim, double *c, int n_out) {
    em_op first = k->op == EM_OP_LOGSUMEXP ? EM_OP_AMAX : EM_OP_MEAN;
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = dim;
    em_tensor *xf = NULL, *m = NULL;
    em_attrs cast;
    memset(&cast, 0, sizeof cast);
    cast.dtype = EM_DTYPE_F64;
    em_op_run(EM_OP_CAST, &x, 1, &cast, &xf, 1);
    em_op_run(first, &xf, 1, &a, &m, 1);
    for (int i = 0; m && i < n_out; i++) c[i] = ((double *)em_tensor_data(m))[i];
    em_tensor_release(xf);
    em_tensor_release(m);
}

static int check_reductions(em_dtype dt) {
    em_cuda_reduce_kernel ks[4 * EM_OP_COUNT];
    int n = em_cuda_reduce_all(dt, ks, 4 * EM_OP_COUNT);
    char *src = em_cuda_reduce_source(ks, n);
    CHECK_MSG(src != NULL, "%s", em_last_error());
    void *h = src ? build(src, em_dtype_name(dt)) : NULL;
    free(src);
    if (!h) return 0;
    unsigned char data[ROWS * N * 8];
    fill(dt, 0, data, N);
    for (int r = 1; r < ROWS; r++) fill(dt, r + 1, data + (size_t)r * N * em_dtype_size(dt), N);
    int64_t shape[2] = {ROWS, N};
    em_tensor *x = em_tensor_empty(shape, 2, dt, em_cpu());
    memcpy(em_tensor_data(x), data, (size_t)ROWS * N * em_dtype_size(dt));
    int ran = 0;
    for (int i = 0; i < n; i++) {
        const em_cuda_reduce_kernel *k = &ks[i];
        char name[160];
        em_cuda_reduce_name(k, EM_CUDA_REDUCE_THREAD, name, sizeof name);
        reduce_fn fn = (reduce_fn)(uintptr_t)dlsym(h, name);
        CHECK_MSG(fn != NULL, "no %s", name);
        for (int dim = 0; fn && dim < 2; dim++) {
            double want[N], p = k->op == EM_OP_NORM ? k->ord : 1.0;
            int n_out = eager_reduce(k, x, dim, want);
            if (n_out < 0) continue;
            /* over dim 1: rows (K: ROWS outputs N apart; R: N elements 1
             * apart); over dim 0: columns (K: N outputs 1 apart; R: ROWS
             * elements N apart) */
            em_cuda_reduce_geometry g;
            memset(&g, 0, sizeof g);
            g.k_ndim = g.r_ndim = 1;
            g.k_shape[0] = dim ? ROWS : N;
            g.k_in[0] = dim ? N : 1;
            g.k_out[0] = 1;
            g.r_shape[0] = dim ? N : ROWS;
            g.r_in[0] = dim ? 1 : N;
            double c[N];
            bool centered = k->op == EM_OP_VAR || k->op == EM_OP_STD || k->op == EM_OP_LOGSUMEXP;
            if (centered) centers(k, x, dim, c, n_out);
            unsigned char got[N * 8];
            fn(n_out, g.r_shape[0], g, got, data, centered ? c : NULL, p);
            double tol = tolerance(k), scale[N];
            magnitudes(k, x, dim, scale, n_out);
            for (int o = 0; o < n_out; o++) {
                double v = value(k->out, got, o);
                bool ok = v == want[o] || (isnan(v) && isnan(want[o])) ||
                          (tol > 0 && fabs(v - want[o]) <= tol * fmax(fabs(want[o]), scale[o]));
                if (!ok) {
                    CHECK_MSG(0, "%s over dim %d: output %d is %.17g, eager gives %.17g", name, dim, o, v, want[o]);
                    break;
                }
            }
            ran++;
        }
    }
    em_tensor_release(x);
    dlclose(h);
    return ran;
}

static void reductions_match_eager(bool quick) {
    int ran = 0;
    for (int d = 0; d < N_STORED; d++)
        if (!quick || stored[d] == EM_DTYPE_F32 || stored[d] == EM_DTYPE_I32) ran += check_reductions(stored[d]);
    CHECK_MSG(ran > (quick ? 40 : 200), "only %d reductions ran", ran);
    printf("%d reductions (one thread per output, rows and columns) match eager\n", ran);
}

/* ---- ops along lines ---- */

typedef void (*line1)(long long, em_cuda_line_geometry, void *, const void *, double);
typedef void (*line2)(long long, em_cuda_line_geometry, void *, const void *, const void *, double);
typedef void (*line3)(long long, em_cuda_line_geometry, void *, const void *, const void *, const void *, double);

/* The eager op over dim `dim` of x (layer_norm: over the last dim, with
 * weight and bias as given): its results as doubles into f, or -1. */
static int eager_line(const em_cuda_line_kernel *k, em_tensor *const *in, int dim, double *f, void *raw) {
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = dim;
    a.value = 1e-5;
    em_tensor *y = NULL, *d = NULL;
    if (em_op_run(k->op, in, k->n_in, &a, &y, 1) != EM_OK || y->dtype != k->out) {
        em_clear_error();
        em_tensor_release(y);
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.dtype = EM_DTYPE_F64;
    em_op_run(EM_OP_CAST, &y, 1, &a, &d, 1);
    int n = d ? (int)d->numel : -1;
    for (int i = 0; i < n; i++) f[i] = ((double *)em_tensor_data(d))[i];
    if (n > 0) memcpy(raw, em_tensor_data(y), (size_t)n * em_dtype_size(y->dtype));
    em_tensor_release(y);
    em_tensor_release(d);
    return n;
}

/* Where the CPU's order of additions and the GPU's differ, the bound; 0:
 * the same bits. The CPU sums a long line's exps in 8 lanes, short and
 * side-by-side lines in order, as the thread layout does; its float32
 * softmax and layer_norm of contiguous rows take float lanes. */
static double line_tolerance(const em_cuda_line_kernel *k) {
    if (k->op == EM_OP_CUMSUM || k->op == EM_OP_CUMPROD) return 0.0;
    double ulps = k->in == EM_DTYPE_F64 ? 1e-14 : em_dtype_is_half(k->in) ? 2e-3 : 1e-6;
    if (k->op == EM_OP_LAYER_NORM) return k->in == EM_DTYPE_F32 ? 1e-5 : 0.0;
    return ulps;
}

static int check_lines(em_dtype dt) {
    em_cuda_line_kernel ks[16];
    int n = em_cuda_line_all(dt, ks, 16);
    char *src = em_cuda_line_source(ks, n);
    CHECK_MSG(src != NULL, "%s", em_last_error());
    void *h = src ? build(src, em_dtype_name(dt)) : NULL;
    free(src);
    if (!h) return 0;
    size_t item = em_dtype_size(dt);
    unsigned char data[ROWS * N * 8], wb[2][N * 8];
    for (int r = 0; r < ROWS; r++) fill(dt, r ? r + 1 : 0, data + (size_t)r * N * item, N);
    fill(dt, 7, wb[0], N);
    fill(dt, 8, wb[1], N);
    int64_t shape[2] = {ROWS, N}, wshape[1] = {N};
    em_tensor *t[3] = {em_tensor_empty(shape, 2, dt, em_cpu()), em_tensor_empty(wshape, 1, dt, em_cpu()),
                       em_tensor_empty(wshape, 1, dt, em_cpu())};
    memcpy(em_tensor_data(t[0]), data, (size_t)ROWS * N * item);
    memcpy(em_tensor_data(t[1]), wb[0], N * item);
    memcpy(em_tensor_data(t[2]), wb[1], N * item);
    int ran = 0;
    for (int i = 0; i < n; i++) {
        const em_cuda_line_kernel *k = &ks[i];
        char name[160];
        em_cuda_line_name(k, EM_CUDA_LINE_THREAD, name, sizeof name);
        void *fn = dlsym(h, name);
        CHECK_MSG(fn != NULL, "no %s", name);
        for (int dim = k->op == EM_OP_LAYER_NORM ? 1 : 0; fn && dim < 2; dim++) {
            double want[ROWS * N];
            unsigned char raw[ROWS * N * 8];
            int count = eager_line(k, t, dim, want, raw);
            CHECK_MSG(count == ROWS * N, "eager refuses %s over dim %d", name, dim);
            if (count != ROWS * N) continue;
            /* dim 1: ROWS lines of N, N apart; dim 0: N lines of ROWS, 1 apart */
            em_cuda_line_geometry g;
            memset(&g, 0, sizeof g);
            g.k_ndim = 1;
            g.k_shape[0] = dim ? ROWS : N;
            g.k_in[0] = g.k_out[0] = dim ? N : 1;
            g.len = dim ? N : ROWS;
            g.in_step = g.out_step = dim ? 1 : N;
            unsigned char got[ROWS * N * 8];
            if (k->n_in == 1) ((line1)fn)(g.k_shape[0], g, got, data, 1e-5);
            if (k->n_in == 2) ((line2)fn)(g.k_shape[0], g, got, data, wb[0], 1e-5);
            if (k->n_in == 3) ((line3)fn)(g.k_shape[0], g, got, data, wb[0], wb[1], 1e-5);
            double tol = line_tolerance(k);
            for (int e = 0; e < count; e++) {
                double v = value(k->out, got, e);
                bool ok = tol == 0 ? same(k->out, got, raw, e)
                                   : (isnan(v) && isnan(want[e])) || v == want[e] ||
                                         fabs(v - want[e]) <= tol * fmax(fabs(want[e]), 1.0);
                if (!ok) {
                    CHECK_MSG(0, "%s over dim %d: element %d is %.17g, eager gives %.17g", name, dim, e, v, want[e]);
                    break;
                }
            }
            ran++;
        }
    }
    for (int i = 0; i < 3; i++) em_tensor_release(t[i]);
    dlclose(h);
    return ran;
}

static void lines_match_eager(bool quick) {
    int ran = 0;
    for (int d = 0; d < N_STORED; d++)
        if (!quick || stored[d] == EM_DTYPE_F32 || stored[d] == EM_DTYPE_BF16) ran += check_lines(stored[d]);
    CHECK_MSG(ran > (quick ? 10 : 40), "only %d ops along lines ran", ran);
    printf("%d ops along lines (cumsum, cumprod, softmax, log_softmax, layer_norm; one thread per line) match "
           "eager\n", ran);
}

/* ---- random ---- */

typedef void (*random_fn)(long long, unsigned long long, unsigned long long, void *);

static void random_matches_eager(void) {
    void *h = NULL;
    char *src = em_cuda_random_source();
    if (src) h = build(src, "random kernels");
    free(src);
    if (!h) return;
    const struct {
        const char *name;
        em_op op;
        em_dtype dt;
    } cases[] = {{"em_cuda_rand_f32", EM_OP_RAND, EM_DTYPE_F32},
                 {"em_cuda_rand_f64", EM_OP_RAND, EM_DTYPE_F64},
                 {"em_cuda_randn_f32", EM_OP_RANDN, EM_DTYPE_F32},
                 {"em_cuda_randn_f64", EM_OP_RANDN, EM_DTYPE_F64}};
    em_manual_seed(1234);
    for (int c = 0; c < 4; c++) {
        int64_t shape[1] = {1001};
        em_rng_state s = em_rng_get_state();
        em_tensor *t = cases[c].op == EM_OP_RAND ? em_rand(shape, 1, cases[c].dt) : em_randn(shape, 1, cases[c].dt);
        random_fn fn = (random_fn)(uintptr_t)dlsym(h, cases[c].name);
        CHECK_MSG(t && fn, "%s", cases[c].name);
        if (!t || !fn) continue;
        size_t bytes = 1001 * em_dtype_size(cases[c].dt);
        void *got = malloc(bytes);
        fn(1001, (unsigned long long)s.seed, (unsigned long long)s.offset, got);
        CHECK_MSG(!memcmp(got, em_tensor_data(t), bytes), "%s differs from the CPU's numbers for the same state",
              cases[c].name);
        free(got);
        em_tensor_release(t);
    }
    printf("rand and randn (float32, float64) give the CPU's numbers to the bit\n");
    dlclose(h);
}

/* ---- gather and scatter ---- */

typedef void (*gather_fn)(long long, em_cuda_index_geometry, void *, const void *, const void *, long long *);
typedef void (*scatter_fn)(long long, em_cuda_index_geometry, void *, const void *, const void *, long long *);

/* A [rows, cols] tensor of dtype dt: operand `which`'s values (fill). */
static em_tensor *matrix(em_dtype dt, int which, int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols};
    em_tensor *t = em_tensor_empty(shape, 2, dt, em_cpu());
    if (t) fill(dt, which, em_tensor_data(t), (int)(rows * cols));
    return t;
}

/* Indices into a dim of length `size` (some repeated), of shape [rows, cols]. */
static em_tensor *indices(em_dtype dt, int64_t rows, int64_t cols, int64_t size, int64_t bad_at) {
    int64_t shape[2] = {rows, cols};
    em_tensor *t = em_tensor_empty(shape, 2, dt, em_cpu());
    for (int64_t i = 0; t && i < rows * cols; i++) {
        int64_t v = i == bad_at ? size : (i * 7 + 3) % size;
        if (dt == EM_DTYPE_I64)
            ((int64_t *)em_tensor_data(t))[i] = v;
        else
            ((int32_t *)em_tensor_data(t))[i] = (int32_t)v;
    }
    return t;
}

/* Every gather and scatter kernel, along dim 0 and dim 1 of a [5, 6]
 * tensor through a [3, 4] index (repeats included), against eager; an
 * out-of-range index leaves its value in *bad. scatter_add's float sums
 * add in the same order on one host thread, so they match to the bit. */
static void index_matches_eager(void) {
    em_cuda_index_kernel ks[128];
    int n = em_cuda_index_all(ks, 128);
    char *src = em_cuda_index_source(ks, n);
    void *h = src ? build(src, "gather and scatter") : NULL;
    free(src);
    if (!h) return;
    int ran = 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < 2; d++) {
            const em_cuda_index_kernel *k = &ks[i];
            char name[96];
            em_cuda_index_name(k, name, sizeof name);
            void *fn = dlsym(h, name);
            CHECK_MSG(fn != NULL, "no %s", name);
            em_tensor *x = matrix(k->dtype, 0, 5, 6), *ix = indices(k->index, 3, 4, d == 0 ? 5 : 6, -1);
            em_tensor *srct = matrix(k->dtype, 1, 3, 4), *want = NULL, *got = NULL;
            em_attrs a;
            memset(&a, 0, sizeof a);
            a.n_dims = 1;
            a.dims[0] = d;
            a.accumulate = k->accumulate;
            em_tensor *gin[2] = {x, ix}, *sin[3] = {x, ix, srct};
            em_status st = k->op == EM_OP_GATHER ? em_op_run(EM_OP_GATHER, gin, 2, &a, &want, 1)
                                                 : em_op_run(EM_OP_SCATTER, sin, 3, &a, &want, 1);
            CHECK_MSG(st == EM_OK, "%s on the CPU: %s", name, em_last_error());
            em_cuda_index_geometry g;
            long long bad = INT64_MIN;
            if (st == EM_OK && fn) {
                if (k->op == EM_OP_GATHER) {
                    got = em_tensor_empty(ix->shape, 2, k->dtype, em_cpu());
                    em_cuda_gather_geometry(x, ix, got, d, &g);
                    ((gather_fn)(uintptr_t)fn)(ix->numel, g, em_tensor_data(got), em_tensor_data(x), em_tensor_data(ix),
                                               &bad);
                } else {
                    got = em_clone(x);
                    em_cuda_scatter_geometry(got, ix, srct, d, &g);
                    ((scatter_fn)(uintptr_t)fn)(ix->numel, g, em_tensor_data(got), em_tensor_data(ix),
                                                em_tensor_data(srct), &bad);
                }
                CHECK_MSG(bad == INT64_MIN, "%s: an in-range index reported as bad (%lld)", name, bad);
                CHECK_MSG(!memcmp(em_tensor_data(got), em_tensor_data(want), (size_t)want->numel * em_dtype_size(k->dtype)),
                          "%s along dim %d differs from eager", name, d);
                ran++;
                /* an index past the end: reported, nothing written through it */
                em_tensor *ix_bad = indices(k->index, 3, 4, d == 0 ? 5 : 6, 5);
                bad = INT64_MIN;
                if (k->op == EM_OP_GATHER)
                    ((gather_fn)(uintptr_t)fn)(ix_bad->numel, g, em_tensor_data(got), em_tensor_data(x),
                                               em_tensor_data(ix_bad), &bad);
                else
                    ((scatter_fn)(uintptr_t)fn)(ix_bad->numel, g, em_tensor_data(got), em_tensor_data(ix_bad),
                                                em_tensor_data(srct), &bad);
                CHECK_MSG(bad == (d == 0 ? 5 : 6), "%s: the bad index is reported as %lld", name, bad);
                em_tensor_release(ix_bad);
            }
            em_tensor *objs[] = {x, ix, srct, want, got};
            for (int o = 0; o < 5; o++) em_tensor_release(objs[o]);
        }
    printf("%d gather/scatter runs (%d kernels, dims 0 and 1) match eager to the bit\n", ran, n);
    dlclose(h);
}

/* ---- sliding windows: im2col, col2im, max_pool, max_pool_grad ---- */

typedef void (*cols_fn)(long long, em_cuda_window_geometry, void *, const void *);
typedef void (*pool_fn)(long long, em_cuda_window_geometry, void *, long long *, const void *);
typedef void (*pool_grad_fn)(long long, em_cuda_window_geometry, void *, const void *, const long long *, long long *);

static em_tensor *image(em_dtype dt, int which, const int64_t *shape) {
    em_tensor *t = em_tensor_empty(shape, 4, dt, em_cpu());
    if (t) fill(dt, which, em_tensor_data(t), (int)t->numel);
    return t;
}

static bool same_bits(const em_tensor *a, const em_tensor *b) {
    em_tensor *ac = em_contiguous((em_tensor *)a), *bc = em_contiguous((em_tensor *)b);
    bool same = ac && bc && a->numel == b->numel &&
                !memcmp(em_tensor_data(ac), em_tensor_data(bc), (size_t)a->numel * em_dtype_size(a->dtype));
    em_tensor_release(ac);
    em_tensor_release(bc);
    return same;
}

/* The window kernels against the CPU's unfold, fold, max_pool and
 * max_pool_grad, float32 and float64, on a [2, 3, 7, 6] image with an
 * uneven kernel, stride, padding and dilation, read in place and through
 * channels-last strides; max_pool with a NaN and ceil_mode. To the bit:
 * col2im adds each element's taps in the CPU's order, and max_pool_grad
 * walks a plane's outputs in order. */
static void windows_match_eager(void) {
    char *src = em_cuda_window_source();
    void *h = src ? build(src, "window kernels") : NULL;
    free(src);
    if (!h) return;
    int ran = 0;
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64};
    for (int t = 0; t < 2; t++)
        for (int last = 0; last < 2; last++) {
            em_dtype dt = dts[t];
            int64_t shape[4] = {2, 3, 7, 6}, perm[4] = {0, 3, 1, 2}, lshape[4] = {2, 7, 6, 3};
            em_tensor *x = image(dt, 0, shape), *xl = NULL;
            if (last) { /* the same values, channels-last in memory */
                em_tensor *base = em_tensor_empty(lshape, 4, dt, em_cpu()), *p = em_permute(base, perm, 4);
                em_copy_into(p, x);
                em_tensor_release(base);
                xl = p;
            }
            em_tensor *in = last ? xl : x;
            em_attrs a;
            memset(&a, 0, sizeof a);
            a.n_kernel = a.n_stride = a.n_dilation = 2;
            a.n_padding = 4; /* (before and after each dim) */
            a.kernel[0] = 3, a.kernel[1] = 2, a.stride[0] = 2, a.stride[1] = 1;
            a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = 1, a.dilation[0] = 1, a.dilation[1] = 2;
            em_tensor *cols = NULL, *back = NULL;
            CHECK_MSG(em_op_run(EM_OP_UNFOLD, &in, 1, &a, &cols, 1) == EM_OK, "unfold: %s", em_last_error());
            em_type xt = em_tensor_type(in);
            em_window_geom w;
            CHECK(em_window_geometry(EM_OP_UNFOLD, &xt, NULL, &a, EM_WIN_FLOOR, NULL, &w) == EM_OK);
            em_cuda_window_geometry g;
            em_cuda_window_geometry_of(&w, 3, in->strides, &g);
            char name[64];
            em_cuda_window_name("im2col", dt, name, sizeof name);
            cols_fn im = (cols_fn)(uintptr_t)dlsym(h, name);
            em_tensor *got = cols ? em_tensor_empty(cols->shape, 3, dt, em_cpu()) : NULL;
            if (im && got) {
                im(got->numel, g, em_tensor_data(got), em_tensor_data(in));
                CHECK_MSG(same_bits(got, cols), "im2col %s%s differs from unfold", name, last ? " (channels-last)" : "");
                ran++;
            }
            /* col2im: fold of the columns back into the image */
            em_attrs f = a;
            f.n_shape = 4;
            memcpy(f.shape, shape, sizeof shape);
            if (cols) CHECK_MSG(em_op_run(EM_OP_FOLD, &cols, 1, &f, &back, 1) == EM_OK, "fold: %s", em_last_error());
            em_cuda_window_name("col2im", dt, name, sizeof name);
            cols_fn ci = (cols_fn)(uintptr_t)dlsym(h, name);
            em_tensor *y = em_tensor_empty(shape, 4, dt, em_cpu());
            if (ci && back && cols) {
                em_cuda_window_geometry_of(&w, 3, NULL, &g);
                ci(y->numel, g, em_tensor_data(y), em_tensor_data(cols));
                CHECK_MSG(same_bits(y, back), "col2im %s differs from fold", name);
                ran++;
            }
            /* max_pool (ceil_mode, a NaN) and its gradient */
            em_attrs m;
            memset(&m, 0, sizeof m);
            m.n_kernel = m.n_stride = m.n_dilation = 2;
            m.n_padding = 4;
            m.kernel[0] = 3, m.kernel[1] = 2, m.stride[0] = 2, m.stride[1] = 2;
            m.padding[0] = m.padding[1] = m.padding[2] = m.padding[3] = 1;
            m.dilation[0] = m.dilation[1] = 1;
            m.ceil_mode = true;
            if (dt == EM_DTYPE_F32) ((float *)em_tensor_data(x))[9] = NAN;
            else ((double *)em_tensor_data(x))[9] = NAN;
            em_tensor *pooled[2] = {NULL, NULL};
            CHECK_MSG(em_op_run(EM_OP_MAX_POOL, &x, 1, &m, pooled, 2) == EM_OK, "max_pool: %s", em_last_error());
            em_type pt = em_tensor_type(x);
            int64_t p_hi[EM_MAX_SPATIAL];
            CHECK(em_pool_strided_geometry(EM_OP_MAX_POOL, &pt, &m, NULL, EM_WIN_CEIL, &w, p_hi) == EM_OK);
            em_cuda_window_name("max_pool", dt, name, sizeof name);
            pool_fn mp = (pool_fn)(uintptr_t)dlsym(h, name);
            if (mp && pooled[0]) {
                em_tensor *v = em_tensor_empty(pooled[0]->shape, 4, dt, em_cpu());
                em_tensor *iv = em_tensor_empty(pooled[1]->shape, 4, EM_DTYPE_I64, em_cpu());
                em_cuda_window_geometry_of(&w, 3, x->strides, &g);
                mp(v->numel, g, em_tensor_data(v), em_tensor_data(iv), em_tensor_data(x));
                CHECK_MSG(same_bits(v, pooled[0]) && same_bits(iv, pooled[1]), "max_pool %s differs from eager", name);
                /* the gradient through those indices */
                em_tensor *gy = image(dt, 1, pooled[0]->shape), *pair[2] = {gy, pooled[1]}, *gx = NULL;
                em_attrs ga;
                memset(&ga, 0, sizeof ga);
                ga.n_shape = 4;
                memcpy(ga.shape, shape, sizeof shape);
                CHECK_MSG(em_op_run(EM_OP_MAX_POOL_GRAD, pair, 2, &ga, &gx, 1) == EM_OK, "max_pool_grad: %s",
                          em_last_error());
                em_cuda_window_name("max_pool_grad", dt, name, sizeof name);
                pool_grad_fn mg = (pool_grad_fn)(uintptr_t)dlsym(h, name);
                em_tensor *hx = em_tensor_empty(shape, 4, dt, em_cpu());
                long long bad = -1;
                memset(&g, 0, sizeof g);
                g.in_numel = 7 * 6;
                g.out_numel = gy->numel / 6;
                if (mg && gx) {
                    mg(6, g, em_tensor_data(hx), em_tensor_data(gy), em_tensor_data(iv), &bad);
                    CHECK_MSG(bad == -1 && same_bits(hx, gx), "max_pool_grad %s differs from eager", name);
                    ran++;
                }
                em_tensor *objs[] = {v, iv, gy, gx, hx};
                for (int o = 0; o < 5; o++) em_tensor_release(objs[o]);
            }
            em_tensor *objs[] = {x, xl, cols, back, got, y, pooled[0], pooled[1]};
            for (int o = 0; o < 8; o++) em_tensor_release(objs[o]);
        }
    printf("%d window kernel runs (im2col, col2im, max_pool and its gradient) match eager to the bit\n", ran);
    CHECK(ran == 12);
    dlclose(h);
}

/* Close to the bit: float32 within 1e-6 (relative, plus 1e-7), float64
 * within 1e-14 (the GPU's average sums in double, the CPU's in a cascade
 * of its own dtype). */
static bool near(const em_tensor *a, const em_tensor *b) {
    if (a->numel != b->numel) return false;
    double tol = a->dtype == EM_DTYPE_F32 ? 1e-6 : 1e-14;
    for (int64_t i = 0; i < a->numel; i++) {
        double x = em_tensor_get_f64(a, i), y = em_tensor_get_f64(b, i);
        if (!(fabs(x - y) <= tol * fabs(x) + tol / 10)) return false;
    }
    return true;
}

typedef void (*avg_fn)(long long, em_cuda_window_geometry, void *, const void *);

/* avg_pool (with and without the padding in the divisor, a divisor given,
 * ceil_mode), adaptive_avg_pool and adaptive_max_pool, and the averages'
 * gradients, against eager: the means within rounding, the rest to the
 * bit (each input element gathers its windows' shares in the CPU's order). */
static void pools_match_eager(void) {
    char *src = em_cuda_window_source();
    void *h = src ? build(src, "window kernels (pools)") : NULL;
    free(src);
    if (!h) return;
    int ran = 0;
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64};
    for (int t = 0; t < 2; t++)
        for (int form = 0; form < 4; form++) { /* avg include_pad, avg divisor + ceil, adaptive avg, adaptive max */
            em_dtype dt = dts[t];
            int64_t shape[4] = {2, 3, 7, 6};
            em_tensor *x = image(dt, 2, shape);
            bool adaptive = form >= 2, max = form == 3;
            em_op op = max ? EM_OP_ADAPTIVE_MAX_POOL : adaptive ? EM_OP_ADAPTIVE_AVG_POOL : EM_OP_AVG_POOL;
            em_attrs a;
            memset(&a, 0, sizeof a);
            if (adaptive) {
                a.n_shape = 4;
                a.shape[0] = 2, a.shape[1] = 3, a.shape[2] = 3, a.shape[3] = 4;
            } else {
                a.n_kernel = a.n_stride = 2;
                a.n_padding = 4;
                a.kernel[0] = 3, a.kernel[1] = 2, a.stride[0] = 2, a.stride[1] = 2;
                a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = 1;
                a.count_include_pad = form == 0;
                a.divisor = form == 1 ? 5 : 0;
                a.ceil_mode = form == 1;
            }
            em_tensor *want[2] = {NULL, NULL};
            CHECK_MSG(em_op_run(op, &x, 1, &a, want, max ? 2 : 1) == EM_OK, "%s: %s", em_op_name(op), em_last_error());
            em_type xt = em_tensor_type(x);
            em_window_geom w;
            int64_t p_hi[EM_MAX_SPATIAL] = {0};
            CHECK(adaptive ? em_pool_adaptive_geometry(op, &xt, a.shape + 2, &w) == EM_OK
                           : em_pool_strided_geometry(op, &xt, &a, NULL, a.ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR, &w,
                                                      p_hi) == EM_OK);
            em_cuda_window_geometry g;
            em_cuda_window_geometry_of(&w, 3, x->strides, &g);
            for (int i = 0; i < EM_MAX_SPATIAL; i++) g.p_hi[i] = p_hi[i];
            g.adaptive = adaptive, g.include_pad = a.count_include_pad, g.divisor = a.divisor;
            char name[64];
            em_cuda_window_name(max ? "max_pool" : "avg_pool", dt, name, sizeof name);
            void *fn = dlsym(h, name);
            em_tensor *got = want[0] ? em_tensor_empty(want[0]->shape, 4, dt, em_cpu()) : NULL;
            em_tensor *gi = max && want[1] ? em_tensor_empty(want[1]->shape, 4, EM_DTYPE_I64, em_cpu()) : NULL;
            if (fn && got) {
                if (max) {
                    ((pool_fn)(uintptr_t)fn)(got->numel, g, em_tensor_data(got), em_tensor_data(gi), em_tensor_data(x));
                    CHECK_MSG(same_bits(got, want[0]) && same_bits(gi, want[1]), "%s (adaptive) differs from eager", name);
                } else {
                    ((avg_fn)(uintptr_t)fn)(got->numel, g, em_tensor_data(got), em_tensor_data(x));
                    CHECK_MSG(near(got, want[0]), "%s (form %d) differs from eager", name, form);
                }
                ran++;
            }
            if (!max && got) { /* the gradient */
                em_tensor *gy = image(dt, 3, got->shape), *gx = NULL;
                em_attrs ga = a;
                ga.n_shape = 4;
                memcpy(ga.shape, shape, sizeof shape);
                em_op gop = adaptive ? EM_OP_ADAPTIVE_AVG_POOL_GRAD : EM_OP_AVG_POOL_GRAD;
                CHECK_MSG(em_op_run(gop, &gy, 1, &ga, &gx, 1) == EM_OK, "%s: %s", em_op_name(gop), em_last_error());
                em_type bt = em_tensor_type(x);
                CHECK(adaptive ? em_pool_adaptive_geometry(gop, &bt, gy->shape + 2, &w) == EM_OK
                               : em_pool_strided_geometry(gop, &bt, &ga, gy->shape + 2, EM_WIN_FLOOR, &w, p_hi) == EM_OK);
                em_cuda_window_geometry_of(&w, 3, NULL, &g);
                for (int i = 0; i < EM_MAX_SPATIAL; i++) g.p_hi[i] = adaptive ? 0 : p_hi[i];
                g.adaptive = adaptive, g.include_pad = a.count_include_pad, g.divisor = a.divisor;
                em_cuda_window_name("avg_pool_grad", dt, name, sizeof name);
                avg_fn gf = (avg_fn)(uintptr_t)dlsym(h, name);
                em_tensor *hx = em_tensor_empty(shape, 4, dt, em_cpu());
                if (gf && gx) {
                    gf(hx->numel, g, em_tensor_data(hx), em_tensor_data(gy));
                    CHECK_MSG(same_bits(hx, gx), "%s (form %d) differs from eager", name, form);
                    ran++;
                }
                em_tensor_release(gy);
                em_tensor_release(gx);
                em_tensor_release(hx);
            }
            em_tensor *objs[] = {x, want[0], want[1], got, gi};
            for (int o = 0; o < 5; o++) em_tensor_release(objs[o]);
        }
    printf("%d pool kernel runs (avg_pool, adaptive avg and max, the averages' gradients) match eager\n", ran);
    CHECK(ran == 14);
    dlclose(h);
}

/* ---- fused optimizer steps ---- */

typedef void (*optim3_fn)(long long, em_cuda_optim_args, void *, const void *, void *);
typedef void (*optim5_fn)(long long, em_cuda_optim_args, void *, const void *, void *, void *, void *);

static em_tensor *vec(em_dtype dt, int which, int64_t n, bool positive) {
    em_tensor *t = em_tensor_empty(&n, 1, dt, em_cpu());
    fill(dt, which, em_tensor_data(t), (int)n);
    for (int64_t i = 0; positive && i < n; i++) { /* (second moments: not negative) */
        if (dt == EM_DTYPE_F32) ((float *)em_tensor_data(t))[i] = fabsf(((float *)em_tensor_data(t))[i]) + 0.5f;
        else ((double *)em_tensor_data(t))[i] = fabs(((double *)em_tensor_data(t))[i]) + 0.5;
    }
    return t;
}

/* SGD (plain, momentum's first and later steps, nesterov, weight decay,
 * maximize), Adam and AdamW (amsgrad), RMSprop (plain, centered, momentum,
 * both) against the CPU's fused steps: the parameter and every state to
 * the bit, float32 and float64. */
static void optim_matches_eager(void) {
    char *src = em_cuda_optim_source();
    void *h = src ? build(src, "optimizer steps") : NULL;
    free(src);
    if (!h) return;
    int ran = 0;
    const int64_t n = 37;
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64};
    for (int t = 0; t < 2; t++)
        for (int form = 0; form < 4; form++) {
            em_dtype dt = dts[t];
            const char *sfx = dt == EM_DTYPE_F32 ? "f32" : "f64";
            char name[64];
            /* SGD */
            {
                em_tensor *p = vec(dt, 0, n, false), *g = vec(dt, 1, n, false), *b = vec(dt, 2, n, false);
                em_tensor *p2 = em_clone(p), *b2 = em_clone(b);
                em_sgd_options o = {0.1, form ? 0.9 : 0, form == 3 ? 0.25 : 0, form >= 2 ? 0.01 : 0, form == 2,
                                    form == 3};
                bool first = form == 1;
                CHECK(em_sgd_step(&p, &g, &b, &first, 1, &o) == EM_OK);
                em_cuda_optim_args a = {.lr = o.lr, .momentum = o.momentum, .dampening = o.dampening,
                                        .weight_decay = o.weight_decay, .maximize = o.maximize,
                                        .nesterov = o.nesterov, .first = first};
                snprintf(name, sizeof name, "em_cuda_sgd_%s", sfx);
                optim3_fn fn = (optim3_fn)(uintptr_t)dlsym(h, name);
                if (fn) {
                    fn(n, a, em_tensor_data(p2), em_tensor_data(g), form ? em_tensor_data(b2) : NULL);
                    CHECK_MSG(same_bits(p, p2) && same_bits(b, b2), "%s (form %d) differs from the CPU's step", name,
                              form);
                    ran++;
                }
                em_tensor *objs[] = {p, g, b, p2, b2};
                for (int i = 0; i < 5; i++) em_tensor_release(objs[i]);
            }
            /* Adam / AdamW */
            {
                em_tensor *p = vec(dt, 0, n, false), *g = vec(dt, 1, n, false), *m = vec(dt, 2, n, false),
                          *v = vec(dt, 3, n, true), *vm = vec(dt, 4, n, true);
                em_tensor *p2 = em_clone(p), *m2 = em_clone(m), *v2 = em_clone(v), *vm2 = em_clone(vm);
                em_adam_options o = {1e-3, 0.9, 0.999, 1e-8, form >= 2 ? 0.01 : 0, form == 3, form == 1, form == 2};
                int64_t step = 3;
                CHECK(em_adam_step(&p, &g, &m, &v, &vm, &step, 1, &o) == EM_OK);
                double bias1 = 1 - pow(o.beta1, 3.0), bias2 = 1 - pow(o.beta2, 3.0);
                em_cuda_optim_args a = {.lr = o.lr, .weight_decay = o.weight_decay, .beta1 = o.beta1,
                                        .beta2 = o.beta2, .eps = o.eps, .step_size = o.lr / bias1,
                                        .bias2_sqrt = sqrt(bias2), .maximize = o.maximize, .decoupled = o.decoupled};
                snprintf(name, sizeof name, "em_cuda_adam_%s", sfx);
                optim5_fn fn = (optim5_fn)(uintptr_t)dlsym(h, name);
                if (fn) {
                    fn(n, a, em_tensor_data(p2), em_tensor_data(g), em_tensor_data(m2), em_tensor_data(v2),
                       o.amsgrad ? em_tensor_data(vm2) : NULL);
                    CHECK_MSG(same_bits(p, p2) && same_bits(m, m2) && same_bits(v, v2) && same_bits(vm, vm2),
                              "%s (form %d) differs from the CPU's step", name, form);
                    ran++;
                }
                em_tensor *objs[] = {p, g, m, v, vm, p2, m2, v2, vm2};
                for (int i = 0; i < 9; i++) em_tensor_release(objs[i]);
            }
            /* RMSprop */
            {
                em_tensor *p = vec(dt, 0, n, false), *g = vec(dt, 1, n, false), *sq = vec(dt, 3, n, true),
                          *ga = vec(dt, 5, n, false), *b = vec(dt, 2, n, false);
                /* (centered: the average's square stays below the square average) */
                for (int64_t i = 0; i < n; i++) {
            if (dt == EM_DTYPE_F32) ((float *)em_tensor_data(ga))[i] *= 0.01f;
            else ((double *)em_tensor_data(ga))[i] *= 0.01;
        }
                em_tensor *p2 = em_clone(p), *sq2 = em_clone(sq), *ga2 = em_clone(ga), *b2 = em_clone(b);
                em_rmsprop_options o = {0.01, 0.99, 1e-8, form == 3 ? 0.01 : 0, form >= 2 ? 0.9 : 0, form & 1, form == 3};
                CHECK(em_rmsprop_step(&p, &g, &sq, &ga, &b, 1, &o) == EM_OK);
                em_cuda_optim_args a = {.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay,
                                        .eps = o.eps, .alpha = o.alpha, .maximize = o.maximize,
                                        .centered = o.centered};
                snprintf(name, sizeof name, "em_cuda_rmsprop_%s", sfx);
                optim5_fn fn = (optim5_fn)(uintptr_t)dlsym(h, name);
                if (fn) {
                    fn(n, a, em_tensor_data(p2), em_tensor_data(g), em_tensor_data(sq2),
                       o.centered ? em_tensor_data(ga2) : NULL, o.momentum > 0 ? em_tensor_data(b2) : NULL);
                    CHECK_MSG(same_bits(p, p2) && same_bits(sq, sq2) && same_bits(ga, ga2) && same_bits(b, b2),
                              "%s (form %d) differs from the CPU's step", name, form);
                    ran++;
                }
                em_tensor *objs[] = {p, g, sq, ga, b, p2, sq2, ga2, b2};
                for (int i = 0; i < 9; i++) em_tensor_release(objs[i]);
            }
        }
    printf("%d fused optimizer steps (sgd, adam, rmsprop; their options) match the CPU's to the bit\n", ran);
    CHECK(ran == 24);
    dlclose(h);
}

/* ---- sorting along lines ---- */

typedef void (*sort_fn)(long long, em_cuda_line_geometry, long long, int, void *, long long *, const void *,
                        unsigned long long *, long long *);

/* em_cuda_sort_<T> against the CPU's stable sort (values and indices to the
 * bit), every stored dtype, ascending and descending, along both dims of a
 * [7, 13] tensor with repeated values, and for floats a NaN, -0 and 0. */
static void sort_matches_eager(void) {
    char *src = em_cuda_sort_source();
    void *h = src ? build(src, "sorting") : NULL;
    free(src);
    if (!h) return;
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_F16, EM_DTYPE_BF16, EM_DTYPE_I64,
                                   EM_DTYPE_I32, EM_DTYPE_I16,  EM_DTYPE_I8,  EM_DTYPE_U8,   EM_DTYPE_BOOL};
    int ran = 0;
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
        for (int dim = 0; dim < 2; dim++)
            for (int desc = 0; desc < 2; desc++) {
                em_dtype dt = dts[t];
                int64_t shape[2] = {7, 13};
                em_tensor *f = em_tensor_empty(shape, 2, EM_DTYPE_F64, em_cpu()), *x = NULL;
                for (int64_t i = 0; i < f->numel; i++) /* (repeats: ties keep their order) */
                    ((double *)em_tensor_data(f))[i] = (double)((i * 7) % 5) - 2.0;
                if (em_dtype_is_float(dt)) {
                    ((double *)em_tensor_data(f))[3] = NAN;
                    ((double *)em_tensor_data(f))[17] = -0.0;
                    ((double *)em_tensor_data(f))[30] = NAN;
                }
                em_attrs c;
                memset(&c, 0, sizeof c);
                c.dtype = dt;
                em_op_run(EM_OP_CAST, &f, 1, &c, &x, 1);
                em_attrs a;
                memset(&a, 0, sizeof a);
                a.n_dims = 1;
                a.dims[0] = dim;
                a.descending = desc;
                a.stable = true;
                em_tensor *want[2] = {NULL, NULL};
                CHECK_MSG(em_op_run(EM_OP_SORT, &x, 1, &a, want, 2) == EM_OK, "sort: %s", em_last_error());
                char name[64];
                em_cuda_sort_name(dt, name, sizeof name);
                sort_fn fn = (sort_fn)(uintptr_t)dlsym(h, name);
                CHECK_MSG(fn != NULL, "no %s", name);
                if (fn && want[0]) {
                    em_cuda_line_geometry g;
                    memset(&g, 0, sizeof g);
                    g.k_ndim = 1;
                    g.k_shape[0] = shape[1 - dim];
                    g.k_in[0] = g.k_out[0] = x->strides[1 - dim];
                    g.len = shape[dim];
                    g.in_step = g.out_step = x->strides[dim];
                    long long P = 1;
                    while (P < g.len) P <<= 1;
                    em_tensor *v = em_tensor_empty(shape, 2, dt, em_cpu());
                    em_tensor *iv = em_tensor_empty(shape, 2, EM_DTYPE_I64, em_cpu());
                    unsigned long long keys[32];
                    long long idx[32];
                    fn(shape[1 - dim], g, P, desc, em_tensor_data(v), em_tensor_data(iv), em_tensor_data(x), keys, idx);
                    CHECK_MSG(same_bits(v, want[0]) && same_bits(iv, want[1]), "%s along dim %d%s differs from eager",
                              name, dim, desc ? " (descending)" : "");
                    ran++;
                    em_tensor_release(v);
                    em_tensor_release(iv);
                }
                em_tensor *objs[] = {f, x, want[0], want[1]};
                for (int o = 0; o < 4; o++) em_tensor_release(objs[o]);
            }
    printf("%d sorts (every dtype, both dims, both directions, NaN and -0) match eager to the bit\n", ran);
    CHECK(ran == 40);
    dlclose(h);
}

/* ---- advanced indexing: index, index_put ---- */

typedef void (*adv_fn)(long long, em_cuda_adv_geometry, void *, const void *, long long *);

/* Advanced indexing kernels against eager: x [4, 5, 6] indexed along dims
 * (0, 2) (apart: B first) and (1, 2) (adjacent: B in place) by int64
 * tensors that broadcast ([3, 1] with [1, 2]) and hold negative values;
 * index_put writes and adds (repeats: the CPU's order on one host thread)
 * values that broadcast; an index out of range is reported. */
static void advanced_indexing_matches_eager(void) {
    em_cuda_adv_kernel ks[64];
    int n = em_cuda_adv_all(ks, 64);
    char *src = em_cuda_adv_source(ks, n);
    void *h = src ? build(src, "advanced indexing") : NULL;
    free(src);
    if (!h) return;
    int ran = 0;
    for (int i = 0; i < n; i++)
        for (int form = 0; form < 2; form++) {
            const em_cuda_adv_kernel *k = &ks[i];
            if (k->dtype != EM_DTYPE_F32 && k->dtype != EM_DTYPE_I64 && k->dtype != EM_DTYPE_F64) continue;
            char name[96];
            em_cuda_adv_name(k, name, sizeof name);
            adv_fn fn = (adv_fn)(uintptr_t)dlsym(h, name);
            CHECK_MSG(fn != NULL, "no %s", name);
            int64_t xs[3] = {4, 5, 6}, s1[2] = {3, 1}, s2[2] = {1, 2};
            em_tensor *x = em_tensor_empty(xs, 3, k->dtype, em_cpu());
            fill(k->dtype, 0, em_tensor_data(x), (int)x->numel);
            int64_t dims[2] = {form == 0 ? 0 : 1, 2};
            int64_t size0 = xs[dims[0]];
            em_tensor *i0 = em_tensor_empty(s1, 2, EM_DTYPE_I64, em_cpu()), *i1 = em_tensor_empty(s2, 2, EM_DTYPE_I64, em_cpu());
            int64_t *p0 = em_tensor_data(i0), *p1 = em_tensor_data(i1);
            p0[0] = 1, p0[1] = -1, p0[2] = 1 % size0; /* (a repeat, a negative) */
            p1[0] = -2, p1[1] = 3;
            em_attrs a;
            memset(&a, 0, sizeof a);
            a.n_dims = 2;
            a.dims[0] = dims[0];
            a.dims[1] = dims[1];
            a.accumulate = k->accumulate;
            em_tensor *want = NULL, *got = NULL, *vals = NULL;
            em_type xt = em_tensor_type(x), it[2] = {em_tensor_type(i0), em_tensor_type(i1)};
            em_adv_plan p;
            CHECK(em_adv_plan_make("index", &xt, it, 2, &a, &p) == EM_OK);
            int64_t other[EM_MAX_DIMS] = {0};
            em_tensor *ixs[2] = {i0, i1};
            long long bad = INT64_MIN, total = 1;
            for (int d = 0; d < p.nd; d++) total *= p.shape[d];
            em_cuda_adv_geometry g;
            if (k->op == EM_OP_INDEX) {
                em_tensor *ins[3] = {x, i0, i1};
                CHECK_MSG(em_op_run(EM_OP_INDEX, ins, 3, &a, &want, 1) == EM_OK, "index: %s", em_last_error());
                got = em_tensor_empty(p.shape, p.nd, k->dtype, em_cpu());
                em_contiguous_strides(p.shape, p.nd, other);
                em_cuda_adv_geometry_of(x, (const em_tensor *const *)ixs, 2, dims, p.nb, p.pos, p.shape, p.rest_dim,
                                        p.nd, other, true, &g);
                fn(total, g, em_tensor_data(got), em_tensor_data(x), &bad);
            } else { /* values of the last dim only: broadcast over the rest */
                int64_t vs[1] = {p.shape[p.nd - 1]};
                vals = em_tensor_empty(vs, 1, k->dtype, em_cpu());
                fill(k->dtype, 1, em_tensor_data(vals), (int)vals->numel);
                em_tensor *ins[4] = {x, i0, i1, vals};
                CHECK_MSG(em_op_run(EM_OP_INDEX_PUT, ins, 4, &a, &want, 1) == EM_OK, "index_put: %s", em_last_error());
                got = em_clone(x);
                other[p.nd - 1] = 1;
                em_cuda_adv_geometry_of(got, (const em_tensor *const *)ixs, 2, dims, p.nb, p.pos, p.shape, p.rest_dim,
                                        p.nd, other, true, &g);
                fn(total, g, em_tensor_data(got), em_tensor_data(vals), &bad);
            }
            CHECK_MSG(bad == INT64_MIN && want && same_bits(got, want), "%s over dims (%lld, 2) differs from eager",
                      name, (long long)dims[0]);
            ran++;
            p0[1] = size0; /* out of range: reported */
            bad = INT64_MIN;
            fn(total, g, em_tensor_data(got), k->op == EM_OP_INDEX ? em_tensor_data(x) : em_tensor_data(vals), &bad);
            CHECK_MSG(bad == size0, "%s: the bad index is reported as %lld", name, bad);
            em_tensor *objs[] = {x, i0, i1, want, got, vals};
            for (int o = 0; o < 6; o++) em_tensor_release(objs[o]);
        }
    printf("%d advanced-indexing runs (index, index_put, with accumulate) match eager to the bit\n", ran);
    CHECK(ran == 18);
    dlclose(h);
}

static bool find_cxx(void) {
    const char *env = getenv("CXX");
    const char *tries[] = {env, "c++", "g++", "clang++", "clang++-19"};
    for (int i = 0; i < 5; i++) {
        if (!tries[i] || !*tries[i]) continue;
        char cmd[512];
        snprintf(cmd, sizeof cmd, "command -v '%s' >/dev/null 2>&1", tries[i]);
        if (system(cmd) == 0) {
            snprintf(cxx, sizeof cxx, "%s", tries[i]);
            return true;
        }
    }
    return false;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); /* (in order with the failures on stderr) */
    if (!find_cxx()) {
        printf("skipped: no C++ compiler (c++, g++ or clang++) to compile the generated CUDA C for the host\n");
        return 77;
    }
    if (!mkdtemp(workdir)) return 1;
    const char *q = getenv("EMBER_CUDA_CODEGEN_QUICK");
    bool quick = q && *q && strcmp(q, "0") != 0;
    random_matches_eager();
    index_matches_eager();
    windows_match_eager();
    pools_match_eager();
    optim_matches_eager();
    sort_matches_eager();
    advanced_indexing_matches_eager();
    reductions_match_eager(quick);
    lines_match_eager(quick);
    elementwise_matches_eager(quick);
    rmdir(workdir);
    return check_report();
}
