/*
 * conv.c - convolution and its two adjoints on the CUDA device, as
 * PyTorch's "unfold + GEMM" path, composed from ops through dispatch:
 *
 *   conv(x, w[, b])            columns = unfold(x) [N, C*K, L]; per group
 *                              y = W_g @ columns_g (one batched matmul; a
 *                              single group's weights are one matrix for
 *                              every sample), + b;
 *   conv_weight(x, gy)         dW_g = gy_g @ columns_g^T, the samples'
 *                              positions one long inner dimension;
 *   conv_transpose(x, w[, b])  columns = W_g^T @ x_g, y = fold(columns)
 *                              (+ b): conv's input gradient.
 *
 * On the GPU unfold and fold are window.c's im2col and col2im and the
 * matmuls cuBLAS's; being device-free, the compositions are also run on
 * CPU tensors against the CPU's convolutions (test_cuda_compositions).
 * Implicit GEMM (no columns in memory) is later work.
 */
#include <string.h>

#include "internal.h"

static em_tensor *matmul(em_tensor *a, em_tensor *b) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *pair[2] = {a, b}, *z = NULL;
    return a && b && em_op_run(EM_OP_MATMUL, pair, 2, &at, &z, 1) == EM_OK ? z : NULL;
}

static em_tensor *reshaped(em_tensor *t, int n, const int64_t *shape) {
    return t ? em_reshape(t, shape, n) : NULL;
}

static em_tensor *permuted(em_tensor *t, int n, const int64_t *perm) {
    em_tensor *p = t ? em_permute(t, perm, n) : NULL, *c = p ? em_contiguous(p) : NULL;
    em_tensor_release(p);
    return c;
}

/* a's window attributes with the kernel `kernel` (nsp spatial dims). */
static em_attrs window_attrs(const em_attrs *a, const int64_t *kernel, int nsp) {
    em_attrs u = *a;
    u.n_kernel = nsp;
    memcpy(u.kernel, kernel, (size_t)nsp * sizeof *kernel);
    u.groups = 0;
    u.n_layout = 0;
    return u;
}

static em_tensor *unfolded(em_tensor *x, const em_attrs *a, const int64_t *kernel) {
    em_attrs u = window_attrs(a, kernel, x->ndim - 2);
    em_tensor *cols = NULL;
    return em_op_run(EM_OP_UNFOLD, &x, 1, &u, &cols, 1) == EM_OK ? cols : NULL;
}

/* out = y (+ b along dim 1), y reshaped to out's shape. */
static em_status finish(em_tensor *y, em_tensor *b, em_tensor *out) {
    em_tensor *view = reshaped(y, out->ndim, out->shape), *bias = NULL, *sum = NULL;
    em_status st = view ? EM_OK : em_last_status();
    if (st == EM_OK && b) {
        int64_t shape[EM_MAX_DIMS];
        shape[0] = b->numel;
        for (int i = 1; i + 1 < out->ndim; i++) shape[i] = 1;
        em_tensor *pair[2] = {view, NULL};
        em_attrs at;
        memset(&at, 0, sizeof at);
        if (!(bias = reshaped(b, out->ndim - 1, shape)))
            st = em_last_status();
        else {
            pair[1] = bias;
            st = em_op_run(EM_OP_ADD, pair, 2, &at, &sum, 1);
        }
    }
    if (st == EM_OK) st = em_assign_copy(out, b ? sum : view);
    em_tensor_release(view);
    em_tensor_release(bias);
    em_tensor_release(sum);
    return st;
}

static int64_t groups_of(const em_attrs *a) {
    return a->groups > 0 ? a->groups : 1;
}

static em_status conv(em_tensor *const *in, int n_in, const em_attrs *a, em_tensor *out) {
    em_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    int64_t n = x->shape[0], o = w->shape[0], g = groups_of(a);
    em_tensor *cols = unfolded(x, a, w->shape + 2), *wm = NULL, *c4 = NULL, *y = NULL;
    if (!cols) return em_last_status();
    int64_t ck = cols->shape[1], l = cols->shape[2];
    if (g == 1) {
        int64_t ws[2] = {o, ck};
        wm = reshaped(w, 2, ws);
        y = matmul(wm, cols); /* [N, O, L] */
    } else {
        int64_t ws[3] = {g, o / g, ck / g}, cs[4] = {n, g, ck / g, l};
        wm = reshaped(w, 3, ws);
        c4 = reshaped(cols, 4, cs);
        y = matmul(wm, c4); /* [N, G, O/G, L] */
    }
    em_status st = y ? finish(y, b, out) : em_last_status();
    em_tensor *objs[] = {cols, wm, y, c4};
    for (int i = 0; i < 4; i++) em_tensor_release(objs[i]);
    return st;
}

static em_status conv_weight(em_tensor *const *in, const em_attrs *a, em_tensor *out) {
    em_tensor *x = in[0], *gy = in[1];
    int64_t n = x->shape[0], o = a->shape[0], g = groups_of(a), l = 1;
    for (int i = 2; i < gy->ndim; i++) l *= gy->shape[i];
    em_tensor *cols = unfolded(x, a, a->shape + 2);
    if (!cols) return em_last_status();
    int64_t ck = cols->shape[1];
    if (cols->shape[2] != l) {
        em_tensor_release(cols);
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "conv_weight: no kernel for it on cuda yet where the input's windows "
                        "(%lld) outnumber the "
                        "gradient's positions (%lld)",
                        (long long)cols->shape[2], (long long)l);
    }
    int64_t cs[4] = {n, g, ck / g, l}, gs[4] = {n, g, o / g, l}, cperm[4] = {1, 0, 3, 2},
            gperm[4] = {1, 2, 0, 3};
    int64_t bs[3] = {g, n * l, ck / g}, as[3] = {g, o / g, n * l};
    em_tensor *c4 = reshaped(cols, 4, cs), *cp = permuted(c4, 4, cperm), *bm = reshaped(cp, 3, bs);
    em_tensor *g4 = reshaped(gy, 4, gs), *gp = permuted(g4, 4, gperm), *am = reshaped(gp, 3, as);
    em_tensor *dw = matmul(am, bm); /* [G, O/G, C/G*K] */
    em_status st = dw ? finish(dw, NULL, out) : em_last_status();
    em_tensor *objs[] = {cols, c4, cp, bm, g4, gp, am, dw};
    for (int i = 0; i < 8; i++) em_tensor_release(objs[i]);
    return st;
}

static em_status conv_transpose(em_tensor *const *in, int n_in, const em_attrs *a, em_tensor *out) {
    em_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    int64_t n = x->shape[0], cin = x->shape[1], g = groups_of(a), k = 1, l = 1;
    for (int i = 2; i < w->ndim; i++) k *= w->shape[i];
    for (int i = 2; i < x->ndim; i++) l *= x->shape[i];
    int64_t cog = w->shape[1], ws[3] = {g, cin / g, cog * k}, wperm[3] = {0, 2, 1},
            xs[4] = {n, g, cin / g, l};
    int64_t cols_shape[3] = {n, g * cog * k, l};
    em_tensor *w3 = reshaped(w, 3, ws),
              *wt = w3 ? em_permute(w3, wperm, 3) : NULL;       /* [G, Cout/G*K, Cin/G] */
    em_tensor *x4 = reshaped(x, 4, xs), *prod = matmul(wt, x4); /* [N, G, Cout/G*K, L] */
    em_tensor *cols = reshaped(prod, 3, cols_shape), *y = NULL;
    em_status st = cols ? EM_OK : em_last_status();
    if (st == EM_OK) {
        em_attrs f = window_attrs(a, w->shape + 2, w->ndim - 2);
        f.n_shape = out->ndim;
        memcpy(f.shape, out->shape, (size_t)out->ndim * sizeof *out->shape);
        st = em_op_run(EM_OP_FOLD, &cols, 1, &f, &y, 1);
    }
    if (st == EM_OK) st = finish(y, b, out);
    em_tensor *objs[] = {w3, wt, x4, prod, cols, y};
    for (int i = 0; i < 6; i++) em_tensor_release(objs[i]);
    return st;
}

em_status em_cuda_conv(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                       em_tensor *out) {
    switch (op) {
    case EM_OP_CONV:
        return conv(in, n_in, attrs, out);
    case EM_OP_CONV_WEIGHT:
        return conv_weight(in, attrs, out);
    default:
        return conv_transpose(in, n_in, attrs, out);
    }
}
