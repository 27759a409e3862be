/*
 * pool.c - pooling over 1 to 3 spatial dims, each one op, with the ops
 * their gradients are:
 *
 *   max_pool(x) -> (y, indices)    the max of each window and where it is
 *   adaptive_max_pool(x) -> (y, indices)
 *   max_pool_grad(gy, indices)     gy added at the indices (both max pools)
 *   avg_pool(x), avg_pool_grad(gy) the mean of each window, and its adjoint
 *   adaptive_avg_pool(x), adaptive_avg_pool_grad(gy)
 *
 * as PyTorch computes them: an index is the position in the input's
 * spatial plane (h * W + w for 2-d); a NaN wins a max window; the average
 * of a window cut by ceil_mode or left without its padding
 * (count_include_pad=False) divides by what it covers; adaptive windows of
 * n cells over a size of s are [floor(i s / n), ceil((i + 1) s / n)). The
 * gradient ops take their result's size as the shape attribute, so each
 * pair is closed under differentiation. Each (sample, channel) plane is
 * independent: the pool splits planes. Their geometry and inference are
 * ../infer/pool.c.
 */
#include <math.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "ember/alloc.h"
#include "ember/parallel.h"
#include "../infer/pool.h"
#include "window.h"

/* A window's mean sums runs of SUM_RUN elements, and the runs' sums in a
 * cascade: level l holds the sum of up to SUM_RUN sums of level l - 1, as
 * a SUM_RUN-ary tree, so no float is added to a sum of more than
 * ~SUM_RUN terms of its size. One serial sum of a global pool's 65536
 * floats had 35x PyTorch's float32 error. */
#define SUM_RUN 32
#define SUM_LEVELS 8 /* 32^8 runs: any window */
#define CASCADE_ADD(level, filled, v)                                                                          \
    do {                                                                                                       \
        (level)[0] += (v);                                                                                     \
        for (int l_ = 0; l_ + 1 < SUM_LEVELS && ++(filled)[l_] == SUM_RUN; l_++) {                             \
            (level)[l_ + 1] += (level)[l_];                                                                    \
            (level)[l_] = 0;                                                                                   \
            (filled)[l_] = 0;                                                                                  \
        }                                                                                                      \
    } while (0)

typedef enum { WIN_STRIDED, WIN_ADAPTIVE } win_kind;

typedef struct {
    em_op op;
    em_dtype dt;
    win_kind kind;
    em_window_geom g;
    int64_t p_hi[W3];   /* padding after, for the average's divisor */
    bool include_pad;
    int64_t divisor;
    int64_t *win[W3];    /* per dim: lo, hi, step, span of each window (window_tables) */
    int64_t full[W3];    /* the windows' size where every one is whole and dense (max_regular), else 0 */
    const char *x, *idx; /* the input, or the gradient and the indices */
    char *y, *iy;        /* the result, and max's indices */
    int failed;          /* max_pool_grad: an index outside the plane */
} pool_ctx;

/* c's windows for a strided pool (see em_pool_strided_geometry). */
static em_status strided_geometry(pool_ctx *c, const em_type *big, const em_attrs *a, const int64_t *small,
                                  em_window_rule rule) {
    return em_pool_strided_geometry(c->op, big, a, small, rule, &c->g, c->p_hi);
}

/* ---- the windows ---- */

/* Window of small-side position o along dim i: taps [lo, hi) of the big
 * side, step apart; *span, what it covers with the padding (averages). */
static void window_of(const pool_ctx *c, int i, int64_t o, int64_t *lo, int64_t *hi, int64_t *step, int64_t *span) {
    const em_window_geom *g = &c->g;
    if (c->kind == WIN_ADAPTIVE) {
        *lo = o * g->in[i] / g->out[i];
        *hi = ((o + 1) * g->in[i] + g->out[i] - 1) / g->out[i];
        *step = 1;
        *span = *hi - *lo;
        return;
    }
    int64_t start = o * g->s[i] - g->p[i], d = g->d[i];
    int64_t end = start + (g->k[i] - 1) * d + 1, cap = g->in[i] + c->p_hi[i];
    *span = (end < cap ? end : cap) - start;
    /* the first tap inside the input, and the end */
    int64_t first = start < 0 ? start + (-start + d - 1) / d * d : start;
    *lo = first;
    *hi = end < g->in[i] ? end : g->in[i];
    if (*hi < *lo) *hi = *lo;
    *step = d;
}

/* Every window along every dim, worked out once per call rather than per
 * output place and plane: 4 entries per position. */
static em_status window_tables(pool_ctx *c) {
    int64_t total = 0;
    for (int i = 0; i < W3; i++) total += 4 * c->g.out[i];
    int64_t *t = em_malloc((size_t)total * sizeof *t);
    if (!t) return em_last_status();
    for (int i = 0; i < W3; i++) {
        c->win[i] = t;
        int64_t full = -1; /* the common size of dense, unclipped windows; 0 once one is not */
        for (int64_t o = 0; o < c->g.out[i]; o++, t += 4) {
            window_of(c, i, o, &t[0], &t[1], &t[2], &t[3]);
            int64_t n = t[1] - t[0];
            full = n > 0 && (t[2] == 1 || n == 1) && (full < 0 || full == n) ? n : 0;
        }
        c->full[i] = full > 0 ? full : 0;
    }
    return EM_OK;
}

static inline void window(const pool_ctx *c, int i, int64_t o, int64_t *lo, int64_t *hi, int64_t *step,
                          int64_t *span) {
    const int64_t *t = c->win[i] + 4 * o;
    *lo = t[0];
    *hi = t[1];
    *step = t[2];
    *span = t[3];
}

#define DEFINE_POOLS(T, sfx)                                                                                   \
    static void max_planes_##sfx(void *arg, int64_t b, int64_t e) {                                            \
        const pool_ctx *c = arg;                                                                               \
        const em_window_geom *g = &c->g;                                                                       \
        for (int64_t pl = b; pl < e; pl++) {                                                                   \
            const T *x = (const T *)(const void *)c->x + pl * g->in_numel;                                     \
            T *y = (T *)(void *)c->y + pl * g->out_numel;                                                      \
            int64_t *iy = (int64_t *)(void *)c->iy + pl * g->out_numel;                                        \
            int64_t lo[W3], hi[W3], st[W3], span, o = 0;                                                       \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++) {                                                       \
                window(c, 0, o0, &lo[0], &hi[0], &st[0], &span);                                               \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++) {                                                   \
                    window(c, 1, o1, &lo[1], &hi[1], &st[1], &span);                                           \
                    for (int64_t o2 = 0; o2 < g->out[2]; o2++, o++) {                                          \
                        window(c, 2, o2, &lo[2], &hi[2], &st[2], &span);                                       \
                        T best = -INFINITY;                                                                    \
                        int64_t at = -1;                                                                       \
                        if (lo[0] < hi[0] && lo[1] < hi[1] && lo[2] < hi[2]) { /* else an empty window */      \
                            at = (lo[0] * g->in[1] + lo[1]) * g->in[2] + lo[2];                                \
                            best = x[at];                                                                      \
                        }                                                                                      \
                        for (int64_t i0 = lo[0]; i0 < hi[0]; i0 += st[0])                                      \
                            for (int64_t i1 = lo[1]; i1 < hi[1]; i1 += st[1]) {                                \
                                int64_t row = (i0 * g->in[1] + i1) * g->in[2];                                 \
                                for (int64_t i2 = lo[2]; i2 < hi[2]; i2 += st[2]) {                            \
                                    T v = x[row + i2];                                                         \
                                    if (v > best || v != v) {                                                  \
                                        best = v;                                                              \
                                        at = row + i2;                                                         \
                                    }                                                                          \
                                }                                                                              \
                            }                                                                                  \
                        y[o] = best;                                                                           \
                        iy[o] = at;                                                                            \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    /* max over whole, dense windows of a 1-d or 2-d pool (the common           \
     * kernel 2 stride 2): the same taps in the same order as max_planes,       \
     * without its per-tap bounds */                                           \
    static void max_regular_##sfx(void *arg, int64_t b, int64_t e) {                                           \
        const pool_ctx *c = arg;                                                                               \
        const em_window_geom *g = &c->g;                                                                       \
        int64_t k1 = c->full[1], k2 = c->full[2], w = g->in[2];                                                \
        const int64_t *t1 = c->win[1], *t2 = c->win[2];                                                        \
        for (int64_t pl = b; pl < e; pl++) {                                                                   \
            const T *x = (const T *)(const void *)c->x + pl * g->in_numel;                                     \
            T *y = (T *)(void *)c->y + pl * g->out_numel;                                                      \
            int64_t *iy = (int64_t *)(void *)c->iy + pl * g->out_numel, o = 0;                                 \
            for (int64_t o1 = 0; o1 < g->out[1]; o1++)                                                         \
                for (int64_t o2 = 0; o2 < g->out[2]; o2++, o++) {                                              \
                    int64_t at = t1[4 * o1] * w + t2[4 * o2], best_at = at;                                    \
                    T best = x[at];                                                                            \
                    for (int64_t i1 = 0; i1 < k1; i1++)                                                        \
                        for (int64_t i2 = 0; i2 < k2; i2++) {                                                  \
                            T v = x[at + i1 * w + i2];                                                         \
                            if (v > best || v != v) {                                                          \
                                best = v;                                                                      \
                                best_at = at + i1 * w + i2;                                                    \
                            }                                                                                  \
                        }                                                                                      \
                    y[o] = best;                                                                               \
                    iy[o] = best_at;                                                                           \
                }                                                                                              \
        }                                                                                                      \
    }                                                                                                          \
    /* avg (GRAD false): y[o] = sum of its window / divisor; GRAD: x[window] += gy[o] / divisor */             \
    static void avg_walk_##sfx(const pool_ctx *c, int64_t b, int64_t e, bool grad) {                           \
        const em_window_geom *g = &c->g;                                                                       \
        for (int64_t pl = b; pl < e; pl++) {                                                                   \
            const T *x = (const T *)(const void *)c->x + pl * (grad ? g->out_numel : g->in_numel);             \
            T *y = (T *)(void *)c->y + pl * (grad ? g->in_numel : g->out_numel);                               \
            if (grad) memset(y, 0, (size_t)g->in_numel * sizeof(T));                                           \
            int64_t lo[W3], hi[W3], st[W3], span[W3], o = 0;                                                   \
            for (int64_t o0 = 0; o0 < g->out[0]; o0++) {                                                       \
                window(c, 0, o0, &lo[0], &hi[0], &st[0], &span[0]);                                            \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++) {                                                   \
                    window(c, 1, o1, &lo[1], &hi[1], &st[1], &span[1]);                                        \
                    for (int64_t o2 = 0; o2 < g->out[2]; o2++, o++) {                                          \
                        window(c, 2, o2, &lo[2], &hi[2], &st[2], &span[2]);                                    \
                        int64_t count = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);                   \
                        int64_t div = c->divisor ? c->divisor                                                  \
                                      : c->include_pad && c->kind == WIN_STRIDED ? span[0] * span[1] * span[2] \
                                                                                 : count;                      \
                        if (count <= 0) {                                                                      \
                            if (!grad) y[o] = 0;                                                               \
                            continue;                                                                          \
                        }                                                                                      \
                        T share = grad ? x[o] / (T)div : 0, sum = 0;                                           \
                        T level[SUM_LEVELS] = {0};                                                             \
                        int filled[SUM_LEVELS] = {0};                                                          \
                        for (int64_t i0 = lo[0]; i0 < hi[0]; i0++)                                             \
                            for (int64_t i1 = lo[1]; i1 < hi[1]; i1++) {                                       \
                                int64_t row = (i0 * g->in[1] + i1) * g->in[2];                                 \
                                if (grad) {                                                                    \
                                    for (int64_t i2 = lo[2]; i2 < hi[2]; i2++) y[row + i2] += share;           \
                                    continue;                                                                  \
                                }                                                                              \
                                for (int64_t r0 = lo[2]; r0 < hi[2]; r0 += SUM_RUN) {                          \
                                    T run = 0;                                                                 \
                                    int64_t r1 = r0 + SUM_RUN < hi[2] ? r0 + SUM_RUN : hi[2];                  \
                                    for (int64_t i2 = r0; i2 < r1; i2++) run += x[row + i2];                   \
                                    CASCADE_ADD(level, filled, run);                                           \
                                }                                                                              \
                            }                                                                                  \
                        for (int l = 0; l < SUM_LEVELS; l++) sum += level[l];                                  \
                        if (!grad) y[o] = sum / (T)div;                                                        \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    static void scatter_planes_##sfx(void *arg, int64_t b, int64_t e) {                                        \
        pool_ctx *c = arg;                                                                                     \
        const em_window_geom *g = &c->g;                                                                       \
        for (int64_t pl = b; pl < e; pl++) {                                                                   \
            const T *gy = (const T *)(const void *)c->x + pl * g->out_numel;                                   \
            const int64_t *ix = (const int64_t *)(const void *)c->idx + pl * g->out_numel;                     \
            T *gx = (T *)(void *)c->y + pl * g->in_numel;                                                      \
            memset(gx, 0, (size_t)g->in_numel * sizeof(T));                                                    \
            for (int64_t o = 0; o < g->out_numel; o++) {                                                       \
                if (ix[o] < 0) continue; /* an empty window's mark */                                          \
                if (ix[o] >= g->in_numel) {                                                                    \
                    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);                                         \
                    return;                                                                                    \
                }                                                                                              \
                gx[ix[o]] += gy[o];                                                                            \
            }                                                                                                  \
        }                                                                                                      \
    }
DEFINE_POOLS(float, f32)
DEFINE_POOLS(double, f64)

#if defined(__AVX512F__)
#define GATHER_LANES 16
/* max_regular for float32 with AVX-512, 16 outputs of a plane at a time
 * (across its rows: a pool of an 8x8 image has 4x4 outputs): each tap is
 * one gather through a table of the windows' starts (the same for every
 * plane) and a compare and blend, in max_planes' tap order with its NaN
 * rule. The scalar walk branches on every tap, and on real data which tap
 * wins is a coin toss: a 2x2 pool of 32K floats took 80 us in a training
 * step, mostly mispredictions. */
static void max_gather_f32(void *arg, int64_t b, int64_t e) {
    const pool_ctx *c = arg;
    const em_window_geom *g = &c->g;
    int64_t k1 = c->full[1], k2 = c->full[2], w = g->in[2], n_out = g->out_numel;
    int64_t padded = (n_out + GATHER_LANES - 1) / GATHER_LANES * GATHER_LANES;
    int32_t *start = em_malloc((size_t)padded * sizeof *start);
    if (!start) {
        max_regular_f32(arg, b, e);
        return;
    }
    for (int64_t o = 0; o < padded; o++) { /* (past the end: the last window again) */
        int64_t q = o < n_out ? o : n_out - 1;
        start[o] = (int32_t)(c->win[1][4 * (q / g->out[2])] * w + c->win[2][4 * (q % g->out[2])]);
    }
    for (int64_t pl = b; pl < e; pl++) {
        const float *x = (const float *)(const void *)c->x + pl * g->in_numel;
        float *y = (float *)(void *)c->y + pl * n_out;
        int64_t *iy = (int64_t *)(void *)c->iy + pl * n_out;
        for (int64_t o = 0; o < n_out; o += GATHER_LANES) {
            __m512i at0 = _mm512_loadu_si512(start + o), best_at = at0;
            __m512 best = _mm512_i32gather_ps(at0, x, 4);
            for (int64_t i1 = 0; i1 < k1; i1++)
                for (int64_t i2 = i1 ? 0 : 1; i2 < k2; i2++) {
                    __m512i at = _mm512_add_epi32(at0, _mm512_set1_epi32((int32_t)(i1 * w + i2)));
                    __m512 v = _mm512_i32gather_ps(at, x, 4);
                    __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                    best = _mm512_mask_blend_ps(take, best, v);
                    best_at = _mm512_mask_blend_epi32(take, best_at, at);
                }
            int n = n_out - o < GATHER_LANES ? (int)(n_out - o) : GATHER_LANES;
            __mmask16 keep = (__mmask16)((1u << n) - 1);
            _mm512_mask_storeu_ps(y + o, keep, best);
            _mm512_mask_storeu_epi64(iy + o, (__mmask8)(keep & 0xff),
                                     _mm512_cvtepi32_epi64(_mm512_castsi512_si256(best_at)));
            if (n > 8)
                _mm512_mask_storeu_epi64(iy + o + 8, (__mmask8)(keep >> 8),
                                         _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(best_at, 1)));
        }
    }
    em_free(start);
}
#endif

static void max_planes(void *arg, int64_t b, int64_t e) {
    const pool_ctx *c = arg;
    bool regular = c->g.out[0] == 1 && c->g.in[0] == 1 && c->full[1] && c->full[2];
#if defined(__AVX512F__)
    if (regular && c->dt == EM_DTYPE_F32 && c->g.in_numel < ((int64_t)1 << 31)) {
        max_gather_f32(arg, b, e);
        return;
    }
#endif
    if (c->dt == EM_DTYPE_F32)
        (regular ? max_regular_f32 : max_planes_f32)(arg, b, e);
    else
        (regular ? max_regular_f64 : max_planes_f64)(arg, b, e);
}

static void avg_planes(void *arg, int64_t b, int64_t e) {
    const pool_ctx *c = arg;
    if (c->dt == EM_DTYPE_F32)
        avg_walk_f32(c, b, e, false);
    else
        avg_walk_f64(c, b, e, false);
}

static void avg_grad_planes(void *arg, int64_t b, int64_t e) {
    const pool_ctx *c = arg;
    if (c->dt == EM_DTYPE_F32)
        avg_walk_f32(c, b, e, true);
    else
        avg_walk_f64(c, b, e, true);
}

static void scatter_planes(void *arg, int64_t b, int64_t e) {
    const pool_ctx *c = arg;
    if (c->dt == EM_DTYPE_F32)
        scatter_planes_f32(arg, b, e);
    else
        scatter_planes_f64(arg, b, e);
}

/* Runs fn over the planes of `from` (dense) and `idx` into y. */
static em_status run_planes(pool_ctx *c, em_tensor *from, em_tensor *idx, em_tensor *y, em_tensor *iy,
                            em_parallel_fn fn) {
    em_tensor *x = em_dense(from), *ix = idx ? em_dense(idx) : NULL;
    if (!x || (idx && !ix)) {
        em_tensor_release(x);
        return em_last_status();
    }
    em_status st = fn == scatter_planes ? EM_OK : window_tables(c);
    if (st != EM_OK) {
        em_tensor_release(x);
        em_tensor_release(ix);
        return st;
    }
    c->dt = from->dtype;
    c->x = em_tensor_data(x);
    c->idx = ix ? em_tensor_data(ix) : NULL;
    c->y = em_tensor_data(y);
    c->iy = iy ? em_tensor_data(iy) : NULL;
    int64_t planes = from->shape[0] * from->shape[1];
    int64_t work = c->g.in_numel + c->g.out_numel;
    if (planes > 0) em_parallel_for(planes, EM_GRAIN_ELEMENTWISE / (work + 1) + 1, fn, c);
    em_free(c->win[0]);
    em_tensor_release(x);
    em_tensor_release(ix);
    if (c->failed)
        return em_error(EM_ERR_INDEX, "max_pool_grad: an index is outside the input's spatial plane of %lld places",
                        (long long)c->g.in_numel);
    return EM_OK;
}

em_status cpu_max_pool(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    pool_ctx c = {.op = op, .kind = WIN_STRIDED};
    em_type x = em_tensor_type(in[0]);
    em_status st = strided_geometry(&c, &x, a, NULL, a->ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR);
    return st != EM_OK ? st : run_planes(&c, in[0], NULL, out[0], out[1], max_planes);
}

em_status cpu_adaptive_max_pool(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    pool_ctx c = {.op = op, .kind = WIN_ADAPTIVE};
    em_type x = em_tensor_type(in[0]);
    em_status st = em_pool_adaptive_geometry(op, &x, a->shape + 2, &c.g);
    return st != EM_OK ? st : run_planes(&c, in[0], NULL, out[0], out[1], max_planes);
}

/* The gradient of both max pools: only the plane sizes matter. */
em_status cpu_max_pool_grad(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    (void)a;
    pool_ctx c = {.op = op};
    int64_t planes = out[0]->shape[0] * out[0]->shape[1];
    c.g.in_numel = planes ? out[0]->numel / planes : 0;
    c.g.out_numel = planes ? in[0]->numel / planes : 0;
    return run_planes(&c, in[0], in[1], out[0], NULL, scatter_planes);
}

static void avg_attrs(pool_ctx *c, const em_attrs *a) {
    c->include_pad = a->count_include_pad;
    c->divisor = a->divisor;
}

em_status cpu_avg_pool(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    pool_ctx c = {.op = op, .kind = WIN_STRIDED};
    avg_attrs(&c, a);
    em_type x = em_tensor_type(in[0]);
    em_status st = strided_geometry(&c, &x, a, NULL, a->ceil_mode ? EM_WIN_CEIL : EM_WIN_FLOOR);
    return st != EM_OK ? st : run_planes(&c, in[0], NULL, out[0], NULL, avg_planes);
}

em_status cpu_avg_pool_grad(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    pool_ctx c = {.op = op, .kind = WIN_STRIDED};
    avg_attrs(&c, a);
    em_type big = em_tensor_type(out[0]);
    em_status st = strided_geometry(&c, &big, a, in[0]->shape + 2, EM_WIN_FLOOR);
    return st != EM_OK ? st : run_planes(&c, in[0], NULL, out[0], NULL, avg_grad_planes);
}

em_status cpu_adaptive_avg_pool(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    pool_ctx c = {.op = op, .kind = WIN_ADAPTIVE};
    em_type x = em_tensor_type(in[0]);
    em_status st = em_pool_adaptive_geometry(op, &x, a->shape + 2, &c.g);
    return st != EM_OK ? st : run_planes(&c, in[0], NULL, out[0], NULL, avg_planes);
}

em_status cpu_adaptive_avg_pool_grad(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    (void)a;
    pool_ctx c = {.op = op, .kind = WIN_ADAPTIVE};
    em_type big = em_tensor_type(out[0]);
    em_status st = em_pool_adaptive_geometry(op, &big, in[0]->shape + 2, &c.g);
    return st != EM_OK ? st : run_planes(&c, in[0], NULL, out[0], NULL, avg_grad_planes);
}
