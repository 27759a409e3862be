/*
 * conv.c - the inference of convolution and its two adjoints (conv,
 * conv_transpose, conv_weight: ../cpu/conv.c runs them), the same on every
 * device: PyTorch's weight layouts and messages, groups, a bias per output
 * channel, and conv's one result layout besides row-major, channels-last.
 */
#include <string.h>

#include "window.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

static em_status check_groups(em_op op, int64_t groups) {
    if (groups < 1 || groups > ((int64_t)1 << 30))
        return em_error(EM_ERR_VALUE, "%s: groups must be a positive integer, got %lld", em_op_name(op),
                        (long long)groups);
    return EM_OK;
}

static em_status check_operand(em_op op, const em_type *x, const em_type *t, int ndim, const char *what) {
    char a[256], b[256];
    if (t->ndim != ndim || t->dtype != x->dtype)
        return em_error(EM_ERR_SHAPE, "%s: expected a %d-d %s of dtype %s, the input's, for input %s, got %s",
                        em_op_name(op), ndim, what, em_dtype_name(x->dtype), TYPE_STR(x, a), TYPE_STR(t, b));
    return EM_OK;
}

static em_status check_bias(em_op op, const em_type *x, const em_type *b, int64_t channels) {
    char a[256];
    em_status st = check_operand(op, x, b, 1, "bias");
    if (st == EM_OK && b->shape[0] != channels)
        return em_error(EM_ERR_SHAPE, "%s: expected a bias of %lld elements, one per output channel, got %s",
                        em_op_name(op), (long long)channels, TYPE_STR(b, a));
    return st;
}

/* conv's result layout, where given: channels-last, (0, 2, ..., 1). */
static em_status check_channels_last(em_op op, const em_attrs *a, const em_type *x) {
    bool ok = a->n_layout == x->ndim && a->layout[0] == 0 && a->layout[x->ndim - 1] == 1;
    for (int d = 1; ok && d < x->ndim - 1; d++) ok = a->layout[d] == d + 1;
    if (ok) return EM_OK;
    char xs[256];
    return em_error(EM_ERR_VALUE, "%s: the only result layout it takes is channels-last, (0, 2, ..., %d, 1) for input %s",
                    em_op_name(op), x->ndim - 1, TYPE_STR(x, xs));
}

em_status infer_conv(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_out;
    char xs[256], ws[256];
    const em_type *x = &in[0], *w = &in[1];
    em_status st = n_in == 2 || n_in == 3 ? EM_OK : em_error(EM_ERR_VALUE, "conv: expected (input, weight[, bias])");
    if (st == EM_OK) st = em_window_input(op, x, "input");
    if (st == EM_OK) st = check_operand(op, x, w, x->ndim, "weight");
    if (st == EM_OK) st = check_groups(op, a->groups);
    if (st != EM_OK) return st;
    int64_t g = a->groups, c = x->shape[1], o = w->shape[0];
    if (o % g || w->shape[1] * g != c || o == 0 || c == 0)
        return em_error(EM_ERR_SHAPE,
                        "conv: given groups=%lld, weight of size %s, expected input %s to have %lld channels, but got "
                        "%lld channels instead (and %lld output channels divisible by groups)",
                        (long long)g, TYPE_STR(w, ws), TYPE_STR(x, xs), (long long)(w->shape[1] * g), (long long)c,
                        (long long)o);
    if (n_in == 3 && (st = check_bias(op, x, &in[2], o)) != EM_OK) return st;
    if (a->n_layout && (st = check_channels_last(op, a, x)) != EM_OK) return st;
    em_window_geom geo;
    if ((st = em_window_geometry(op, x, w->shape + 2, a, EM_WIN_FLOOR, NULL, &geo)) != EM_OK) return st;
    out[0] = *x;
    out[0].shape[1] = o;
    for (int i = 0; i < geo.n; i++) out[0].shape[2 + i] = geo.out[W3 - geo.n + i];
    return EM_OK;
}

/* conv_transpose's result (the shape attribute) is the big side: a
 * convolution of it by w gives x's size. */
em_status infer_conv_transpose(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_out;
    char xs[256], ws[256];
    const em_type *x = &in[0], *w = &in[1];
    em_status st = n_in == 2 || n_in == 3 ? EM_OK : em_error(EM_ERR_VALUE, "conv_transpose: expected (input, weight[, bias])");
    if (st == EM_OK) st = em_window_input(op, x, "input");
    if (st == EM_OK) st = check_operand(op, x, w, x->ndim, "weight");
    if (st == EM_OK) st = check_groups(op, a->groups);
    if (st != EM_OK) return st;
    int64_t g = a->groups, c = x->shape[1], co = w->shape[1] * g;
    if (w->shape[0] != c || c % g || co == 0 || c == 0)
        return em_error(EM_ERR_SHAPE,
                        "conv_transpose: given groups=%lld, weight of size %s, expected input %s to have %lld "
                        "channels, divisible by groups, but got %lld channels instead",
                        (long long)g, TYPE_STR(w, ws), TYPE_STR(x, xs), (long long)w->shape[0], (long long)c);
    if (n_in == 3 && (st = check_bias(op, x, &in[2], co)) != EM_OK) return st;
    em_type y = *x;
    if (a->n_shape != x->ndim || a->shape[0] != x->shape[0] || a->shape[1] != co)
        return em_error(EM_ERR_SHAPE, "conv_transpose: the output must be (%lld, %lld, %d spatial dims) for input %s",
                        (long long)x->shape[0], (long long)co, x->ndim - 2, TYPE_STR(x, xs));
    memcpy(y.shape, a->shape, sizeof y.shape);
    em_window_geom geo;
    if ((st = em_window_geometry(op, &y, w->shape + 2, a, EM_WIN_TRANSPOSED, x->shape + 2, &geo)) != EM_OK)
        return st;
    out[0] = y;
    return EM_OK;
}

/* conv_weight(x, gy): the gradient of conv(x, w) in w, of w's shape (the
 * shape attribute). */
em_status infer_conv_weight(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    char xs[256], gs[256];
    const em_type *x = &in[0], *gy = &in[1];
    em_status st = em_window_input(op, x, "input");
    if (st == EM_OK) st = check_operand(op, x, gy, x->ndim, "gradient");
    if (st == EM_OK) st = check_groups(op, a->groups);
    if (st != EM_OK) return st;
    int64_t g = a->groups;
    if (a->n_shape != x->ndim || gy->shape[0] != x->shape[0] || a->shape[0] != gy->shape[1] || a->shape[0] % g ||
        a->shape[1] * g != x->shape[1] || a->shape[0] == 0 || x->shape[1] == 0)
        return em_error(EM_ERR_SHAPE,
                        "conv_weight: a weight of (%lld, %lld, ...) for groups=%lld does not fit input %s and "
                        "gradient %s",
                        a->n_shape > 0 ? (long long)a->shape[0] : -1LL, a->n_shape > 1 ? (long long)a->shape[1] : -1LL,
                        (long long)g, TYPE_STR(x, xs), TYPE_STR(gy, gs));
    em_window_geom geo;
    if ((st = em_window_geometry(op, x, a->shape + 2, a, EM_WIN_TRANSPOSED, gy->shape + 2, &geo)) != EM_OK) return st;
    out[0] = *x;
    memcpy(out[0].shape, a->shape, sizeof out[0].shape);
    return EM_OK;
}
