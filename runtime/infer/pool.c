/*
 * pool.c - the pools' geometry and inference (max, average, adaptive, and
 * their gradients: ../cpu/pool.c runs them), the same on every device,
 * with PyTorch's rules: padding at most half the kernel, ceil_mode's last
 * window starting inside the input, a gradient's windows found from its
 * spatial sizes.
 */
#include <string.h>

#include "pool.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

/* ---- geometry ---- */

static void copy_hi(const em_window_geom *g, const em_attrs *a, int64_t *p_hi) {
    for (int i = 0; i < W3; i++) {
        int j = i - (W3 - g->n);
        p_hi[i] = j < 0 ? 0 : a->padding[g->n + j];
    }
}

/* PyTorch's rule for strided pools: padding at most half the kernel. */
static em_status check_half(em_op op, const em_window_geom *g, const int64_t *p_hi) {
    for (int i = 0; i < W3; i++)
        if (2 * g->p[i] > g->k[i] || 2 * p_hi[i] > g->k[i])
            return em_error(EM_ERR_VALUE,
                            "%s: pad should be at most half of kernel size, but got pad=%lld and kernel_size=%lld",
                            em_op_name(op), (long long)(g->p[i] > p_hi[i] ? g->p[i] : p_hi[i]), (long long)g->k[i]);
    return EM_OK;
}

em_status em_pool_adaptive_geometry(em_op op, const em_type *x, const int64_t *small, em_window_geom *g) {
    char buf[256];
    memset(g, 0, sizeof *g);
    g->n = x->ndim - 2;
    g->in_numel = g->out_numel = g->k_numel = 1;
    for (int i = 0; i < W3; i++) {
        int j = i - (W3 - g->n);
        g->in[i] = j < 0 ? 1 : x->shape[2 + j];
        g->out[i] = j < 0 ? 1 : small[j];
        g->k[i] = g->s[i] = g->d[i] = 1;
        if (g->in[i] < 1 || g->out[i] < 1 || g->out[i] > ((int64_t)1 << 40))
            return em_error(EM_ERR_SHAPE, "%s: expected an input of non-zero spatial size and an output size of at "
                                          "least 1, got input %s and output size %lld",
                            em_op_name(op), TYPE_STR(x, buf), (long long)g->out[i]);
        g->in_numel *= g->in[i];
        g->out_numel *= g->out[i];
    }
    return EM_OK;
}

em_status em_pool_strided_geometry(em_op op, const em_type *big, const em_attrs *a, const int64_t *small,
                                   em_window_rule rule, em_window_geom *g, int64_t *p_hi) {
    em_status st = em_window_geometry(op, big, NULL, a, small ? EM_WIN_FLOOR : rule, NULL, g);
    bool fits = st == EM_OK;
    for (int i = 0; fits && small && i < g->n; i++) fits = g->out[W3 - g->n + i] == small[i];
    if (st == EM_OK && small && !fits) {
        st = em_window_geometry(op, big, NULL, a, EM_WIN_CEIL, NULL, g);
        fits = st == EM_OK;
        for (int i = 0; fits && i < g->n; i++) fits = g->out[W3 - g->n + i] == small[i];
        if (st == EM_OK && !fits) {
            char buf[256];
            return em_error(EM_ERR_SHAPE, "%s: the gradient's spatial sizes do not fit the windows over %s",
                            em_op_name(op), TYPE_STR(big, buf));
        }
    }
    if (st != EM_OK) return st;
    copy_hi(g, a, p_hi);
    return check_half(op, g, p_hi);
}

/* The result type of an op taking x to its small side. */
static void small_type(const em_type *x, const em_window_geom *g, em_type *out) {
    *out = *x;
    for (int i = 0; i < g->n; i++) out->shape[2 + i] = g->out[W3 - g->n + i];
}

/* x's type with a's shape attribute: a gradient's result, the big side. */
static em_status big_type(em_op op, const em_type *x, const em_attrs *a, em_type *out) {
    char buf[256];
    if (a->n_shape != x->ndim || a->shape[0] != x->shape[0] || a->shape[1] != x->shape[1])
        return em_error(EM_ERR_SHAPE, "%s: the result's shape must have %s's rank, samples and channels",
                        em_op_name(op), TYPE_STR(x, buf));
    *out = *x;
    memcpy(out->shape, a->shape, sizeof out->shape);
    return EM_OK;
}

/* ---- inference ---- */

em_status infer_avg_pool(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    em_window_geom g;
    int64_t p_hi[W3];
    em_status st = em_window_input(op, &in[0], "input");
    if (st == EM_OK)
        st = em_pool_strided_geometry(op, &in[0], a, NULL, a->ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR, &g, p_hi);
    if (st != EM_OK) return st;
    small_type(&in[0], &g, &out[0]);
    return EM_OK;
}

/* avg_pool's result, and int64 indices of its shape. */
em_status infer_max_pool(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = infer_avg_pool(op, in, n_in, a, out, n_out);
    if (st != EM_OK) return st;
    out[1] = out[0];
    out[1].dtype = EM_DTYPE_I64;
    return EM_OK;
}

em_status infer_avg_pool_grad(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    em_window_geom g;
    int64_t p_hi[W3];
    em_type big;
    em_status st = em_window_input(op, &in[0], "gradient");
    if (st == EM_OK) st = big_type(op, &in[0], a, &big);
    if (st == EM_OK) st = em_pool_strided_geometry(op, &big, a, in[0].shape + 2, EM_WIN_FLOOR, &g, p_hi);
    if (st != EM_OK) return st;
    out[0] = big;
    return EM_OK;
}

em_status infer_adaptive_avg_pool(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    em_window_geom g;
    em_type y;
    em_status st = em_window_input(op, &in[0], "input");
    if (st == EM_OK) st = big_type(op, &in[0], a, &y); /* (the shape attribute is the result's) */
    if (st == EM_OK) st = em_pool_adaptive_geometry(op, &in[0], a->shape + 2, &g);
    if (st != EM_OK) return st;
    out[0] = y;
    if (n_out == 2) {
        out[1] = y;
        out[1].dtype = EM_DTYPE_I64;
    }
    return EM_OK;
}

em_status infer_adaptive_max_pool(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    return infer_adaptive_avg_pool(op, in, n_in, a, out, n_out);
}

em_status infer_adaptive_avg_pool_grad(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                                       int n_out) {
    (void)n_in;
    (void)n_out;
    em_window_geom g;
    em_type big;
    em_status st = em_window_input(op, &in[0], "gradient");
    if (st == EM_OK) st = big_type(op, &in[0], a, &big);
    if (st == EM_OK) st = em_pool_adaptive_geometry(op, &big, in[0].shape + 2, &g);
    if (st != EM_OK) return st;
    out[0] = big;
    return EM_OK;
}

em_status infer_max_pool_grad(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    char gs[256], is[256];
    em_type big;
    em_status st = em_window_input(op, &in[0], "gradient");
    if (st == EM_OK) st = big_type(op, &in[0], a, &big);
    if (st != EM_OK) return st;
    if (in[1].dtype != EM_DTYPE_I64 || !em_shape_eq(in[0].shape, in[0].ndim, in[1].shape, in[1].ndim))
        return em_error(EM_ERR_SHAPE, "max_pool_grad: expected int64 indices of the gradient's shape, got %s for %s",
                        TYPE_STR(&in[1], is), TYPE_STR(&in[0], gs));
    out[0] = big;
    return EM_OK;
}
