/*
 * window.c - the sliding-window geometry (window.h), im2col and col2im,
 * and the two ops that are nothing else: unfold (the columns, as
 * F.unfold) and fold (their sum back into an image, as F.fold).
 *
 * im2col walks each (channel, tap) row of the columns over the small
 * side's positions in runs along the innermost spatial dim; within a run
 * the taps that land in the padding are a zero prefix and suffix, and the
 * rest is one strided copy. Runs are short (a row of the output), so the
 * copies are plain loops the compiler vectorises, not calls. col2im walks
 * the same runs and adds.
 */
#include <stdint.h>
#include <string.h>

#include "ember/alloc.h"
#include "ember/parallel.h"
#include "window.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

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
            int64_t o = room < 0 ? 0 : (rule == EM_WIN_CEIL ? ceil_div(room, g->s[i]) : floor_div(room, g->s[i])) + 1;
            /* the last window must start inside the input or its padding before */
            if (rule == EM_WIN_CEIL && o > 0 && (o - 1) * g->s[i] >= g->in[i] + g->p[i]) o--;
            if (o < 1) {
                char buf[256];
                return em_error(EM_ERR_SHAPE,
                                "%s: input %s is too small for kernel %lld (dilation %lld, padding %lld + %lld) along "
                                "spatial dim %d: the output size would be %lld, less than 1",
                                em_op_name(op), TYPE_STR(x, buf), (long long)g->k[i], (long long)g->d[i],
                                (long long)a->padding[j], (long long)a->padding[n + j], j,
                                (long long)(floor_div(room, g->s[i]) + 1));
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
static void valid_range(const em_window_geom *g, int i, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t l = ceil_div(-off, g->s[i]), h = ceil_div(g->in[i] - off, g->s[i]);
    *lo = l < 0 ? 0 : l > g->out[i] ? g->out[i] : l;
    *hi = h < *lo ? *lo : h > g->out[i] ? g->out[i] : h;
}

/* The walk, in both directions: im2col (ADD 0) copies x into column rows
 * and zeroes what lies in the padding; col2im (ADD 1) adds column rows
 * into x. Both over channels [0, nc) and small-side positions [l0, l1),
 * column rows ld apart. */
#define DEFINE_WALK(T, sfx, name, ADD)                                                                         \
    static void name##_##sfx(T *x, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1, T *col,       \
                             int64_t ld) {                                                                     \
        int64_t K = g->k_numel, o2n = g->out[2], s2 = g->s[2];                                                 \
        for (int64_t c = 0; c < nc; c++)                                                                       \
            for (int64_t tap = 0; tap < K; tap++) {                                                            \
                int64_t k0 = tap / (g->k[1] * g->k[2]), k1 = tap / g->k[2] % g->k[1], k2 = tap % g->k[2];       \
                int64_t off2 = k2 * g->d[2] - g->p[2], lo, hi;                                                 \
                valid_range(g, 2, off2, &lo, &hi);                                                             \
                T *row = col + (c * K + tap) * ld, *xc = x + c * g->in_numel;                                  \
                int64_t o2 = l0 % o2n, o1 = l0 / o2n % g->out[1], o0 = l0 / (o2n * g->out[1]);                 \
                for (int64_t l = l0; l < l1;) { /* a run along the innermost dim */                            \
                    int64_t run = o2n - o2 < l1 - l ? o2n - o2 : l1 - l;                                        \
                    int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];                                        \
                    int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];                                        \
                    T *r = row + (l - l0) - o2; /* r[o] for o in [o2, o2 + run) */                             \
                    int64_t a = o2, b = o2;                                                                    \
                    if (i0 >= 0 && i0 < g->in[0] && i1 >= 0 && i1 < g->in[1]) {                                \
                        a = lo > o2 ? lo : o2;                                                                 \
                        b = hi < o2 + run ? hi : o2 + run;                                                     \
                        if (b < a) b = a;                                                                      \
                        T *xr = xc + (i0 * g->in[1] + i1) * g->in[2] + off2;                                   \
                        if (ADD && s2 == 1)                                                                    \
                            for (int64_t o = a; o < b; o++) xr[o] += r[o];                                     \
                        else if (ADD)                                                                          \
                            for (int64_t o = a; o < b; o++) xr[o * s2] += r[o];                                \
                        else if (s2 == 1)                                                                      \
                            for (int64_t o = a; o < b; o++) r[o] = xr[o];                                      \
                        else                                                                                   \
                            for (int64_t o = a; o < b; o++) r[o] = xr[o * s2];                                 \
                    }                                                                                          \
                    if (!ADD) {                                                                                \
                        for (int64_t o = o2; o < a; o++) r[o] = 0;                                             \
                        for (int64_t o = b; o < o2 + run; o++) r[o] = 0;                                       \
                    }                                                                                          \
                    l += run;                                                                                  \
                    o2 = 0;                                                                                    \
                    if (++o1 == g->out[1]) {                                                                   \
                        o1 = 0;                                                                                \
                        o0++;                                                                                  \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
    }
DEFINE_WALK(float, f32, im2col, 0)
DEFINE_WALK(double, f64, im2col, 0)
DEFINE_WALK(float, f32, col2im, 1)
DEFINE_WALK(double, f64, col2im, 1)

/* Rows shorter than this go through gather tables instead of runs: a 4x4
 * image's runs are 4 long, and a run's bounds cost more than its copy. */
#define GATHER_BELOW 8
/* Positions whose gather tables are built at a time (on the stack). */
#define GATHER_CHUNK 256

/* im2col of small images: for each tap, the input offset each position
 * reads (-1: padding), built once for all channels. */
#define DEFINE_GATHER(T, sfx)                                                                                  \
    static void gather_##sfx(const T *x, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1, T *col,  \
                             int64_t ld) {                                                                     \
        int64_t at[GATHER_CHUNK], K = g->k_numel;                                                              \
        for (int64_t cb = l0; cb < l1; cb += GATHER_CHUNK) {                                                   \
            int64_t ce = cb + GATHER_CHUNK < l1 ? cb + GATHER_CHUNK : l1;                                      \
            for (int64_t tap = 0; tap < K; tap++) {                                                            \
                int64_t k0 = tap / (g->k[1] * g->k[2]), k1 = tap / g->k[2] % g->k[1], k2 = tap % g->k[2];       \
                for (int64_t l = cb; l < ce; l++) {                                                            \
                    int64_t o2 = l % g->out[2], o1 = l / g->out[2] % g->out[1], o0 = l / (g->out[2] * g->out[1]); \
                    int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];                                        \
                    int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];                                        \
                    int64_t i2 = o2 * g->s[2] - g->p[2] + k2 * g->d[2];                                        \
                    bool in = i0 >= 0 && i0 < g->in[0] && i1 >= 0 && i1 < g->in[1] && i2 >= 0 && i2 < g->in[2]; \
                    at[l - cb] = in ? (i0 * g->in[1] + i1) * g->in[2] + i2 : -1;                               \
                }                                                                                              \
                for (int64_t c = 0; c < nc; c++) {                                                             \
                    const T *xc = x + c * g->in_numel;                                                         \
                    T *r = col + (c * K + tap) * ld + (cb - l0);                                               \
                    for (int64_t l = 0; l < ce - cb; l++) r[l] = at[l] >= 0 ? xc[at[l]] : (T)0;                \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
DEFINE_GATHER(float, f32)
DEFINE_GATHER(double, f64)

/* The same through a zero-padded copy of each channel: the copy's interior
 * rows are memcpys and every tap reads it at position + tap offset, with no
 * test for padding (the test per element was most of gather's time).
 * Returns false where the padded plane would be big (then gather). */
#define PADDED_PLANE_MAX 65536
#define DEFINE_GATHER_PADDED(T, sfx)                                                                           \
    static bool gather_padded_##sfx(const T *x, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1,   \
                                    T *col, int64_t ld) {                                                      \
        int64_t P[W3], K = g->k_numel, L = l1 - l0, plane = 1;                                                 \
        for (int i = 0; i < W3; i++) {                                                                         \
            int64_t reach = (g->out[i] - 1) * g->s[i] + (g->k[i] - 1) * g->d[i] + 1;                          \
            P[i] = reach > g->p[i] + g->in[i] ? reach : g->p[i] + g->in[i];                                    \
            plane *= P[i];                                                                                     \
        }                                                                                                      \
        if (plane > PADDED_PLANE_MAX || g->p[0] < 0 || g->p[1] < 0 || g->p[2] < 0) return false;              \
        T *pad = em_malloc((size_t)plane * sizeof *pad);                                                       \
        int64_t *base = em_malloc((size_t)(L ? L : 1) * sizeof *base), *toff = em_malloc((size_t)K * sizeof *toff); \
        if (!pad || !base || !toff) {                                                                          \
            em_free(pad);                                                                                      \
            em_free(base);                                                                                     \
            em_free(toff);                                                                                     \
            return false;                                                                                      \
        }                                                                                                      \
        memset(pad, 0, (size_t)plane * sizeof *pad);                                                           \
        for (int64_t l = l0; l < l1; l++) {                                                                    \
            int64_t o2 = l % g->out[2], o1 = l / g->out[2] % g->out[1], o0 = l / (g->out[2] * g->out[1]);     \
            base[l - l0] = (o0 * g->s[0] * P[1] + o1 * g->s[1]) * P[2] + o2 * g->s[2];                         \
        }                                                                                                      \
        for (int64_t tap = 0; tap < K; tap++) {                                                                \
            int64_t k0 = tap / (g->k[1] * g->k[2]), k1 = tap / g->k[2] % g->k[1], k2 = tap % g->k[2];           \
            toff[tap] = (k0 * g->d[0] * P[1] + k1 * g->d[1]) * P[2] + k2 * g->d[2];                            \
        }                                                                                                      \
        for (int64_t c = 0; c < nc; c++) {                                                                     \
            const T *xc = x + c * g->in_numel;                                                                 \
            for (int64_t i0 = 0; i0 < g->in[0]; i0++)                                                         \
                for (int64_t i1 = 0; i1 < g->in[1]; i1++)                                                      \
                    memcpy(pad + ((i0 + g->p[0]) * P[1] + i1 + g->p[1]) * P[2] + g->p[2],                      \
                           xc + (i0 * g->in[1] + i1) * g->in[2], (size_t)g->in[2] * sizeof *pad);              \
            for (int64_t tap = 0; tap < K; tap++) {                                                            \
                const T *src = pad + toff[tap];                                                                \
                T *r = col + (c * K + tap) * ld;                                                               \
                for (int64_t l = 0; l < L; l++) r[l] = src[base[l]];                                           \
            }                                                                                                  \
        }                                                                                                      \
        em_free(pad);                                                                                          \
        em_free(base);                                                                                         \
        em_free(toff);                                                                                         \
        return true;                                                                                           \
    }
DEFINE_GATHER_PADDED(float, f32)
DEFINE_GATHER_PADDED(double, f64)

void em_im2col(em_dtype dt, const void *x, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1,
               void *col, int64_t ld) {
    if (g->out[2] < GATHER_BELOW) {
        if (dt == EM_DTYPE_F32 ? gather_padded_f32(x, nc, g, l0, l1, col, ld)
                               : gather_padded_f64(x, nc, g, l0, l1, col, ld))
            return;
        if (dt == EM_DTYPE_F32)
            gather_f32(x, nc, g, l0, l1, col, ld);
        else
            gather_f64(x, nc, g, l0, l1, col, ld);
        return;
    }
    /* (the walk reads x here: the cast drops const for the shared code) */
    if (dt == EM_DTYPE_F32)
        im2col_f32((float *)(uintptr_t)x, nc, g, l0, l1, col, ld);
    else
        im2col_f64((double *)(uintptr_t)x, nc, g, l0, l1, col, ld);
}

void em_col2im(em_dtype dt, const void *col, int64_t nc, const em_window_geom *g, int64_t l0, int64_t l1,
               int64_t ld, void *x) {
    if (dt == EM_DTYPE_F32)
        col2im_f32(x, nc, g, l0, l1, (float *)(uintptr_t)col, ld);
    else
        col2im_f64(x, nc, g, l0, l1, (double *)(uintptr_t)col, ld);
}

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

typedef struct {
    em_dtype dt;
    const char *x;
    char *y;
    int64_t channels; /* per sample */
    em_window_geom g;
} unfold_ctx;

static void unfold_planes(void *arg, int64_t b, int64_t e) {
    const unfold_ctx *c = arg;
    size_t item = em_dtype_size(c->dt);
    for (int64_t i = b; i < e; i++) /* one (sample, channel) plane each */
        em_im2col(c->dt, c->x + i * c->g.in_numel * item, 1, &c->g, 0, c->g.out_numel,
                  c->y + i * c->g.k_numel * c->g.out_numel * item, c->g.out_numel);
}

static void fold_planes(void *arg, int64_t b, int64_t e) {
    const unfold_ctx *c = arg;
    size_t item = em_dtype_size(c->dt);
    for (int64_t i = b; i < e; i++)
        em_col2im(c->dt, c->x + i * c->g.k_numel * c->g.out_numel * item, 1, &c->g, 0, c->g.out_numel,
                  c->g.out_numel, c->y + i * c->g.in_numel * item);
}

static em_status run_planes(em_op op, em_tensor *x, const em_type *big, const em_attrs *a, em_tensor *y,
                            em_parallel_fn fn) {
    unfold_ctx c = {x->dtype, NULL, em_tensor_data(y), big->shape[1], {0}};
    em_status st = em_window_geometry(op, big, NULL, a, EM_WIN_FLOOR, NULL, &c.g);
    if (st != EM_OK) return st;
    em_tensor *xd = em_dense(x);
    if (!xd) return em_last_status();
    c.x = em_tensor_data(xd);
    if (fn == fold_planes) memset(c.y, 0, (size_t)y->numel * em_dtype_size(y->dtype));
    int64_t planes = big->shape[0] * big->shape[1];
    em_parallel_for(planes, EM_GRAIN_ELEMENTWISE / (c.g.k_numel * c.g.out_numel + 1) + 1, fn, &c);
    em_tensor_release(xd);
    return EM_OK;
}

em_status cpu_unfold(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    em_type big = em_tensor_type(in[0]);
    return run_planes(op, in[0], &big, a, out[0], unfold_planes);
}

em_status cpu_fold(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    em_type big = em_tensor_type(out[0]);
    return run_planes(op, in[0], &big, a, out[0], fold_planes);
}
