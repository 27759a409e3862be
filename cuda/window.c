/*
 * window.c - the CUDA device's sliding-window ops: convolution and its two
 * adjoints as im2col (or col2im) plus cuBLAS, and max pooling with its
 * gradient, over the window geometry every device shares
 * (runtime/infer/window.h, pool.h); the kernels are
 * codegen_cuda/window_source.c's.
 *
 *   conv(x, w[, b])            columns = im2col(x) [N, C*K, L]; per group
 *                              y = W_g @ columns_g (one batched GEMM; a
 *                              single group's weights are one matrix for
 *                              every sample), + b;
 *   conv_weight(x, gy)         dW_g = gy_g @ columns_g^T, the samples'
 *                              positions one long inner dimension;
 *   conv_transpose(x, w[, b])  columns = W_g^T @ x_g, y = col2im(columns)
 *                              (+ b): conv's input gradient.
 *
 * The GEMMs go through the device's matmul (em_op_run inside a kernel:
 * autograd and the tracer see only the outer op). This is PyTorch's
 * "unfold + GEMM" path; implicit GEMM (no columns in memory) is later
 * work. Also unfold and fold (the columns themselves), and the pools:
 * max_pool, adaptive_max_pool and their gradient; avg_pool,
 * adaptive_avg_pool and their gradients. Float32 and float64, as every
 * device's window ops.
 */
#include <string.h>

#include "../runtime/infer/pool.h"
#include "device_internal.h"
#include "ember/codegen_cuda.h"

bool em_cuda_window_op(em_op op) {
    switch (op) {
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE:
    case EM_OP_CONV_WEIGHT:
    case EM_OP_UNFOLD:
    case EM_OP_FOLD:
    case EM_OP_MAX_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
    case EM_OP_MAX_POOL_GRAD:
    case EM_OP_AVG_POOL:
    case EM_OP_AVG_POOL_GRAD:
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_AVG_POOL_GRAD: return true;
    default: return false;
    }
}

static em_status window_ptx(const void *spec, int sm, char **ptx) {
    (void)spec;
    return em_cuda_window_ptx(sm, ptx);
}

static em_status window_kernel(cuda_dev *d, const char *which, em_dtype dt, char *name, size_t n, CUfunction *fn) {
    em_cuda_window_name(which, dt, name, n);
    return em_cuda_dev_kernel(d, name, NULL, window_ptx, NULL, fn);
}

static em_status float_only(em_op op, em_dtype dt) {
    if (dt == EM_DTYPE_F32 || dt == EM_DTYPE_F64) return EM_OK;
    return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: no kernel for it on cuda yet for %s (float32 and float64)",
                    em_op_name(op), em_dtype_long_name(dt));
}

/* cols (contiguous [N, C*K, L]) = x's columns. */
static em_status im2col_into(cuda_dev *d, em_tensor *x, const em_window_geom *w, em_tensor *cols) {
    if (cols->numel == 0) return EM_OK;
    em_cuda_window_geometry g;
    em_cuda_window_geometry_of(w, x->shape[1], x->strides, &g);
    char name[64];
    CUfunction fn;
    em_status st = window_kernel(d, "im2col", x->dtype, name, sizeof name, &fn);
    long long count = cols->numel;
    CUdeviceptr o = em_cuda_address(cols), i = em_cuda_address(x);
    void *params[] = {&count, &g, &o, &i};
    return st == EM_OK ? em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name) : st;
}

/* x's columns [N, C*K, L] (a new contiguous device tensor), or NULL. */
static em_tensor *im2col(cuda_dev *d, em_tensor *x, const em_window_geom *w) {
    int64_t shape[3] = {x->shape[0], x->shape[1] * w->k_numel, w->out_numel};
    em_tensor *cols = em_tensor_empty(shape, 3, x->dtype, x->device);
    if (cols && im2col_into(d, x, w, cols) != EM_OK) {
        em_tensor_release(cols);
        return NULL;
    }
    return cols;
}

/* y (contiguous [N, C, big...]) = col2im(cols [N, C*K, L]). */
static em_status col2im(cuda_dev *d, em_tensor *cols, const em_window_geom *w, em_tensor *y) {
    if (y->numel == 0) return EM_OK;
    em_cuda_window_geometry g;
    em_cuda_window_geometry_of(w, y->shape[1], NULL, &g);
    char name[64];
    CUfunction fn;
    em_status st = window_kernel(d, "col2im", y->dtype, name, sizeof name, &fn);
    long long count = y->numel;
    CUdeviceptr o = em_cuda_address(y), i = em_cuda_address(cols);
    void *params[] = {&count, &g, &o, &i};
    return st == EM_OK ? em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name) : st;
}

static em_tensor *matmul(em_tensor *a, em_tensor *b) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *pair[2] = {a, b}, *z = NULL;
    return em_op_run(EM_OP_MATMUL, pair, 2, &at, &z, 1) == EM_OK ? z : NULL;
}

static em_tensor *reshaped(em_tensor *t, int n, const int64_t *shape) { return t ? em_reshape(t, shape, n) : NULL; }

/* out = y (+ b along dim 1), y in out's shape (a view of it made here). */
static em_status finish(cuda_dev *d, em_tensor *y, em_tensor *b, em_tensor *out) {
    em_tensor *view = reshaped(y, out->ndim, out->shape), *bias = NULL;
    em_status st = view ? EM_OK : em_last_status();
    if (st == EM_OK && b) {
        int64_t shape[EM_MAX_DIMS];
        shape[0] = b->numel;
        for (int i = 1; i + 1 < out->ndim; i++) shape[i] = 1;
        if (!(bias = reshaped(b, out->ndim - 1, shape))) st = em_last_status();
    }
    em_tensor *pair[2] = {view, bias};
    if (st == EM_OK) st = b ? em_cuda_dev_ew_into(d, EM_OP_ADD, pair, 2, out) : em_cuda_dev_copy_into(d, out, view);
    em_tensor_release(view);
    em_tensor_release(bias);
    return st;
}

static int64_t groups_of(const em_attrs *a) { return a->groups > 0 ? a->groups : 1; }

static em_status run_conv(cuda_dev *d, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor *out) {
    em_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    em_type xt = em_tensor_type(x);
    em_window_geom geom;
    em_status st = em_window_geometry(EM_OP_CONV, &xt, w->shape + 2, a, EM_WIN_FLOOR, NULL, &geom);
    if (st != EM_OK) return st;
    int64_t n = x->shape[0], c = x->shape[1], o = w->shape[0], g = groups_of(a), k = geom.k_numel, l = geom.out_numel;
    em_tensor *cols = im2col(d, x, &geom), *wm = NULL, *y = NULL, *c4 = NULL;
    if (g == 1) {
        int64_t ws[2] = {o, c * k};
        wm = reshaped(w, 2, ws);
        y = cols && wm ? matmul(wm, cols) : NULL; /* [N, O, L] */
    } else {
        int64_t ws[3] = {g, o / g, c / g * k}, cs[4] = {n, g, c / g * k, l};
        wm = reshaped(w, 3, ws);
        c4 = reshaped(cols, 4, cs);
        y = c4 && wm ? matmul(wm, c4) : NULL; /* [N, G, O/G, L] */
    }
    st = y ? finish(d, y, b, out) : em_last_status();
    em_tensor *objs[] = {cols, wm, y, c4};
    for (int i = 0; i < 4; i++) em_tensor_release(objs[i]);
    return st;
}

static em_status run_conv_weight(cuda_dev *d, em_tensor *const *in, const em_attrs *a, em_tensor *out) {
    em_tensor *x = in[0], *gy = in[1];
    em_type xt = em_tensor_type(x);
    em_window_geom geom;
    em_status st = em_window_geometry(EM_OP_CONV_WEIGHT, &xt, a->shape + 2, a, EM_WIN_TRANSPOSED, gy->shape + 2, &geom);
    if (st != EM_OK) return st;
    int64_t n = x->shape[0], c = x->shape[1], o = a->shape[0], g = groups_of(a), k = geom.k_numel, l = geom.out_numel;
    int64_t cs[4] = {n, g, c / g * k, l}, gs[4] = {n, g, o / g, l};
    int64_t cperm[4] = {1, 0, 3, 2}, gperm[4] = {1, 2, 0, 3};
    int64_t bs[3] = {g, n * l, c / g * k}, as[3] = {g, o / g, n * l};
    em_tensor *cols = im2col(d, x, &geom), *c4 = reshaped(cols, 4, cs), *cp = c4 ? em_permute(c4, cperm, 4) : NULL;
    em_tensor *cc = cp ? em_contiguous(cp) : NULL, *bm = reshaped(cc, 3, bs);
    em_tensor *g4 = reshaped(gy, 4, gs), *gp = g4 ? em_permute(g4, gperm, 4) : NULL;
    em_tensor *gc = gp ? em_contiguous(gp) : NULL, *am = reshaped(gc, 3, as);
    em_tensor *dw = am && bm ? matmul(am, bm) : NULL; /* [G, O/G, C/G*K] */
    st = dw ? finish(d, dw, NULL, out) : em_last_status();
    em_tensor *objs[] = {cols, c4, cp, cc, bm, g4, gp, gc, am, dw};
    for (int i = 0; i < 10; i++) em_tensor_release(objs[i]);
    return st;
}

static em_status run_conv_transpose(cuda_dev *d, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor *out) {
    em_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    em_type yt = em_tensor_type(out);
    em_window_geom geom;
    em_status st = em_window_geometry(EM_OP_CONV_TRANSPOSE, &yt, w->shape + 2, a, EM_WIN_TRANSPOSED, x->shape + 2, &geom);
    if (st != EM_OK) return st;
    int64_t n = x->shape[0], cin = x->shape[1], g = groups_of(a), cog = w->shape[1], k = geom.k_numel;
    int64_t l = geom.out_numel;
    int64_t ws[3] = {g, cin / g, cog * k}, wperm[3] = {0, 2, 1}, xs[4] = {n, g, cin / g, l};
    em_tensor *w3 = reshaped(w, 3, ws), *wt = w3 ? em_permute(w3, wperm, 3) : NULL; /* [G, Cout/G*K, Cin/G] */
    em_tensor *x4 = reshaped(x, 4, xs);
    em_tensor *cols = wt && x4 ? matmul(wt, x4) : NULL; /* [N, G, Cout/G*K, L]: [N, Cout*K, L] */
    em_tensor *y = NULL;
    if (!cols) st = em_last_status();
    bool direct = !b && em_tensor_is_contiguous(out);
    if (st == EM_OK && !(y = direct ? (em_tensor_retain(out), out)
                                    : em_tensor_empty(out->shape, out->ndim, out->dtype, out->device)))
        st = em_last_status();
    if (st == EM_OK) st = col2im(d, cols, &geom, y);
    if (st == EM_OK && !direct) st = finish(d, y, b, out);
    em_tensor *objs[] = {w3, wt, x4, cols, y};
    for (int i = 0; i < 5; i++) em_tensor_release(objs[i]);
    return st;
}

/* A pool's geometry: strided (kernel, stride, padding, dilation,
 * ceil_mode, p_hi) or adaptive (the small side's size given), over big (the
 * input's type, or the gradient's result) with the small side `small`
 * (NULL: from the rule), and avg's divisor rule; into g, reading x's
 * strides (NULL: none). */
static em_status pool_geometry(em_op op, const em_type *big, const int64_t *small, const em_attrs *a, bool adaptive,
                               em_window_rule rule, const int64_t *x_strides, em_cuda_window_geometry *g) {
    em_window_geom w;
    int64_t p_hi[EM_MAX_SPATIAL] = {0};
    em_status st = adaptive ? em_pool_adaptive_geometry(op, big, small, &w)
                            : em_pool_strided_geometry(op, big, a, small, rule, &w, p_hi);
    if (st != EM_OK) return st;
    em_cuda_window_geometry_of(&w, big->shape[1], x_strides, g);
    for (int i = 0; i < EM_MAX_SPATIAL; i++) g->p_hi[i] = p_hi[i]; /* (padded as the geometry is) */
    g->adaptive = adaptive;
    g->include_pad = a->count_include_pad;
    g->divisor = a->divisor;
    return EM_OK;
}

static em_status launch_window(cuda_dev *d, const char *which, em_dtype dt, long long count, void **params) {
    if (count == 0) return EM_OK;
    char name[64];
    CUfunction fn;
    em_status st = window_kernel(d, which, dt, name, sizeof name, &fn);
    return st == EM_OK ? em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name) : st;
}

/* max_pool and adaptive_max_pool: each window's max and where it was. */
static em_status run_max_pool(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *a, em_tensor **out) {
    em_tensor *x = in[0];
    em_type xt = em_tensor_type(x);
    bool adaptive = op == EM_OP_ADAPTIVE_MAX_POOL;
    em_cuda_window_geometry g;
    em_status st = pool_geometry(op, &xt, adaptive ? a->shape + 2 : NULL, a, adaptive,
                                 a->ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR, x->strides, &g);
    if (st != EM_OK) return st;
    if (!em_tensor_is_contiguous(out[0]) || !em_tensor_is_contiguous(out[1]))
        return em_error(EM_ERR_INTERNAL, "cuda: %s: its results are not contiguous", em_op_name(op));
    long long count = out[0]->numel;
    CUdeviceptr y = em_cuda_address(out[0]), iy = em_cuda_address(out[1]), xp = em_cuda_address(x);
    void *params[] = {&count, &g, &y, &iy, &xp};
    return launch_window(d, "max_pool", x->dtype, count, params);
}

/* avg_pool and adaptive_avg_pool; their gradients (gy in, the input's
 * shape out), each input element gathering its windows' shares. */
static em_status run_avg_pool(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *a, em_tensor *out) {
    bool grad = op == EM_OP_AVG_POOL_GRAD || op == EM_OP_ADAPTIVE_AVG_POOL_GRAD;
    bool adaptive = op == EM_OP_ADAPTIVE_AVG_POOL || op == EM_OP_ADAPTIVE_AVG_POOL_GRAD;
    if (!em_tensor_is_contiguous(out))
        return em_error(EM_ERR_INTERNAL, "cuda: %s: its result is not contiguous", em_op_name(op));
    em_tensor *x = grad ? em_contiguous(in[0]) : in[0];
    if (!x) return em_last_status();
    em_type big = em_tensor_type(grad ? out : x);
    const int64_t *small = grad ? in[0]->shape + 2 : adaptive ? a->shape + 2 : NULL;
    em_window_rule rule = !grad && a->ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR;
    em_cuda_window_geometry g;
    em_status st = pool_geometry(op, &big, small, a, adaptive, rule, grad ? NULL : x->strides, &g);
    long long count = out->numel;
    CUdeviceptr y = em_cuda_address(out), xp = em_cuda_address(x);
    void *params[] = {&count, &g, &y, &xp};
    if (st == EM_OK) st = launch_window(d, grad ? "avg_pool_grad" : "avg_pool", out->dtype, count, params);
    if (grad) em_tensor_release(x);
    return st;
}

/* unfold: x's columns, as F.unfold; fold: columns summed back into an
 * image, as F.fold. */
static em_status run_unfold_fold(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *a, em_tensor *out) {
    em_type big = em_tensor_type(op == EM_OP_UNFOLD ? in[0] : out);
    em_window_geom w;
    em_status st = em_window_geometry(op, &big, NULL, a, EM_WIN_FLOOR, NULL, &w);
    if (st != EM_OK) return st;
    if (!em_tensor_is_contiguous(out))
        return em_error(EM_ERR_INTERNAL, "cuda: %s: its result is not contiguous", em_op_name(op));
    if (op == EM_OP_UNFOLD) return im2col_into(d, in[0], &w, out);
    em_tensor *cols = em_contiguous(in[0]);
    st = cols ? col2im(d, cols, &w, out) : em_last_status();
    em_tensor_release(cols);
    return st;
}

/* gx (out, the input's shape) from gy and max_pool's indices: one thread
 * per plane, in the CPU's order. */
static em_status run_max_pool_grad(cuda_dev *d, em_tensor *const *in, em_tensor *out) {
    long long planes = out->ndim >= 2 ? out->shape[0] * out->shape[1] : 0;
    if (planes == 0 || out->numel == 0) return EM_OK;
    if (!em_tensor_is_contiguous(out))
        return em_error(EM_ERR_INTERNAL, "cuda: max_pool_grad: its result is not contiguous");
    em_tensor *gy = em_contiguous(in[0]), *moved = em_cuda_dev_on_device(in[1], out->device);
    em_tensor *idx = moved ? em_cuda_dev_converted(d, moved, EM_DTYPE_I64) : NULL;
    em_tensor *ic = idx ? em_contiguous(idx) : NULL;
    em_status st = gy && ic ? EM_OK : em_last_status();
    em_cuda_window_geometry g;
    memset(&g, 0, sizeof g);
    g.in_numel = out->numel / planes;
    g.out_numel = gy ? gy->numel / planes : 0;
    char name[64];
    CUfunction fn;
    uint64_t bad = 0;
    if (st == EM_OK) st = window_kernel(d, "max_pool_grad", out->dtype, name, sizeof name, &fn);
    if (st == EM_OK) st = em_cuda_dev_word(d, -1, &bad);
    if (st == EM_OK) {
        CUdeviceptr o = em_cuda_address(out), gp = em_cuda_address(gy), ip = em_cuda_address(ic), w = bad;
        void *params[] = {&planes, &g, &o, &gp, &ip, &w};
        st = em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, planes), params, name);
        long long seen = -1;
        if (st == EM_OK) st = em_cuda_dev_read_word(d, bad, &seen);
        if (st == EM_OK && seen != -1)
            st = em_error(EM_ERR_INDEX, "max_pool_grad: index %lld is outside its plane of %lld elements", seen,
                          (long long)g.in_numel);
    }
    em_cuda_dev_scratch_free(d, bad);
    em_tensor *objs[] = {gy, moved, idx, ic};
    for (int i = 0; i < 4; i++) em_tensor_release(objs[i]);
    return st;
}

em_status em_cuda_run_window(cuda_dev *d, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                             em_tensor **out) {
    em_status st = float_only(op, out[0]->dtype);
    if (st != EM_OK) return st;
    switch (op) {
    case EM_OP_CONV: return run_conv(d, in, n_in, attrs, out[0]);
    case EM_OP_CONV_WEIGHT: return run_conv_weight(d, in, attrs, out[0]);
    case EM_OP_CONV_TRANSPOSE: return run_conv_transpose(d, in, n_in, attrs, out[0]);
    case EM_OP_UNFOLD:
    case EM_OP_FOLD: return run_unfold_fold(d, op, in, attrs, out[0]);
    case EM_OP_MAX_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL: return run_max_pool(d, op, in, attrs, out);
    case EM_OP_MAX_POOL_GRAD: return run_max_pool_grad(d, in, out[0]);
    default: return run_avg_pool(d, op, in, attrs, out[0]);
    }
}
