/*
 * window.c - the CUDA device's sliding-window kernels, over the window
 * geometry every device shares (runtime/infer/window.h, pool.h); the
 * kernels are codegen_cuda/window_source.c's:
 *
 *   unfold and fold      im2col and col2im: a convolution's columns, and
 *                        their sum back into an image;
 *   max_pool, adaptive_max_pool, max_pool_grad;
 *   avg_pool, adaptive_avg_pool, and both averages' gradients.
 *
 * Convolution and its two adjoints are unfold (or fold) plus cuBLAS,
 * composed in conv.c. Float32 and float64, as every device's window ops.
 */
#include <string.h>

#include "../runtime/infer/pool.h"
#include "internal.h"
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
    case EM_OP_ADAPTIVE_AVG_POOL_GRAD:
        return true;
    default:
        return false;
    }
}

static em_status window_ptx(const void *spec, int sm, char **ptx) {
    (void)spec;
    return em_cuda_window_ptx(sm, ptx);
}

static em_status window_kernel(cuda_dev *d, const char *which, em_dtype dt, char *name, size_t n,
                               CUfunction *fn) {
    em_cuda_window_name(which, dt, name, n);
    return em_cuda_dev_kernel(d, name, NULL, window_ptx, NULL, fn);
}

static em_status float_only(em_op op, em_dtype dt) {
    if (dt == EM_DTYPE_F32 || dt == EM_DTYPE_F64) return EM_OK;
    return em_error(EM_ERR_NOT_IMPLEMENTED,
                    "%s: no kernel for it on cuda yet for %s (float32 and float64)", em_op_name(op),
                    em_dtype_long_name(dt));
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
    return st == EM_OK ? em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name)
                       : st;
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
    return st == EM_OK ? em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name)
                       : st;
}

/* A pool's geometry: strided (kernel, stride, padding, dilation,
 * ceil_mode, p_hi) or adaptive (the small side's size given), over big (the
 * input's type, or the gradient's result) with the small side `small`
 * (NULL: from the rule), and avg's divisor rule; into g, reading x's
 * strides (NULL: none). */
static em_status pool_geometry(em_op op, const em_type *big, const int64_t *small,
                               const em_attrs *a, bool adaptive, em_window_rule rule,
                               const int64_t *x_strides, em_cuda_window_geometry *g) {
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

static em_status launch_window(cuda_dev *d, const char *which, em_dtype dt, long long count,
                               void **params) {
    if (count == 0) return EM_OK;
    char name[64];
    CUfunction fn;
    em_status st = window_kernel(d, which, dt, name, sizeof name, &fn);
    return st == EM_OK ? em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name)
                       : st;
}

/* max_pool and adaptive_max_pool: each window's max and where it was. */
static em_status run_max_pool(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *a,
                              em_tensor **out) {
    em_tensor *x = in[0];
    em_type xt = em_tensor_type(x);
    bool adaptive = op == EM_OP_ADAPTIVE_MAX_POOL;
    em_cuda_window_geometry g;
    em_status st = pool_geometry(op, &xt, adaptive ? a->shape + 2 : NULL, a, adaptive,
                                 a->ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR, x->strides, &g);
    if (st != EM_OK) return st;
    if (!em_tensor_is_contiguous(out[0]) || !em_tensor_is_contiguous(out[1]))
        return em_error(EM_ERR_INTERNAL, "cuda: %s: its results are not contiguous",
                        em_op_name(op));
    long long count = out[0]->numel;
    CUdeviceptr y = em_cuda_address(out[0]), iy = em_cuda_address(out[1]), xp = em_cuda_address(x);
    void *params[] = {&count, &g, &y, &iy, &xp};
    return launch_window(d, "max_pool", x->dtype, count, params);
}

/* avg_pool and adaptive_avg_pool; their gradients (gy in, the input's
 * shape out), each input element gathering its windows' shares. */
static em_status run_avg_pool(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *a,
                              em_tensor *out) {
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
    if (st == EM_OK)
        st = launch_window(d, grad ? "avg_pool_grad" : "avg_pool", out->dtype, count, params);
    if (grad) em_tensor_release(x);
    return st;
}

/* unfold: x's columns, as F.unfold; fold: columns summed back into an
 * image, as F.fold. */
static em_status run_unfold_fold(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *a,
                                 em_tensor *out) {
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
        CUdeviceptr o = em_cuda_address(out), gp = em_cuda_address(gy), ip = em_cuda_address(ic),
                    w = bad;
        void *params[] = {&planes, &g, &o, &gp, &ip, &w};
        st = em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, planes), params, name);
        long long seen = -1;
        if (st == EM_OK) st = em_cuda_dev_read_word(d, bad, &seen);
        if (st == EM_OK && seen != -1)
            st = em_error(EM_ERR_INDEX,
                          "max_pool_grad: index %lld is outside its plane of %lld elements", seen,
                          (long long)g.in_numel);
    }
    em_cuda_dev_scratch_free(d, bad);
    em_tensor *objs[] = {gy, moved, idx, ic};
    for (int i = 0; i < 4; i++) em_tensor_release(objs[i]);
    return st;
}

em_status em_cuda_run_window(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                             const em_attrs *attrs, em_tensor **out) {
    em_status st = float_only(op, out[0]->dtype);
    if (st != EM_OK) return st;
    switch (op) {
    case EM_OP_CONV:
    case EM_OP_CONV_WEIGHT:
    case EM_OP_CONV_TRANSPOSE:
        return em_cuda_conv(op, in, n_in, attrs, out[0]);
    case EM_OP_UNFOLD:
    case EM_OP_FOLD:
        return run_unfold_fold(d, op, in, attrs, out[0]);
    case EM_OP_MAX_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
        return run_max_pool(d, op, in, attrs, out);
    case EM_OP_MAX_POOL_GRAD:
        return run_max_pool_grad(d, in, out[0]);
    default:
        return run_avg_pool(d, op, in, attrs, out[0]);
    }
}
