/*
 * window.c - im2col and col2im over the sliding-window geometry
 * (../infer/window.c), and the kernels of the two ops that are nothing
 * else: unfold (the columns, as F.unfold) and fold (their sum back into an
 * image, as F.fold).
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

static void valid_range(const em_window_geom *g, int i, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t l = em_ceil_div(-off, g->s[i]), h = em_ceil_div(g->in[i] - off, g->s[i]);
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

/* ---- unfold and fold (their inference: ../infer/window.c) ---- */

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
