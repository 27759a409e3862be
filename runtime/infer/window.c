/*
 * window.c - the sliding-window geometry (window.h), the same on every
 * device, and the inference of unfold and fold, the ops that are nothing
 * but their windows.
 */
#include <string.h>

#include "window.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

em_status em_window_input(em_op op, const em_type *x, const char *what) {
    char buf[256];
    if (x->ndim < 3 || x->ndim > 2 + W3)
        return em_error(EM_ERR_SHAPE, "%s: expected the %s as (N, C, 1 to %d spatial dims), got %s", em_op_name(op),
                        what, W3, TYPE_STR(x, buf));
    if (x->dtype != EM_DTYPE_F32 && x->dtype != EM_DTYPE_F64)
        return em_error(EM_ERR_DTYPE, "%s: expected a float32 or float64 %s, got %s", em_op_name(op), what,
                        TYPE_STR(x, buf));
    return EM_OK;
}

/* Does list `what` of a have `want` entries, each at least `min`? */
static em_status check_list(em_op op, const char *what, const int64_t *v, int n, int want, int64_t min) {
    if (n != want)
        return em_error(EM_ERR_VALUE, "%s: expected %d %s values (one per spatial dim%s), got %d", em_op_name(op),
                        want, what, want > W3 ? ", before and after" : "", n);
    for (int i = 0; i < n; i++)
        if (v[i] < min)
            return em_error(EM_ERR_VALUE, "%s: %s must be %s, got %lld", em_op_name(op), what,
                            min > 0 ? "positive" : "non-negative", (long long)v[i]);
    return EM_OK;
}

em_status em_window_geometry(em_op op, const em_type *x, const int64_t *kernel, const em_attrs *a,
                             em_window_rule rule, const int64_t *small, em_window_geom *g) {
    int n = x->ndim - 2;
    uint64_t has = em_op_get(op)->attrs;
    em_status st = EM_OK;
    if (!kernel && (st = check_list(op, "kernel_size", a->kernel, a->n_kernel, n, 1)) != EM_OK) return st;
    if ((st = check_list(op, "stride", a->stride, a->n_stride, n, 1)) != EM_OK) return st;
    if ((st = check_list(op, "padding", a->padding, a->n_padding, 2 * n, 0)) != EM_OK) return st;
    if ((has & EM_A_DILATION) && (st = check_list(op, "dilation", a->dilation, a->n_dilation, n, 1)) != EM_OK)
        return st;
    memset(g, 0, sizeof *g);
    g->n = n;
    g->in_numel = g->out_numel = g->k_numel = 1;
    for (int i = 0; i < W3; i++) {
        int j = i - (W3 - n); /* the op's spatial dim, or < 0 for a leading dim of size 1 */
        g->in[i] = j < 0 ? 1 : x->shape[2 + j];
        g->k[i] = j < 0 ? 1 : kernel ? kernel[j] : a->kernel[j];
        g->s[i] = j < 0 ? 1 : a->stride[j];
        g->p[i] = j < 0 ? 0 : a->padding[j];
        g->d[i] = j < 0 || !(has & EM_A_DILATION) ? 1 : a->dilation[j];
        int64_t pads = j < 0 ? 0 : a->padding[j] + a->padding[n + j];
        int64_t span = g->d[i] * (g->k[i] - 1) + 1; /* what one window covers */
        if (g->k[i] > (int64_t)1 << 30 || g->s[i] > (int64_t)1 << 30 || g->d[i] > (int64_t)1 << 30 ||
            g->p[i] > (int64_t)1 << 30 || pads > (int64_t)1 << 31)
            return em_error(EM_ERR_VALUE, "%s: kernel, stride, dilation or padding too large", em_op_name(op));
        if (rule == EM_WIN_TRANSPOSED) {
            g->out[i] = j < 0 ? 1 : small[j];
            int64_t need = (g->out[i] - 1) * g->s[i] - pads + span;
            int64_t slack = g->in[i] - need, most = g->s[i] > g->d[i] ? g->s[i] : g->d[i];
            if (j >= 0 && (g->out[i] < 1 || slack < 0 || slack >= most))
                return em_error(EM_ERR_SHAPE,
                                "%s: a spatial size of %lld does not fit %lld window positions (kernel %lld, stride "
                                "%lld, padding %lld + %lld, dilation %lld): it must be %lld plus less than %lld",
                                em_op_name(op), (long long)g->in[i], (long long)g->out[i], (long long)g->k[i],
                                (long long)g->s[i], (long long)a->padding[j], (long long)a->padding[n + j],
                                (long long)g->d[i], (long long)need, (long long)most);
        } else if (j >= 0) {
            int64_t room = g->in[i] + pads - span;
            int64_t o = room < 0 ? 0 : (rule == EM_WIN_CEIL ? em_ceil_div(room, g->s[i]) : em_floor_div(room, g->s[i])) + 1;
            /* the last window must start inside the input or its padding before */
            if (rule == EM_WIN_CEIL && o > 0 && (o - 1) * g->s[i] >= g->in[i] + g->p[i]) o--;
            if (o < 1) {
                char buf[256];
                return em_error(EM_ERR_SHAPE,
                                "%s: input %s is too small for kernel %lld (dilation %lld, padding %lld + %lld) along "
                                "spatial dim %d: the output size would be %lld, less than 1",
                                em_op_name(op), TYPE_STR(x, buf), (long long)g->k[i], (long long)g->d[i],
                                (long long)a->padding[j], (long long)a->padding[n + j], j,
                                (long long)(em_floor_div(room, g->s[i]) + 1));
            }
            g->out[i] = o;
        } else {
            g->out[i] = 1;
        }
        if (__builtin_mul_overflow(g->in_numel, g->in[i], &g->in_numel) ||
            __builtin_mul_overflow(g->out_numel, g->out[i], &g->out_numel) ||
            __builtin_mul_overflow(g->k_numel, g->k[i], &g->k_numel) || g->out_numel > ((int64_t)1 << 48) ||
            g->k_numel > ((int64_t)1 << 48))
            return em_error(EM_ERR_VALUE, "%s: the windows are too large (kernel or output of more than 2^48 places)",
                            em_op_name(op));
    }
    return EM_OK;
}

bool em_window_is_identity(const em_window_geom *g) {
    for (int i = 0; i < W3; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->p[i] != 0) return false;
    return true;
}

/* The taps of window dim i: position o reads o * s + off (off = tap * d -
 * p), inside the input for o in [lo, hi). */
/* ---- unfold: (N, C, spatial) -> (N, C * K, L); fold: back, summing ---- */

em_status infer_unfold(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    em_window_geom g;
    em_status st = em_window_input(op, &in[0], "input");
    if (st == EM_OK) st = em_window_geometry(op, &in[0], NULL, a, EM_WIN_FLOOR, NULL, &g);
    if (st != EM_OK) return st;
    out[0] = in[0];
    out[0].ndim = 3;
    out[0].shape[1] = in[0].shape[1] * g.k_numel;
    out[0].shape[2] = g.out_numel;
    return EM_OK;
}

em_status infer_fold(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    char buf[256];
    const em_type *x = &in[0];
    if (a->n_shape < 3 || a->n_shape > 2 + W3 || x->ndim != 3 || a->shape[0] != x->shape[0])
        return em_error(EM_ERR_SHAPE, "fold: expected the input as (N, C * kernel size, L) and an output of (N, C, 1 "
                                      "to %d spatial dims) for the same N, got %s", W3, TYPE_STR(x, buf));
    em_type y = *x;
    y.ndim = a->n_shape;
    memcpy(y.shape, a->shape, sizeof y.shape);
    em_window_geom g;
    em_status st = em_window_input(op, &y, "output");
    if (st == EM_OK) st = em_window_geometry(op, &y, NULL, a, EM_WIN_FLOOR, NULL, &g);
    if (st != EM_OK) return st;
    if (x->shape[1] != y.shape[1] * g.k_numel || x->shape[2] != g.out_numel)
        return em_error(EM_ERR_SHAPE,
                        "fold: expected an input of (%lld, %lld, %lld) for %lld channels, a kernel of %lld taps "
                        "and %lld blocks, got %s",
                        (long long)x->shape[0], (long long)(y.shape[1] * g.k_numel), (long long)g.out_numel,
                        (long long)y.shape[1], (long long)g.k_numel, (long long)g.out_numel, TYPE_STR(x, buf));
    out[0] = y;
    return EM_OK;
}
