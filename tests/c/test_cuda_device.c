/*
 * test_cuda_device.c - tensors on a GPU (the CUDA device, runtime/cuda/
 * device.c) compute what the CPU's eager kernels compute. Needs a GPU:
 * without a driver or a device it is skipped (exit 77) with the reason.
 * tools/gpu_check.sh runs it on the device tool's machine.
 *
 *   - copies: host -> device -> host round trips, every dtype, sizes 0 to
 *     a few MiB (the allocator's small and large pools);
 *   - every elementwise kernel of every compute dtype (and float16,
 *     bfloat16): contiguous operands (the 16-byte-vector layout) and
 *     transposed views with a broadcast operand (the strided layout), to
 *     the bit against eager (NaN matches any NaN);
 *   - casts between every pair of dtypes, to the bit;
 *   - the reductions the device runs, both layouts (one block per output,
 *     one thread per output), against eager: integers, max/min, arg and
 *     logical reductions exactly, float folds within 1e-6 of the sum of
 *     magnitudes (float64: 1e-12);
 *   - matmul through cuBLAS in four dtypes, plain, batched, folded, transposed;
 *   - gather, scatter and scatter_add, and an index out of range;
 *   - sort, topk and kthvalue, with ties and NaNs;
 *   - views and contiguous(), factories and random ops (the CPU's numbers);
 *   - ops across devices refused in PyTorch's words; the allocator reuses
 *     freed blocks.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ember/codegen_cuda.h"
#include "ember/cuda.h"
#include "ember/ops.h"
#include "ember/random.h"
#include "ember/tensor.h"

static const em_device GPU = {EM_DEVICE_CUDA, 0};

static const em_dtype DTYPES[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_F16, EM_DTYPE_BF16, EM_DTYPE_I64,
                                  EM_DTYPE_I32, EM_DTYPE_I16, EM_DTYPE_I8,  EM_DTYPE_U8,   EM_DTYPE_BOOL};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof *DTYPES))

static const double float_values[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.75, 1e-3, 100.0, -100.0, 1e30, -1e-30,
                                      INFINITY, -INFINITY, NAN, 3.14159, -2.5, 7.0, 0.25, 1e-8, 65504.0, -7.5};
static const int64_t int_values[] = {0, 1, -1, 2, -2, 3, 7, -8, 100, -100, 127, -128, 255, 32767, -32768};

/* A CPU tensor of shape[0..nd) in dtype dt, operand `which`'s values:
 * specials first, then pseudo-random ones; divisors (operand 1) of
 * integers are never zero, as eager refuses a zero divisor. */
static em_tensor *operand(em_dtype dt, int which, const int64_t *shape, int nd) {
    em_tensor *t = em_tensor_empty(shape, nd, em_dtype_is_float(dt) ? EM_DTYPE_F64 : EM_DTYPE_I64, em_cpu());
    unsigned r = 2463534242u + 977u * (unsigned)which;
    for (int64_t i = 0; i < t->numel; i++) {
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        if (em_dtype_is_float(dt)) {
            double f = i < 22 && which == 0 ? float_values[i] : ((int)(r % 4001) - 2000) / 97.0;
            ((double *)em_tensor_data(t))[i] = f;
        } else {
            int64_t v = dt == EM_DTYPE_BOOL ? (int64_t)((r >> 3) & 1)
                        : i < 15 && which == 0 ? int_values[i]
                                               : (int64_t)(r % 101) - 50;
            if (which == 1 && dt != EM_DTYPE_BOOL && v == 0) v = 3;
            if (dt == EM_DTYPE_U8 && v < 0) v = -v;
            ((int64_t *)em_tensor_data(t))[i] = v;
        }
    }
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    em_tensor *c = NULL;
    em_op_run(EM_OP_CAST, &t, 1, &a, &c, 1);
    em_tensor_release(t);
    return c;
}

/* A CPU tensor's elements as a contiguous float64 tensor (NULL: not made). */
static em_tensor *as_f64(em_tensor *t) {
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = EM_DTYPE_F64;
    em_tensor *d = NULL, *c = NULL;
    if (em_op_run(EM_OP_CAST, &t, 1, &a, &d, 1) == EM_OK) c = em_contiguous(d);
    em_tensor_release(d);
    return c;
}

static double at(const em_tensor *t64, int64_t i) { return t64 ? ((const double *)em_tensor_data(t64))[i] : NAN; }

/* The device tensor's elements on the host, contiguous. */
static em_tensor *host(em_tensor *t) {
    em_tensor *h = em_to_device(t, em_cpu());
    if (!h) fprintf(stderr, "copy to the host failed: %s\n", em_last_error());
    em_tensor *c = h ? em_contiguous(h) : NULL;
    em_tensor_release(h);
    return c;
}

/* Elements that differ in their last bits only, counted by compare_bits:
 * the functions ops_math.h takes from the platform's libm (float64's
 * transcendentals, float32's atan, asin, acos, erfc and pow) are glibc's on
 * the CPU and CUDA's on the GPU, each correctly rounded to within an ulp
 * or two, as PyTorch's CPU and CUDA kernels differ. */
static int last_bits;

/* Equal to the bit, NaN matching any NaN; floats differing in their last
 * bits (2e-6 for float32, 1e-12 for float64, relative plus absolute:
 * Bessel functions near their roots, results near zero after cancellation)
 * are counted in last_bits;
 * anything else is a mismatch, counted, the first few printed. */
static int compare_bits(const char *what, em_tensor *want, em_tensor *got_dev) {
    em_tensor *w = em_contiguous(want), *g = host(got_dev);
    int bad = 0;
    if (!w || !g || w->dtype != g->dtype || w->numel != g->numel) {
        fprintf(stderr, "%s: results differ in kind (%s)\n", what, g ? "dtype or size" : em_last_error());
        bad = 1;
    } else {
        size_t s = em_dtype_size(w->dtype);
        const char *a = em_tensor_data(w), *b = em_tensor_data(g);
        em_tensor *w64 = NULL, *g64 = NULL;
        for (int64_t i = 0; i < w->numel; i++) {
            if (!memcmp(a + i * s, b + i * s, s)) continue;
            if (em_dtype_is_float(w->dtype)) {
                if (!w64) w64 = as_f64(w), g64 = as_f64(g);
                double x = at(w64, i), y = at(g64, i);
                if (isnan(x) && isnan(y)) continue;
                double tol = w->dtype == EM_DTYPE_F64 ? 1e-12 : 2e-6;
                if (isfinite(x) && isfinite(y) && fabs(x - y) <= tol * fabs(x) + tol) {
                    last_bits++;
                    continue;
                }
                if (bad < 3) fprintf(stderr, "%s: element %lld: %.17g on the CPU, %.17g on the GPU\n", what,
                                     (long long)i, x, y);
            } else if (bad < 3) {
                fprintf(stderr, "%s: element %lld differs\n", what, (long long)i);
            }
            bad++;
        }
        em_tensor_release(w64);
        em_tensor_release(g64);
    }
    em_tensor_release(w);
    em_tensor_release(g);
    return bad;
}

/* How many of got_dev's elements lie beyond rtol * |want| + atol of
 * eager's (NaN matching NaN; the first few printed under `what`); a
 * result that could not be read counts as one. */
static int count_far(const char *what, em_tensor *want, em_tensor *got_dev, double rtol, double atol) {
    em_tensor *h = host(got_dev), *w64 = as_f64(want), *g64 = h ? as_f64(h) : NULL;
    int wrong = g64 ? 0 : 1;
    for (int64_t i = 0; g64 && i < want->numel; i++) {
        double w = at(w64, i), v = at(g64, i);
        if ((isnan(w) && isnan(v)) || w == v || fabs(w - v) <= rtol * fabs(w) + atol) continue;
        if (wrong++ < 3) fprintf(stderr, "%s: element %lld: %.17g on the CPU, %.17g on the GPU\n", what, (long long)i, w, v);
    }
    em_tensor_release(h);
    em_tensor_release(w64);
    em_tensor_release(g64);
    return wrong;
}

/* x / scale + 1 (values near 1: products of many of them neither
 * overflow nor vanish in one order and not in another, as inf * 0 would
 * make NaN), or NULL. */
static em_tensor *near_one(em_tensor *x, double scale) {
    em_tensor *scaled = NULL, *r = NULL, *s = em_tensor_scalar(1.0 / scale, x->dtype),
              *one = em_tensor_scalar(1.0, x->dtype), *mul[2] = {x, s};
    em_attrs m;
    memset(&m, 0, sizeof m);
    em_op_run(EM_OP_MUL, mul, 2, &m, &scaled, 1);
    em_tensor *add[2] = {scaled, one};
    if (scaled) em_op_run(EM_OP_ADD, add, 2, &m, &r, 1);
    em_tensor_release(scaled);
    em_tensor_release(s);
    em_tensor_release(one);
    return r;
}

static void copies(void) {
    static const int64_t sizes[] = {0, 1, 37, 4096, 1 << 20};
    for (int k = 0; k < N_DTYPES; k++)
        for (int s = 0; s < 5; s++) {
            em_tensor *x = operand(DTYPES[k], 0, &sizes[s], 1);
            em_tensor *d = x ? em_to_device(x, GPU) : NULL;
            CHECK_MSG(d && d->device.type == EM_DEVICE_CUDA, "to cuda: %s", em_last_error());
            if (d) CHECK(compare_bits("round trip", x, d) == 0);
            em_tensor_release(x);
            em_tensor_release(d);
        }
}

/* One elementwise kernel: contiguous [3, 37] operands, then transposed
 * views of them ([37, 3]) with operand 1 a broadcast [3] row. */
static int elementwise(const em_cuda_ew_kernel *k, int *ran) {
    int64_t shape[2] = {3, 37}, row[1] = {3}, perm[2] = {1, 0};
    em_tensor *c[3] = {NULL}, *g[3] = {NULL}, *cv[3] = {NULL}, *gv[3] = {NULL};
    int bad = 0;
    for (int i = 0; i < k->n_in; i++) {
        c[i] = operand(k->in[i], i, shape, 2);
        g[i] = em_to_device(c[i], GPU);
        if (i == 1) {
            cv[i] = operand(k->in[i], 7, row, 1);
            gv[i] = em_to_device(cv[i], GPU);
        } else {
            cv[i] = em_permute(c[i], perm, 2);
            gv[i] = g[i] ? em_permute(g[i], perm, 2) : NULL;
        }
    }
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = k->out;
    char name[200];
    for (int layout = 0; layout < 2; layout++) {
        em_tensor **ci = layout ? cv : c, **gi = layout ? gv : g;
        em_tensor *want = NULL, *got = NULL;
        if (em_op_run(k->op, ci, k->n_in, &a, &want, 1) != EM_OK || want->dtype != k->out) {
            em_tensor_release(want);
            continue; /* (eager refuses these operands) */
        }
        em_cuda_ew_name(k, layout ? EM_CUDA_STRIDED : EM_CUDA_CONTIG, name, sizeof name);
        if (em_op_run(k->op, gi, k->n_in, &a, &got, 1) != EM_OK) {
            fprintf(stderr, "%s: %s\n", name, em_last_error());
            bad++;
        } else {
            bad += compare_bits(name, want, got) != 0;
            ++*ran;
        }
        em_tensor_release(want);
        em_tensor_release(got);
    }
    for (int i = 0; i < k->n_in; i++) {
        em_tensor_release(c[i]);
        em_tensor_release(g[i]);
        em_tensor_release(cv[i]);
        em_tensor_release(gv[i]);
    }
    return bad;
}

static void elementwise_all(void) {
    static em_cuda_ew_kernel ks[2048];
    int ran = 0, bad = 0, kernels = 0;
    for (int k = 0; k < N_DTYPES; k++) {
        int n = em_cuda_ew_uniform(DTYPES[k], ks, 2048);
        for (int i = 0; i < n && i < 2048; i++) bad += elementwise(&ks[i], &ran);
        kernels += n;
    }
    for (int a = 0; a < N_DTYPES; a++) /* every cast */
        for (int b = 0; b < N_DTYPES; b++) {
            em_cuda_ew_kernel k = {EM_OP_CAST, 1, {DTYPES[a]}, DTYPES[b]};
            bad += elementwise(&k, &ran);
            kernels++;
        }
    printf("elementwise: %d kernels, %d runs, %d differ from eager (%d elements in their last bits: libm)\n",
           kernels, ran, bad, last_bits);
    CHECK(ran > 800);
    CHECK(bad == 0);
}

/* Reductions over dim 1 of [2000, 40] (one thread per output) and dim 0
 * (one block per output), and over everything. */
static void reductions(void) {
    static const em_op ops[] = {EM_OP_SUM,    EM_OP_MEAN, EM_OP_PROD, EM_OP_AMAX, EM_OP_AMIN, EM_OP_ARGMAX,
                                EM_OP_ARGMIN, EM_OP_ALL,  EM_OP_ANY,  EM_OP_NORM, EM_OP_VAR,  EM_OP_STD,
                                EM_OP_LOGSUMEXP};
#define N_REDUCTIONS ((int)(sizeof ops / sizeof *ops))
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_I64, EM_DTYPE_I32, EM_DTYPE_BOOL};
    int64_t shape[2] = {2000, 40};
    int ran = 0, bad = 0;
    for (int t = 0; t < 5; t++) {
        em_tensor *x = operand(dts[t], 1, shape, 2), *gx = x ? em_to_device(x, GPU) : NULL;
        /* (prod of floats: of values near 1) */
        em_tensor *near1 = em_dtype_is_float(dts[t]) && x ? near_one(x, 64.0) : NULL;
        em_tensor *gnear1 = near1 ? em_to_device(near1, GPU) : NULL;
        for (int o = 0; o < N_REDUCTIONS; o++)
            for (int how = 0; how < 3; how++) {
                em_attrs a;
                memset(&a, 0, sizeof a);
                a.n_dims = how == 2 ? 2 : 1;
                a.dims[0] = how == 1 ? 0 : how == 0 ? 1 : 0;
                a.dims[1] = 1;
                a.ord = 2.0;
                a.correction = 1.0;
                em_tensor *want = NULL, *got = NULL;
                em_tensor *cx = ops[o] == EM_OP_PROD && near1 ? near1 : x, *dx = ops[o] == EM_OP_PROD && near1 ? gnear1 : gx;
                if (em_op_run(ops[o], &cx, 1, &a, &want, 1) != EM_OK) continue;
                char what[96];
                snprintf(what, sizeof what, "%s of %s over %s", em_op_name(ops[o]), em_dtype_long_name(dts[t]),
                         how == 0 ? "dim 1" : how == 1 ? "dim 0" : "all");
                if (em_op_run(ops[o], &dx, 1, &a, &got, 1) != EM_OK) {
                    fprintf(stderr, "%s: %s\n", what, em_last_error());
                    bad++;
                } else {
                    ran++;
                    bool exact = !em_dtype_is_float(want->dtype) || ops[o] == EM_OP_AMAX || ops[o] == EM_OP_AMIN;
                    /* (float folds: within the bound of the sum of magnitudes; prod relative) */
                    double tol = (want->dtype == EM_DTYPE_F64 ? 1e-12 : 1e-6) * 2000 * 21;
                    bool prod = ops[o] == EM_OP_PROD;
                    bad += exact ? compare_bits(what, want, got) != 0
                                 : count_far(what, want, got, prod ? tol : 0, prod ? 0 : tol) != 0;
                }
                em_tensor_release(want);
                em_tensor_release(got);
            }
        em_tensor_release(x);
        em_tensor_release(gx);
        em_tensor_release(near1);
        em_tensor_release(gnear1);
    }
    printf("reductions: %d runs, %d differ from eager\n", ran, bad);
    CHECK(ran >= 100);
    CHECK(bad == 0);
}

/* Ops along lines, along dim 0 and dim 1 of [300, 700] (one thread per
 * line, one block per line), and layer_norm over the last dim, with and
 * without weight and bias: within 1e-5 (relative, plus 1e-6) of eager. */
static void lines(void) {
    static const em_op ops[] = {EM_OP_SOFTMAX, EM_OP_LOG_SOFTMAX, EM_OP_CUMSUM, EM_OP_CUMPROD, EM_OP_LAYER_NORM};
    int64_t shape[2] = {300, 700}, row[1] = {700};
    em_tensor *x = operand(EM_DTYPE_F32, 1, shape, 2), *w = operand(EM_DTYPE_F32, 2, row, 1),
              *b = operand(EM_DTYPE_F32, 3, row, 1);
    em_tensor *c[3] = {x, w, b}, *g[3] = {em_to_device(x, GPU), em_to_device(w, GPU), em_to_device(b, GPU)};
    em_tensor *near1 = x ? near_one(x, 512.0) : NULL, *gnear1 = near1 ? em_to_device(near1, GPU) : NULL;
    int ran = 0, bad = 0;
    for (int o = 0; o < 5; o++)
        for (int how = 0; how < (ops[o] == EM_OP_LAYER_NORM ? 3 : 2); how++) {
            em_attrs a;
            memset(&a, 0, sizeof a);
            a.n_dims = 1;
            a.dims[0] = ops[o] == EM_OP_LAYER_NORM ? 1 : how;
            a.value = 1e-5;
            int n_in = ops[o] == EM_OP_LAYER_NORM ? how + 1 : 1;
            em_tensor *want = NULL, *got = NULL;
            em_tensor *cin[3] = {c[0], c[1], c[2]}, *gin[3] = {g[0], g[1], g[2]};
            if (ops[o] == EM_OP_CUMPROD) /* (of values near 1: no partial product overflows) */
                cin[0] = near1, gin[0] = gnear1;
            if (em_op_run(ops[o], cin, n_in, &a, &want, 1) != EM_OK) {
                fprintf(stderr, "%s on the CPU: %s\n", em_op_name(ops[o]), em_last_error());
                continue;
            }
            char what[80];
            snprintf(what, sizeof what, "%s (%d operand%s, dim %lld)", em_op_name(ops[o]), n_in, n_in > 1 ? "s" : "",
                     (long long)a.dims[0]);
            if (em_op_run(ops[o], gin, n_in, &a, &got, 1) != EM_OK) {
                fprintf(stderr, "%s: %s\n", what, em_last_error());
                bad++;
            } else {
                ran++;
                /* (layer_norm: the CPU's float32 rows sum in float lanes, the GPU's in
                 * double; a weight up to 20 scales the difference) */
                bad += count_far(what, want, got, 1e-5, ops[o] == EM_OP_LAYER_NORM ? 2e-5 : 1e-6) != 0;
            }
            em_tensor_release(want);
            em_tensor_release(got);
        }
    printf("ops along lines: %d runs, %d differ from eager\n", ran, bad);
    CHECK(ran >= 10);
    CHECK(bad == 0);
    for (int i = 0; i < 3; i++) {
        em_tensor_release(c[i]);
        em_tensor_release(g[i]);
    }
    em_tensor_release(near1);
    em_tensor_release(gnear1);
}

static void views_factories_errors(void) {
    int64_t shape[3] = {4, 5, 6}, perm[3] = {2, 0, 1};
    em_tensor *x = operand(EM_DTYPE_F32, 1, shape, 3), *g = em_to_device(x, GPU);
    em_tensor *xv = em_permute(x, perm, 3), *gv = g ? em_permute(g, perm, 3) : NULL;
    CHECK(gv && gv->storage == g->storage && !em_tensor_is_contiguous(gv));
    em_tensor *xc = em_contiguous(xv), *gc = gv ? em_contiguous(gv) : NULL;
    CHECK(gc && em_tensor_is_contiguous(gc) && gc->device.type == EM_DEVICE_CUDA);
    if (gc) CHECK(compare_bits("contiguous of a permuted view", xc, gc) == 0);
    /* full and rand: the CPU's values */
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_shape = 2;
    a.shape[0] = 300;
    a.shape[1] = 7;
    a.dtype = EM_DTYPE_F32;
    a.value = 2.5;
    a.device = em_cpu();
    em_tensor *fc = NULL, *fg = NULL, *rc = NULL, *rg = NULL;
    em_op_run(EM_OP_FULL, NULL, 0, &a, &fc, 1);
    a.device = GPU;
    CHECK_MSG(em_op_run(EM_OP_FULL, NULL, 0, &a, &fg, 1) == EM_OK, "%s", em_last_error());
    if (fg) CHECK(fg->device.type == EM_DEVICE_CUDA && compare_bits("full", fc, fg) == 0);
    em_manual_seed(7);
    a.device = em_cpu();
    em_op_run(EM_OP_RANDN, NULL, 0, &a, &rc, 1);
    em_manual_seed(7);
    a.device = GPU;
    CHECK_MSG(em_op_run(EM_OP_RANDN, NULL, 0, &a, &rg, 1) == EM_OK, "%s", em_last_error());
    if (rg) CHECK(compare_bits("randn", rc, rg) == 0);
    /* across devices: refused, naming both */
    em_tensor *pair[2] = {x, g}, *y = NULL;
    CHECK(em_op_run(EM_OP_ADD, pair, 2, &a, &y, 1) != EM_OK);
    CHECK_MSG(check_contains(em_last_error(), "cuda:0") && check_contains(em_last_error(), "cpu"), "%s",
              em_last_error());
    /* an op without a CUDA kernel yet says so by name */
    int64_t sq[2] = {30, 4};
    em_tensor *m = em_tensor_empty(sq, 2, EM_DTYPE_F32, GPU);
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = 1;
    em_tensor *modes[2] = {NULL, NULL};
    CHECK(em_op_run(EM_OP_MODE, &m, 1, &a, modes, 2) != EM_OK && check_contains(em_last_error(), "mode"));
    printf("refused as it should be: %s\n", em_last_error());
    em_tensor_release(m);
    em_tensor *objs[] = {x, g, xv, gv, xc, gc, fc, fg, rc, rg};
    for (int i = 0; i < 10; i++) em_tensor_release(objs[i]);
}

/* |x| @ |y| in float64 on the CPU: what bounds a dot product's rounding
 * error (n * eps * sum |x_k y_k|), whatever order it sums in. */
static em_tensor *abs_product(em_tensor *x, em_tensor *y) {
    em_tensor *x64 = as_f64(x), *y64 = as_f64(y), *ax = NULL, *ay = NULL, *p = NULL;
    em_attrs a;
    memset(&a, 0, sizeof a);
    em_op_run(EM_OP_ABS, &x64, 1, &a, &ax, 1);
    em_op_run(EM_OP_ABS, &y64, 1, &a, &ay, 1);
    em_tensor *pair[2] = {ax, ay};
    if (ax && ay) em_op_run(EM_OP_MATMUL, pair, 2, &a, &p, 1);
    em_tensor *c = p ? em_contiguous(p) : NULL;
    em_tensor *objs[] = {x64, y64, ax, ay, p};
    for (int i = 0; i < 5; i++) em_tensor_release(objs[i]);
    return c;
}

/* Elements of got (on the device) further from want than tol * bound
 * (elementwise): counted, the first few printed. */
static int count_beyond(const char *what, em_tensor *want, em_tensor *got_dev, em_tensor *bound, double tol) {
    em_tensor *h = host(got_dev), *w64 = as_f64(want), *g64 = h ? as_f64(h) : NULL;
    int wrong = g64 && bound ? 0 : 1;
    for (int64_t i = 0; !wrong && i < want->numel; i++) {
        double w = at(w64, i), v = at(g64, i);
        if (fabs(w - v) <= tol * at(bound, i) + 1e-30) continue;
        if (wrong++ < 3)
            fprintf(stderr, "%s: element %lld: %.17g on the CPU, %.17g on the GPU (bound %.3g)\n", what, (long long)i,
                    w, v, tol * at(bound, i));
    }
    em_tensor_release(h);
    em_tensor_release(w64);
    em_tensor_release(g64);
    return wrong;
}

/* matmul through cuBLAS (TF32 off) against the CPU's (OpenBLAS), plain,
 * batched, rows folded (a Linear layer) and transposed. Two right answers
 * differ by their summation orders: each element within k * eps of
 * sum_k |x_k y_k| (float32: 1e-5 at k = 128; TF32's 10-bit products would
 * miss it by far), float16 and bfloat16 within theirs. */
static void matmul(void) {
    static const int64_t shapes[][2][3] = {{{64, 128, 0}, {128, 32, 0}}, {{4, 16, 32}, {4, 32, 8}},
                                           {{8, 16, 32}, {32, 24, 0}}};
    static const int nds[][2] = {{2, 2}, {3, 3}, {3, 2}};
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_F16, EM_DTYPE_BF16};
    int ran = 0, bad = 0;
    for (int t = 0; t < 4; t++)
        for (int c = 0; c < 4; c++) {
            int which = c < 3 ? c : 0;
            em_tensor *x = operand(dts[t], 4, shapes[which][0], nds[which][0]),
                      *y = operand(dts[t], 5, shapes[which][1], nds[which][1]);
            em_tensor *xs = x, *gx = em_to_device(x, GPU), *gy = em_to_device(y, GPU), *gxs = gx;
            if (c == 3) { /* x transposed twice: its values, not contiguous */
                int64_t tshape[2] = {128, 64}, perm[2] = {1, 0};
                em_tensor *base = operand(dts[t], 4, tshape, 2), *gbase = em_to_device(base, GPU);
                xs = em_permute(base, perm, 2);
                gxs = em_permute(gbase, perm, 2);
                em_tensor_release(base);
                em_tensor_release(gbase);
            }
            em_attrs a;
            memset(&a, 0, sizeof a);
            em_tensor *cpu_pair[2] = {xs, y}, *gpu_pair[2] = {gxs, gy}, *want = NULL, *got = NULL;
            em_status sc = em_op_run(EM_OP_MATMUL, cpu_pair, 2, &a, &want, 1);
            em_status sg = sc == EM_OK ? em_op_run(EM_OP_MATMUL, gpu_pair, 2, &a, &got, 1) : sc;
            if (sg != EM_OK) {
                fprintf(stderr, "matmul %s case %d: %s\n", em_dtype_long_name(dts[t]), c, em_last_error());
                bad++;
            } else {
                ran++;
                double tol = dts[t] == EM_DTYPE_F64 ? 1e-13 : dts[t] == EM_DTYPE_F32 ? 1e-5 : 2e-2;
                char what[64];
                snprintf(what, sizeof what, "matmul of %s, case %d", em_dtype_long_name(dts[t]), c);
                em_tensor *bound = abs_product(xs, y);
                bad += count_beyond(what, want, got, bound, tol) != 0;
                em_tensor_release(bound);
            }
            if (xs != x) em_tensor_release(xs);
            if (gxs != gx) em_tensor_release(gxs);
            em_tensor *objs[] = {x, y, gx, gy, want, got};
            for (int i = 0; i < 6; i++) em_tensor_release(objs[i]);
        }
    printf("matmul (cuBLAS): %d runs, %d differ from eager\n", ran, bad);
    CHECK(ran == 16);
    CHECK(bad == 0);
}

/* gather, scatter and scatter_add (float32 and int64 values, int64 and
 * int32 indices, dims 0 and 1) against eager: gathers and plain scatters
 * without repeated indices exactly; scatter_add within float rounding
 * (atomics add in the hardware's order). An index out of range raises
 * the CPU's words. */
static void gather_scatter(void) {
    static const em_dtype vals[] = {EM_DTYPE_F32, EM_DTYPE_I64}, idxs[] = {EM_DTYPE_I64, EM_DTYPE_I32};
    int64_t xs[2] = {50, 60}, is[2] = {40, 45};
    int ran = 0, bad = 0;
    for (int v = 0; v < 2; v++)
        for (int t = 0; t < 2; t++)
            for (int dim = 0; dim < 2; dim++)
                for (int form = 0; form < 3; form++) {
                    em_tensor *x = operand(vals[v], 1, xs, 2), *src = operand(vals[v], 2, is, 2);
                    em_tensor *ix64 = em_tensor_empty(is, 2, EM_DTYPE_I64, em_cpu());
                    for (int64_t i = 0; i < ix64->numel; i++) /* (a permutation per line: no repeats, but add's) */
                        ((int64_t *)em_tensor_data(ix64))[i] = form == 2 ? (i * 7) % xs[dim] : (i % is[1] * 13 + i / is[1]) % xs[dim];
                    em_attrs a;
                    memset(&a, 0, sizeof a);
                    a.dtype = idxs[t];
                    em_tensor *ix = NULL;
                    em_op_run(EM_OP_CAST, &ix64, 1, &a, &ix, 1);
                    memset(&a, 0, sizeof a);
                    a.n_dims = 1;
                    a.dims[0] = dim;
                    a.accumulate = form == 2;
                    em_op op = form == 0 ? EM_OP_GATHER : EM_OP_SCATTER;
                    em_tensor *gx = em_to_device(x, GPU), *gi = em_to_device(ix, GPU), *gs = em_to_device(src, GPU);
                    em_tensor *cin[3] = {x, ix, src}, *gin[3] = {gx, gi, gs}, *want = NULL, *got = NULL;
                    em_status sc = em_op_run(op, cin, form == 0 ? 2 : 3, &a, &want, 1);
                    em_status sg = sc == EM_OK ? em_op_run(op, gin, form == 0 ? 2 : 3, &a, &got, 1) : sc;
                    char what[96];
                    snprintf(what, sizeof what, "%s%s of %s, %s index, dim %d", em_op_name(op), form == 2 ? "_add" : "",
                             em_dtype_long_name(vals[v]), em_dtype_long_name(idxs[t]), dim);
                    if (sc != EM_OK || sg != EM_OK) {
                        fprintf(stderr, "%s: %s\n", what, em_last_error());
                        bad++;
                    } else {
                        ran++;
                        bool adds = form == 2 && vals[v] == EM_DTYPE_F32; /* (sums in another order) */
                        bad += (adds ? count_far(what, want, got, 1e-5, 1e-5) : compare_bits(what, want, got)) != 0;
                    }
                    em_tensor *objs[] = {x, src, ix64, ix, gx, gi, gs, want, got};
                    for (int o = 0; o < 9; o++) em_tensor_release(objs[o]);
                }
    /* an index out of range: the CPU's error */
    int64_t s1[1] = {4};
    em_tensor *x = em_tensor_empty(s1, 1, EM_DTYPE_F32, GPU), *i = em_tensor_empty(s1, 1, EM_DTYPE_I64, em_cpu());
    for (int k = 0; k < 4; k++) ((int64_t *)em_tensor_data(i))[k] = k == 2 ? 9 : k;
    em_tensor *gi = em_to_device(i, GPU), *pair[2] = {x, gi}, *y = NULL;
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    CHECK(em_op_run(EM_OP_GATHER, pair, 2, &a, &y, 1) != EM_OK &&
          check_contains(em_last_error(), "index 9 is out of bounds for dimension 0 with size 4"));
    printf("gather/scatter: %d runs, %d differ from eager; out of range: %s\n", ran, bad, em_last_error());
    CHECK(ran == 24);
    CHECK(bad == 0);
    em_tensor_release(x);
    em_tensor_release(i);
    em_tensor_release(gi);
}

/* sort (ascending and descending), topk (sorted and in input order) and
 * kthvalue along both dims of a [300, 700] float32 tensor with repeated
 * values and NaNs, and a line of 70000: values and indices equal the CPU's
 * (the same stable order). */
static void sorting(void) {
    int64_t shape[2] = {300, 700}, one[1] = {70000};
    em_tensor *xs[2] = {operand(EM_DTYPE_F32, 1, shape, 2), operand(EM_DTYPE_F32, 2, one, 1)};
    for (int i = 0; i < 2; i++) /* (ties and NaNs) */
        for (int64_t j = 0; j < xs[i]->numel; j += 97) ((float *)em_tensor_data(xs[i]))[j] = j % 3 ? 1.0f : NAN;
    int ran = 0, bad = 0;
    for (int i = 0; i < 2; i++) {
        em_tensor *g = em_to_device(xs[i], GPU);
        for (int dim = 0; dim < xs[i]->ndim; dim++)
            for (int form = 0; form < 5; form++) {
                em_attrs a;
                memset(&a, 0, sizeof a);
                a.n_dims = 1;
                a.dims[0] = dim;
                a.descending = form == 1 || form == 2;
                a.sorted = form != 3;
                a.stable = true;
                a.k = form == 4 ? 5 : 17;
                em_op op = form < 2 ? EM_OP_SORT : form < 4 ? EM_OP_TOPK : EM_OP_KTHVALUE;
                em_tensor *want[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
                em_status sc = em_op_run(op, &xs[i], 1, &a, want, 2);
                em_status sg = sc == EM_OK ? em_op_run(op, &g, 1, &a, got, 2) : sc;
                char what[96];
                snprintf(what, sizeof what, "%s (form %d) of %lld elements along dim %d", em_op_name(op), form,
                         (long long)xs[i]->numel, dim);
                if (sg != EM_OK) {
                    fprintf(stderr, "%s: %s\n", what, em_last_error());
                    bad++;
                } else {
                    ran++;
                    bad += (compare_bits(what, want[0], got[0]) != 0) + (compare_bits(what, want[1], got[1]) != 0);
                }
                em_tensor *objs[] = {want[0], want[1], got[0], got[1]};
                for (int o = 0; o < 4; o++) em_tensor_release(objs[o]);
            }
        em_tensor_release(g);
        em_tensor_release(xs[i]);
    }
    printf("sort/topk/kthvalue: %d runs, %d differ from eager\n", ran, bad);
    CHECK(ran == 15);
    CHECK(bad == 0);
}

static void allocator_reuse(void) {
    em_cuda_memory_stats before, after;
    em_cuda_memory_stats_of(0, &before);
    int64_t n[1] = {1 << 18};
    for (int i = 0; i < 100; i++) {
        em_tensor *t = em_tensor_empty(n, 1, EM_DTYPE_F32, GPU);
        CHECK(t != NULL);
        em_tensor_release(t);
    }
    em_cuda_memory_stats_of(0, &after);
    printf("allocator: %lld allocations, %lld cache hits, %lld segments made, %zu bytes reserved\n",
           after.allocations - before.allocations, after.cache_hits - before.cache_hits,
           after.segment_allocs - before.segment_allocs, after.reserved);
    CHECK(after.allocations - before.allocations == 100);
    CHECK(after.segment_allocs - before.segment_allocs <= 1);
    CHECK(after.allocated == before.allocated);
}

/* Not a benchmark (bench/ holds those): one large add, to see it ran at a
 * GPU's speed rather than fell back to something slow. */
static void speed_note(void) {
    int64_t n[1] = {1 << 26};
    em_tensor *a = em_tensor_empty(n, 1, EM_DTYPE_F32, GPU), *b = em_tensor_empty(n, 1, EM_DTYPE_F32, GPU);
    em_tensor *pair[2] = {a, b}, *y = NULL;
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_op_run(EM_OP_ADD, pair, 2, &at, &y, 1);
    em_tensor_release(y);
    em_cuda_synchronize(0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 20; i++) {
        y = NULL;
        em_op_run(EM_OP_ADD, pair, 2, &at, &y, 1);
        em_tensor_release(y);
    }
    em_cuda_synchronize(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("add of 2^26 float32: %.3f ms each, %.0f GB/s\n", s / 20 * 1e3, 3.0 * 4 * (1 << 26) * 20 / s / 1e9);
    em_tensor_release(a);
    em_tensor_release(b);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* (a run stopped by a timeout still shows how far it got) */
    em_cuda_device_register();
    char why[1024];
    if (!em_cuda_available(why, sizeof why)) {
        printf("skipped: no CUDA device here: %s\n", why);
        return 77;
    }
    em_cuda_properties p;
    CHECK(em_cuda_device_properties(0, &p) == EM_OK);
    if (strstr(p.name, "stand-in")) {
        printf("skipped: %s runs the CPU's kernels; this test is of a GPU's\n", p.name);
        return 77;
    }
    printf("device: %s, compute capability %d.%d, %zu MiB, %d multiprocessors\n", p.name, p.major, p.minor,
           p.total_memory >> 20, p.multiprocessors);
    copies();
    elementwise_all();
    reductions();
    lines();
    matmul();
    gather_scatter();
    sorting();
    views_factories_errors();
    allocator_reuse();
    speed_note();
    return check_report();
}
