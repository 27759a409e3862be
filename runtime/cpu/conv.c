/*
 * conv.c - convolution and its two adjoints, each one op:
 *
 *   conv(x, w[, b])            y[n, o] = sum over c, taps of w[o, c, tap] x[n, c, at tap] (+ b[o])
 *   conv_transpose(x, w[, b])  the adjoint in x: what conv's input gradient is
 *   conv_weight(x, gy)         the adjoint in w: conv's weight gradient
 *
 * with PyTorch's weight layouts ((O, C/groups, k...) for conv, (C_in,
 * C_out/groups, k...) for conv_transpose) and any of 1 to 3 spatial dims.
 * Float32 conv and conv_weight at stride 1 go to conv_direct.c, an
 * implicit GEMM over row-shifted copies of the input (twice the speed of
 * the path below on a ResNet block's 3x3 convolutions). Otherwise
 * each is a GEMM per (sample, group) on im2col's columns (window.h): conv
 * multiplies the weights by the columns; conv_transpose multiplies the
 * transposed weights by its input and adds the columns back (col2im);
 * conv_weight multiplies the gradient by the transposed columns, summing
 * over samples. A 1x1 kernel at stride 1 without padding needs no columns:
 * the input is its own.
 *
 * A channels-last input (strides of (N, spatial..., C)) is read in place,
 * not copied to NCHW: into a channels-last result (the layout attribute,
 * which the frontend sets where PyTorch keeps the layout) float32 goes
 * direct (conv_last.c), the rest through im2row, the columns' channel-last
 * twin, and one GEMM per block of positions (see "channels-last" below).
 * Their adjoints read such operands through dense NCHW copies.
 *
 * The GEMMs run single-threaded on ember's pool, one item of work each: a
 * (sample, group), and where those are few also a block of output
 * positions (conv) or of channels (conv_transpose). conv_weight sums over
 * the samples: it cuts them into chunks summed apart and added in order at
 * the end, and where that is not enough, the channels into blocks. Every
 * cut follows from the shapes alone, so the bits do not depend on the
 * thread count. The three ops' inference is ../infer/conv.c.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/alloc.h"
#include "conv_direct.h"
#include "conv_last.h"
#include "ember/parallel.h"
#include "window.h"

/* ---- kernels ---- */

typedef struct {
    em_dtype dt;
    size_t item;
    em_window_geom g;
    bool identity;
    int64_t groups, blocks;   /* items per (sample, group), or per group for conv_weight */
    int64_t big_c, small_c;   /* channels of the big side (conv's input) and the small */
    const char *x, *w, *b;    /* conv: input, weight, bias; transpose: input (small side); weight: input */
    const char *gy;           /* conv_weight: the gradient (small side) */
    char *y;
    int64_t n_samples, chunks; /* conv_weight: samples, and chunks of them summed apart */
    int64_t per;               /* conv: samples per item (small images go several to a GEMM) */
    char *partial;             /* conv_weight: chunks 1.. of the sum, each w's size */
    int failed;
} conv_ctx;

static void note_failure(conv_ctx *c) { __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED); }

/* em_blas_gemm with its inner dimension k cut into even chunks of at most
 * CONV_K_BLOCK, added into c one after another (beta for the first, then
 * 1). OpenBLAS sums a few hundred terms serially into each register before
 * touching c; a convolution's k (channels x taps, 2304 for 256 channels of
 * 3x3) in chunks of ~sqrt(k) brings the float32 error of the strided and
 * transposed convolutions from 1.4-1.8x PyTorch's (oneDNN's) to its level,
 * for one more read and write of c per chunk. */
#define CONV_K_BLOCK 64
static void gemm_k_blocked(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const char *a,
                           int64_t lda, const char *b, int64_t ldb, double beta, char *c, int64_t ldc) {
    int64_t sz = (int64_t)em_dtype_size(dt), chunks = (k + CONV_K_BLOCK - 1) / CONV_K_BLOCK;
    if (chunks < 1) chunks = 1;
    for (int64_t j = 0; j < chunks; j++) {
        int64_t k0 = k * j / chunks, k1 = k * (j + 1) / chunks;
        const char *aj = a + (ta ? k0 * lda : k0) * sz, *bj = b + (tb ? k0 : k0 * ldb) * sz;
        em_blas_gemm(dt, ta, tb, m, n, k1 - k0, 1.0, aj, lda, bj, ldb, j == 0 ? beta : 1.0, c, ldc);
    }
}

/* rows x cols of y (rows ld apart) += b[row]. */
static void add_bias(em_dtype dt, char *y, int64_t ld, int64_t rows, int64_t cols, const char *b) {
    for (int64_t r = 0; r < rows; r++) {
        if (dt == EM_DTYPE_F32) {
            float *p = (float *)(void *)y + r * ld, v = ((const float *)(const void *)b)[r];
            for (int64_t i = 0; i < cols; i++) p[i] += v;
        } else {
            double *p = (double *)(void *)y + r * ld, v = ((const double *)(const void *)b)[r];
            for (int64_t i = 0; i < cols; i++) p[i] += v;
        }
    }
}

/* rows x cols of y (rows ld apart) = b[row], or 0 without b. */
static void fill_rows(em_dtype dt, char *y, int64_t ld, int64_t rows, int64_t cols, const char *b) {
    size_t item = em_dtype_size(dt);
    for (int64_t r = 0; r < rows; r++) memset(y + r * ld * (int64_t)item, 0, (size_t)cols * item);
    if (b) add_bias(dt, y, ld, rows, cols, b);
}

/* Item of `per` samples of a small image: their columns side by side, one
 * GEMM for all (a GEMM per 4x4 image is mostly call and packing), and the
 * product's columns copied out to each sample. */
static void conv_batched(conv_ctx *c, int64_t q, int64_t gi, char *col, char *tmp) {
    const em_window_geom *g = &c->g;
    int64_t cg = c->big_c / c->groups, og = c->small_c / c->groups, K = g->k_numel, L = g->out_numel;
    int64_t sz = (int64_t)c->item, n0 = q * c->per, n1 = n0 + c->per < c->n_samples ? n0 + c->per : c->n_samples;
    int64_t w = (n1 - n0) * L;
    for (int64_t n = n0; n < n1; n++)
        em_im2col(c->dt, c->x + (n * c->big_c + gi * cg) * g->in_numel * sz, cg, g, 0, L, col + (n - n0) * L * sz, w);
    gemm_k_blocked(c->dt, false, false, og, w, cg * K, c->w + gi * og * cg * K * sz, cg * K, col, w, 0.0, tmp, w);
    for (int64_t n = n0; n < n1; n++) {
        char *yg = c->y + (n * c->small_c + gi * og) * L * sz;
        for (int64_t o = 0; o < og; o++)
            memcpy(yg + o * L * sz, tmp + (o * w + (n - n0) * L) * sz, (size_t)(L * sz));
        if (c->b) add_bias(c->dt, yg, L, og, L, c->b + gi * og * sz);
    }
}

/* Item: (sample, group, block of output positions), or (`per` samples,
 * group). */
static void conv_items(void *arg, int64_t i0, int64_t i1) {
    conv_ctx *c = arg;
    const em_window_geom *g = &c->g;
    int64_t cg = c->big_c / c->groups, og = c->small_c / c->groups, K = g->k_numel, L = g->out_numel;
    int64_t sz = (int64_t)c->item;
    if (c->per > 1) {
        size_t cbytes = (size_t)(cg * K * c->per * L) * c->item, tbytes = (size_t)(og * c->per * L) * c->item;
        char *col = em_cpu_alloc(cbytes), *tmp = col ? em_cpu_alloc(tbytes) : NULL;
        for (int64_t i = i0; tmp && i < i1; i++) conv_batched(c, i / c->groups, i % c->groups, col, tmp);
        if (!tmp) note_failure(c);
        if (col) em_cpu_free(col, cbytes);
        if (tmp) em_cpu_free(tmp, tbytes);
        return;
    }
    for (int64_t i = i0; i < i1; i++) {
        int64_t n = i / (c->groups * c->blocks), gi = i / c->blocks % c->groups, j = i % c->blocks;
        int64_t l0 = L * j / c->blocks, l1 = L * (j + 1) / c->blocks;
        const char *xg = c->x + (n * c->big_c + gi * cg) * g->in_numel * sz;
        const char *col = xg + l0 * sz;
        int64_t ld = L;
        void *buf = NULL;
        size_t bytes = (size_t)(cg * K * (l1 - l0)) * c->item;
        if (!c->identity) {
            if (!(buf = em_cpu_alloc(bytes))) {
                note_failure(c);
                return;
            }
            em_im2col(c->dt, xg, cg, g, l0, l1, buf, l1 - l0);
            col = buf;
            ld = l1 - l0;
        }
        char *yb = c->y + ((n * c->small_c + gi * og) * L + l0) * sz;
        gemm_k_blocked(c->dt, false, false, og, l1 - l0, cg * K, c->w + gi * og * cg * K * sz, cg * K, col, ld, 0.0, yb,
                       L);
        if (c->b) add_bias(c->dt, yb, L, og, l1 - l0, c->b + gi * og * sz);
        if (buf) em_cpu_free(buf, bytes);
    }
}

/* Item: (sample, group, block of the result's channels). The result is the
 * big side; x, the small side, has small_c channels. */
static void transpose_items(void *arg, int64_t i0, int64_t i1) {
    conv_ctx *c = arg;
    const em_window_geom *g = &c->g;
    int64_t cg = c->small_c / c->groups, og = c->big_c / c->groups, K = g->k_numel, L = g->out_numel;
    int64_t sz = (int64_t)c->item;
    for (int64_t i = i0; i < i1; i++) {
        int64_t n = i / (c->groups * c->blocks), gi = i / c->blocks % c->groups, j = i % c->blocks;
        int64_t c0 = og * j / c->blocks, c1 = og * (j + 1) / c->blocks;
        if (c1 == c0) continue;
        const char *xg = c->x + (n * c->small_c + gi * cg) * L * sz;
        const char *wg = c->w + gi * cg * og * K * sz; /* (cg, og * K) */
        char *yg = c->y + (n * c->big_c + gi * og + c0) * g->in_numel * sz;
        fill_rows(c->dt, yg, g->in_numel, c1 - c0, g->in_numel, c->b ? c->b + (gi * og + c0) * sz : NULL);
        if (c->identity) {
            gemm_k_blocked(c->dt, true, false, c1 - c0, L, cg, wg + c0 * sz, og, xg, L, 1.0, yg, L);
            continue;
        }
        size_t bytes = (size_t)((c1 - c0) * K * L) * c->item;
        void *gcol = em_cpu_alloc(bytes);
        if (!gcol) {
            note_failure(c);
            return;
        }
        gemm_k_blocked(c->dt, true, false, (c1 - c0) * K, L, cg, wg + c0 * K * sz, og * K, xg, L, 0.0, gcol, L);
        em_col2im(c->dt, gcol, c1 - c0, g, 0, L, L, yg);
        em_cpu_free(gcol, bytes);
    }
}

/* Item: (group, block of input channels, chunk of samples). */
static void weight_items(void *arg, int64_t i0, int64_t i1) {
    conv_ctx *c = arg;
    const em_window_geom *g = &c->g;
    int64_t cg = c->big_c / c->groups, og = c->small_c / c->groups, K = g->k_numel, L = g->out_numel;
    int64_t sz = (int64_t)c->item, wsize = c->small_c * cg * K;
    for (int64_t i = i0; i < i1; i++) {
        int64_t q = i % c->chunks, j = i / c->chunks % c->blocks, gi = i / (c->chunks * c->blocks);
        int64_t c0 = cg * j / c->blocks, c1 = cg * (j + 1) / c->blocks;
        int64_t n0 = c->n_samples * q / c->chunks, n1 = c->n_samples * (q + 1) / c->chunks;
        if (c1 == c0) continue;
        char *dst = (q == 0 ? c->y : c->partial + (q - 1) * wsize * sz) + (gi * og * cg * K + c0 * K) * sz;
        size_t bytes = c->identity ? 0 : (size_t)((c1 - c0) * K * L) * c->item;
        void *buf = bytes ? em_cpu_alloc(bytes) : NULL;
        if (bytes && !buf) {
            note_failure(c);
            return;
        }
        if (n0 == n1) fill_rows(c->dt, dst, cg * K, og, (c1 - c0) * K, NULL);
        for (int64_t n = n0; n < n1; n++) {
            const char *xg = c->x + (n * c->big_c + gi * cg + c0) * g->in_numel * sz;
            const char *col = xg;
            if (buf) {
                em_im2col(c->dt, xg, c1 - c0, g, 0, L, buf, L);
                col = buf;
            }
            const char *gy = c->gy + (n * c->small_c + gi * og) * L * sz;
            em_blas_gemm(c->dt, false, true, og, (c1 - c0) * K, L, 1.0, gy, L, col, L, n == n0 ? 0.0 : 1.0, dst,
                         cg * K);
        }
        if (buf) em_cpu_free(buf, bytes);
    }
}

/* Items a convolution is cut into at least, where its (sample, group)
 * pairs are fewer: enough for the threads of a small machine, and fixed,
 * because OpenBLAS rounds a product's edge blocks differently from its
 * inner ones, so cutting by the thread count would change the bits. */
#define MIN_ITEMS 8

/* Blocks per (sample, group): MIN_ITEMS items in all, each block at least
 * `least` long out of `len`. */
static int64_t blocks_for(int64_t items, int64_t len, int64_t least) {
    if (items >= MIN_ITEMS || items == 0) return 1;
    int64_t want = (MIN_ITEMS + items - 1) / items, most = len / least;
    return want < most ? want : most > 1 ? most : 1;
}

/* conv or conv_weight through conv_direct.c, on c's dense operands. */
static em_status run_direct(conv_ctx *c, em_op op) {
    const em_window_geom *g = &c->g;
    if (op == EM_OP_CONV)
        return em_conv_direct(g, c->n_samples, c->groups, c->big_c, c->small_c, (const float *)(const void *)c->x,
                              (const float *)(const void *)c->w, (const float *)(const void *)c->b,
                              (float *)(void *)c->y);
    return em_conv_direct_weight(g, c->n_samples, c->groups, c->big_c, c->small_c, (const float *)(const void *)c->x,
                                 (const float *)(const void *)c->gy, (float *)(void *)c->y);
}

/* Runs the items over the pool (fn NULL: the direct kernels), with operand
 * i (NULL: absent) made dense and its data in *data[i]. */
static em_status run(conv_ctx *c, em_op op, em_tensor *const *ts, const char **const *data, int n, int64_t items,
                     em_parallel_fn fn) {
    em_tensor *d[3] = {NULL, NULL, NULL};
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++) {
        if (!ts[i]) continue;
        if (!(d[i] = em_dense(ts[i])))
            st = em_last_status();
        else
            *data[i] = em_tensor_data(d[i]);
    }
    if (st == EM_OK && !fn)
        st = run_direct(c, op);
    else if (st == EM_OK && items > 0)
        em_parallel_for_blas(items, fn, c);
    for (int i = 0; i < n; i++) em_tensor_release(d[i]);
    if (st == EM_OK && c->failed) st = em_error(EM_ERR_NOMEM, "%s: out of memory for the columns", em_op_name(op));
    return st;
}

/* EMBER_CONV: 0 (unset) auto, 1 "gemm" keeps every convolution on im2col
 * (or im2row) + GEMM, 2 "direct" sends every one the direct kernels can
 * do to them, to compare and test the two. */
static int conv_mode(void) {
    static int mode = -1; /* atomic; -1: not read yet */
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m < 0) {
        const char *env = getenv("EMBER_CONV");
        m = env && !strcmp(env, "gemm") ? 1 : env && !strcmp(env, "direct") ? 2 : 0;
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m;
}

/* Does this convolution go to conv_direct.c? (Not a 1x1 kernel that needs
 * no columns: its GEMM reads the input as it is.) */
static bool goes_direct(const conv_ctx *c, em_op op) {
    int m = conv_mode();
    return m != 1 && !c->identity &&
           em_conv_direct_fits(op == EM_OP_CONV_WEIGHT && m == 0, c->dt, &c->g, c->n_samples, c->groups, c->big_c,
                               c->small_c);
}

static void ctx_init(conv_ctx *c, em_dtype dt, const em_attrs *a, em_tensor *y) {
    memset(c, 0, sizeof *c);
    c->dt = dt;
    c->item = em_dtype_size(dt);
    c->groups = a->groups;
    c->y = em_tensor_data(y);
}

/* ---- channels-last: the input read as (N, spatial..., C) ----
 *
 * A channels-last input (x.to(memory_format=channels_last), or a conv1d
 * over x.transpose(1, 2)) is read as it lies, without a copy to NCHW: each
 * row of its columns is one output position of one sample, (tap, channel)
 * across, every tap a run of channels copied whole (for a 1x1 kernel at
 * stride 1 without padding, the input is its own columns). One GEMM per
 * (group, block of rows) multiplies them by the weights reordered to
 * (out, tap, channel): its rows are the result's positions, written
 * channels-last (rows of cout apart: the samples follow one another, so a
 * block of rows may span several) or, for a row-major result, transposed
 * into each sample's planes. */

typedef struct {
    em_dtype dt;
    int64_t sz;
    em_window_geom g;
    bool identity, y_last;
    int64_t groups, cin, cout, rows, blocks; /* rows: samples x positions */
    const char *x, *w, *b;                   /* x channels-last; w (cout, taps, cin / groups) */
    char *y;
    const char *gy;                          /* conv_weight: the gradient, channels-last */
    int64_t chunks;                          /* conv_weight: chunks of rows summed apart */
    int64_t ta, tb;                          /* conv_weight: the block of taps being summed */
    char *sums;                              /* conv_weight: each chunk's sum, (cout, tb - ta, cg) */
    int failed;
} rows_ctx;

/* col[(r - r0) * ld + (tap - ta) * cg + c] = x at row r (sample, position),
 * tap in [ta, tb) and channel c of group gi, zero in the padding. */
static void im2row_taps(const rows_ctx *c, int64_t gi, int64_t ta, int64_t tb, int64_t r0, int64_t r1, char *col,
                        int64_t ld) {
    const em_window_geom *g = &c->g;
    int64_t cg = c->cin / c->groups, L = g->out_numel, sz = c->sz, run = cg * sz;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / L, l = r % L;
        int64_t o2 = l % g->out[2], o1 = l / g->out[2] % g->out[1], o0 = l / (g->out[2] * g->out[1]);
        char *dst = col + (r - r0) * ld * sz;
        for (int64_t t = ta; t < tb; t++, dst += run) {
            int64_t t2 = t % g->k[2], t1 = t / g->k[2] % g->k[1], t0 = t / (g->k[2] * g->k[1]);
            int64_t i0 = o0 * g->s[0] - g->p[0] + t0 * g->d[0], i1 = o1 * g->s[1] - g->p[1] + t1 * g->d[1];
            int64_t i2 = o2 * g->s[2] - g->p[2] + t2 * g->d[2];
            if (i0 >= 0 && i0 < g->in[0] && i1 >= 0 && i1 < g->in[1] && i2 >= 0 && i2 < g->in[2])
                memcpy(dst, c->x + ((((n * g->in[0] + i0) * g->in[1] + i1) * g->in[2] + i2) * c->cin + gi * cg) * sz,
                       (size_t)run);
            else
                memset(dst, 0, (size_t)run);
        }
    }
}

static void im2row(const rows_ctx *c, int64_t gi, int64_t r0, int64_t r1, char *col, int64_t ld) {
    im2row_taps(c, gi, 0, c->g.k_numel, r0, r1, col, ld);
}

/* rows x cols of y (rows ld apart) += b[col]. */
static void add_bias_across(em_dtype dt, char *y, int64_t ld, int64_t rows, int64_t cols, const char *b) {
    for (int64_t r = 0; r < rows; r++) {
        if (dt == EM_DTYPE_F32) {
            float *p = (float *)(void *)y + r * ld;
            const float *v = (const float *)(const void *)b;
            for (int64_t i = 0; i < cols; i++) p[i] += v[i];
        } else {
            double *p = (double *)(void *)y + r * ld;
            const double *v = (const double *)(const void *)b;
            for (int64_t i = 0; i < cols; i++) p[i] += v[i];
        }
    }
}

/* Item: (group, block of rows). */
static void row_items(void *arg, int64_t i0, int64_t i1) {
    rows_ctx *c = arg;
    int64_t cg = c->cin / c->groups, og = c->cout / c->groups, K = c->g.k_numel * cg, L = c->g.out_numel;
    int64_t sz = c->sz;
    for (int64_t i = i0; i < i1; i++) {
        int64_t gi = i / c->blocks, j = i % c->blocks;
        int64_t r0 = c->rows * j / c->blocks, r1 = c->rows * (j + 1) / c->blocks;
        if (r1 == r0) continue;
        const char *col = c->x + (r0 * c->cin + gi * cg) * sz, *wg = c->w + gi * og * K * sz;
        int64_t ld = c->cin;
        void *buf = NULL;
        size_t bytes = (size_t)((r1 - r0) * K * sz);
        if (!c->identity) {
            if (!(buf = em_cpu_alloc(bytes))) {
                __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
                return;
            }
            im2row(c, gi, r0, r1, buf, K);
            col = buf;
            ld = K;
        }
        if (c->y_last) {
            char *yb = c->y + (r0 * c->cout + gi * og) * sz;
            gemm_k_blocked(c->dt, false, true, r1 - r0, og, K, col, ld, wg, K, 0.0, yb, c->cout);
            if (c->b) add_bias_across(c->dt, yb, c->cout, r1 - r0, og, c->b + gi * og * sz);
        }
        for (int64_t ra = r0; !c->y_last && ra < r1;) { /* each sample's part of the block */
            int64_t n = ra / L, rb = (n + 1) * L < r1 ? (n + 1) * L : r1;
            char *yb = c->y + ((n * c->cout + gi * og) * L + ra % L) * sz;
            gemm_k_blocked(c->dt, false, true, og, rb - ra, K, wg, K, col + (ra - r0) * ld * sz, ld, 0.0, yb, L);
            if (c->b) add_bias(c->dt, yb, L, og, rb - ra, c->b + gi * og * sz);
            ra = rb;
        }
        if (buf) em_cpu_free(buf, bytes);
    }
}

/* Is t laid out channels-last: (N, spatial..., C) in memory, the batch
 * outermost? (Size-1 dims may have any stride.) */
static bool is_channels_last(const em_tensor *t) {
    int64_t order[EM_MAX_DIMS], want[EM_MAX_DIMS];
    if (t->ndim < 3) return false;
    order[0] = 0;
    for (int d = 2; d < t->ndim; d++) order[d - 1] = d;
    order[t->ndim - 1] = 1;
    em_layout_strides(t->shape, t->ndim, order, want);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1 && t->strides[d] != want[d]) return false;
    return true;
}

/* The columns' rows per GEMM: a block of at most COL_BYTES of columns, at
 * least MIN_ROWS rows (the GEMM's height), and at least MIN_ITEMS items in
 * all where the rows allow. */
#define COL_BYTES ((int64_t)1 << 20)
#define MIN_ROWS 64

/* x's channels-last memory: x itself, or a channels-last copy (a new
 * reference either way). */
static em_tensor *channels_last_copy(em_tensor *x) {
    if (is_channels_last(x)) {
        em_tensor_retain(x);
        return x;
    }
    int64_t order[EM_MAX_DIMS], back[EM_MAX_DIMS];
    order[0] = 0;
    for (int d = 2; d < x->ndim; d++) order[d - 1] = d;
    order[x->ndim - 1] = 1;
    for (int d = 0; d < x->ndim; d++) back[order[d]] = d;
    em_tensor *p = em_permute(x, order, x->ndim), *dense = p ? em_dense(p) : NULL;
    em_tensor *r = dense ? em_permute(dense, back, x->ndim) : NULL;
    em_tensor_release(p);
    em_tensor_release(dense);
    return r;
}

/* w (cout, cg, taps) reordered to (cout, taps, cg). */
static void reorder_weight(em_dtype dt, const char *w, int64_t cout, int64_t cg, int64_t taps, char *wr) {
    int64_t sz = (int64_t)em_dtype_size(dt);
    for (int64_t o = 0; o < cout; o++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t t = 0; t < taps; t++)
                memcpy(wr + ((o * taps + t) * cg + c) * sz, w + ((o * cg + c) * taps + t) * sz, (size_t)sz);
}

/* c for a convolution of geometry g over input x (cin channels), cout
 * output channels in `groups` groups, in dtype dt. */
static void rows_init(rows_ctx *c, const em_window_geom *g, em_dtype dt, const em_tensor *x, int64_t cout,
                      int64_t groups) {
    memset(c, 0, sizeof *c);
    c->dt = dt;
    c->sz = (int64_t)em_dtype_size(dt);
    c->g = *g;
    c->identity = em_window_is_identity(g);
    c->cin = x->shape[1];
    c->cout = cout;
    c->groups = groups;
    c->rows = x->shape[0] * g->out_numel;
}

/* The GEMM path: c's shapes set, x channels-last, w and b dense. */
static em_status conv_rows_gemm(rows_ctx *c, em_tensor *x, em_tensor *w, em_tensor *b) {
    int64_t cg = c->cin / c->groups, K = c->g.k_numel * cg;
    size_t wbytes = (size_t)(c->cout * K * c->sz);
    char *wr = em_cpu_alloc(wbytes);
    if (!wr) return em_last_status();
    c->x = em_tensor_data(x);
    c->b = b ? em_tensor_data(b) : NULL;
    reorder_weight(c->dt, em_tensor_data(w), c->cout, cg, c->g.k_numel, wr);
    c->w = wr;
    int64_t per = COL_BYTES / (K * c->sz + 1);
    per = per < MIN_ROWS ? MIN_ROWS : per;
    c->blocks = (c->rows + per - 1) / per;
    if (c->blocks * c->groups < MIN_ITEMS) {
        int64_t most = c->rows / MIN_ROWS, want = (MIN_ITEMS + c->groups - 1) / c->groups;
        int64_t more = want < most ? want : most;
        c->blocks = more > c->blocks ? more : c->blocks;
    }
    if (c->blocks < 1) c->blocks = 1;
    if (c->rows > 0) em_parallel_for_blas(c->groups * c->blocks, row_items, c);
    em_cpu_free(wr, wbytes);
    return c->failed ? em_error(EM_ERR_NOMEM, "conv: out of memory for the columns") : EM_OK;
}

/* conv of a channels-last input, or into a channels-last result: direct
 * (conv_last.c) into a channels-last result where it fits and `direct`
 * allows, else im2row and a GEMM. */
static em_status conv_channels_last(const em_window_geom *g, em_tensor *const *in, int n_in, em_tensor *y,
                                    bool direct) {
    rows_ctx c;
    rows_init(&c, g, y->dtype, in[0], in[1]->shape[0], in[0]->shape[1] / in[1]->shape[1]);
    c.y_last = is_channels_last(y) && !em_tensor_is_contiguous(y);
    c.y = em_tensor_data(y);
    em_tensor *x = channels_last_copy(in[0]), *w = x ? em_dense(in[1]) : NULL;
    em_tensor *b = w && n_in > 2 ? em_dense(in[2]) : NULL;
    em_status st = w && (n_in < 3 || b) ? EM_OK : em_last_status();
    if (st == EM_OK && c.y_last && direct && em_conv_last_fits(c.dt, g, in[0]->shape[0], c.groups, c.cin, c.cout))
        st = em_conv_last(g, in[0]->shape[0], c.groups, c.cin, c.cout, (const float *)em_tensor_data(x),
                          (const float *)em_tensor_data(w), b ? (const float *)em_tensor_data(b) : NULL,
                          (float *)(void *)c.y);
    else if (st == EM_OK)
        st = conv_rows_gemm(&c, x, w, b);
    em_tensor_release(x);
    em_tensor_release(w);
    em_tensor_release(b);
    return st;
}

/* The most memory conv_weight's partial sums (chunks of samples or rows
 * added apart) take. */
#define PARTIAL_BYTES ((int64_t)16 << 20)

/* Rows per chunk of a channels-last weight gradient's sum, where memory
 * for the chunks' sums allows: OpenBLAS sums a GEMM's inner dimension (the
 * rows) serially, so chunks of 64 summed pairwise bring the float32
 * error to PyTorch's (test_float32_accuracy). */
#define CHUNK_ROWS 64

/* y[0, n) += p[0, n). */
static void add_into(em_dtype dt, char *y, const char *p, int64_t n) {
    if (dt == EM_DTYPE_F32)
        for (int64_t i = 0; i < n; i++) ((float *)(void *)y)[i] += ((const float *)(const void *)p)[i];
    else
        for (int64_t i = 0; i < n; i++) ((double *)(void *)y)[i] += ((const double *)(const void *)p)[i];
}

/* conv_weight, channels-last: item (group, chunk of rows): the chunk's
 * sum of gy[r, group's outputs]^T col[r, taps ta..tb] over its rows, a
 * GEMM per block of rows added into it. */
static void weight_row_items(void *arg, int64_t i0, int64_t i1) {
    rows_ctx *c = arg;
    int64_t cg = c->cin / c->groups, og = c->cout / c->groups, K = (c->tb - c->ta) * cg, sz = c->sz;
    int64_t per = COL_BYTES / (K * sz + 1);
    per = per < MIN_ROWS ? MIN_ROWS : per;
    for (int64_t i = i0; i < i1; i++) {
        int64_t q = i % c->chunks, gi = i / c->chunks;
        int64_t r0 = c->rows * q / c->chunks, r1 = c->rows * (q + 1) / c->chunks;
        char *dst = c->sums + (q * c->cout + gi * og) * K * sz;
        if (r1 == r0) {
            fill_rows(c->dt, dst, K, og, K, NULL);
            continue;
        }
        size_t bytes = c->identity ? 0 : (size_t)(per * K * sz);
        char *buf = bytes ? em_cpu_alloc(bytes) : NULL;
        if (bytes && !buf) {
            __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
            return;
        }
        for (int64_t ra = r0; ra < r1; ra += per) {
            int64_t rb = ra + per < r1 ? ra + per : r1;
            const char *col = c->x + (ra * c->cin + gi * cg) * sz;
            int64_t ld = c->cin;
            if (buf) {
                im2row_taps(c, gi, c->ta, c->tb, ra, rb, buf, K);
                col = buf;
                ld = K;
            }
            em_blas_gemm(c->dt, true, false, og, K, rb - ra, 1.0, c->gy + (ra * c->cout + gi * og) * sz, c->cout, col,
                         ld, ra == r0 ? 0.0 : 1.0, dst, K);
        }
        if (buf) em_cpu_free(buf, bytes);
    }
}

/* conv_weight of a channels-last input: im2row and GEMMs, the gradient
 * read channels-last (copied so where it is not), no NCHW copies. The
 * taps go in blocks of at least TAP_COLUMNS columns (a 1x1 kernel: one),
 * each summed over chunks of rows apart, the chunks added pairwise, then
 * written into w's (cout, cg, taps): blocks keep the chunks' sums small, so
 * there can be many chunks (see CHUNK_ROWS). */
#define TAP_COLUMNS 1024
static em_status conv_weight_channels_last(const em_window_geom *g, em_tensor *const *in, em_tensor *dw,
                                           int64_t groups) {
    rows_ctx c;
    rows_init(&c, g, dw->dtype, in[0], dw->shape[0], groups);
    int64_t cg = c.cin / groups, taps = g->k_numel;
    int64_t per_block = (TAP_COLUMNS + cg - 1) / cg; /* taps per block */
    if (per_block > taps) per_block = taps;
    int64_t bnumel = c.cout * per_block * cg;
    /* chunks of about CHUNK_ROWS rows, as many as PARTIAL_BYTES of sums
     * allow, at least MIN_ITEMS items where there are rows for them */
    int64_t most = PARTIAL_BYTES / (bnumel * c.sz + 1) + 1, want = (MIN_ITEMS + groups - 1) / groups;
    int64_t by_rows = c.rows / CHUNK_ROWS;
    if (want < by_rows) want = by_rows;
    c.chunks = want < most ? want : most;
    if (c.chunks > c.rows) c.chunks = c.rows;
    if (c.chunks < 1) c.chunks = 1;
    size_t bytes = (size_t)(c.chunks * bnumel * c.sz);
    em_tensor *x = channels_last_copy(in[0]), *gy = x ? channels_last_copy(in[1]) : NULL;
    c.sums = gy ? em_cpu_alloc(bytes) : NULL;
    em_status st = c.sums ? EM_OK : em_last_status();
    if (st == EM_OK) {
        c.x = em_tensor_data(x);
        c.gy = em_tensor_data(gy);
    }
    char *y = st == EM_OK ? em_tensor_data(dw) : NULL;
    for (c.ta = 0; st == EM_OK && c.ta < taps; c.ta = c.tb) {
        c.tb = c.ta + per_block < taps ? c.ta + per_block : taps;
        int64_t K = (c.tb - c.ta) * cg, n = c.cout * K;
        em_parallel_for_blas(groups * c.chunks, weight_row_items, &c);
        if (c.failed) {
            st = em_error(EM_ERR_NOMEM, "conv_weight: out of memory for the columns");
            break;
        }
        /* the chunks' sums pairwise, in a fixed tree: log2(chunks) additions
         * into each element instead of chunks - 1 */
        for (int64_t step = 1; step < c.chunks; step *= 2)
            for (int64_t q = 0; q + step < c.chunks; q += 2 * step)
                add_into(c.dt, c.sums + q * n * c.sz, c.sums + (q + step) * n * c.sz, n);
        for (int64_t o = 0; o < c.cout; o++)
            for (int64_t t = c.ta; t < c.tb; t++)
                for (int64_t ch = 0; ch < cg; ch++)
                    memcpy(y + ((o * cg + ch) * taps + t) * c.sz, c.sums + (o * K + (t - c.ta) * cg + ch) * c.sz,
                           (size_t)c.sz);
    }
    if (c.sums) em_cpu_free(c.sums, bytes);
    em_tensor_release(x);
    em_tensor_release(gy);
    return st;
}

/* Output positions below which a convolution puts several samples into
 * one GEMM. */
#define SMALL_IMAGE 256

em_status cpu_conv(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    conv_ctx c;
    ctx_init(&c, in[0]->dtype, a, out[0]);
    em_type x = em_tensor_type(in[0]);
    em_status st = em_window_geometry(op, &x, in[1]->shape + 2, a, EM_WIN_FLOOR, NULL, &c.g);
    if (st != EM_OK) return st;
    c.identity = em_window_is_identity(&c.g);
    c.big_c = x.shape[1];
    c.small_c = in[1]->shape[0];
    c.n_samples = x.shape[0];
    em_tensor *ts[3] = {in[0], in[1], n_in > 2 ? in[2] : NULL};
    const char **data[3] = {&c.x, &c.w, &c.b};
    if ((is_channels_last(in[0]) && !em_tensor_is_contiguous(in[0])) ||
        (is_channels_last(out[0]) && !em_tensor_is_contiguous(out[0])))
        return conv_channels_last(&c.g, in, n_in, out[0], conv_mode() != 1);
    if (goes_direct(&c, op)) return run(&c, op, ts, data, 3, 0, NULL);
    c.per = 1;
    if (c.g.out_numel < SMALL_IMAGE && c.n_samples > 1) { /* several samples to a GEMM */
        c.per = (SMALL_IMAGE + c.g.out_numel - 1) / c.g.out_numel;
        if (c.per > c.n_samples) c.per = c.n_samples;
    }
    int64_t items = (c.n_samples + c.per - 1) / c.per * c.groups;
    c.blocks = c.per > 1 ? 1 : blocks_for(items, c.g.out_numel, 64);
    return run(&c, op, ts, data, 3, items * c.blocks, conv_items);
}

em_status cpu_conv_transpose(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    conv_ctx c;
    ctx_init(&c, in[0]->dtype, a, out[0]);
    em_type y = em_tensor_type(out[0]);
    em_status st = em_window_geometry(op, &y, in[1]->shape + 2, a, EM_WIN_TRANSPOSED, in[0]->shape + 2, &c.g);
    if (st != EM_OK) return st;
    c.identity = em_window_is_identity(&c.g);
    c.big_c = y.shape[1];
    c.small_c = in[0]->shape[1];
    int64_t items = y.shape[0] * c.groups;
    c.blocks = blocks_for(items, c.big_c / c.groups, 1);
    em_tensor *ts[3] = {in[0], in[1], n_in > 2 ? in[2] : NULL};
    const char **data[3] = {&c.x, &c.w, &c.b};
    return run(&c, op, ts, data, 3, items * c.blocks, transpose_items);
}


em_status cpu_conv_weight(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    conv_ctx c;
    ctx_init(&c, in[0]->dtype, a, out[0]);
    em_type x = em_tensor_type(in[0]);
    em_status st = em_window_geometry(op, &x, a->shape + 2, a, EM_WIN_TRANSPOSED, in[1]->shape + 2, &c.g);
    if (st != EM_OK) return st;
    c.identity = em_window_is_identity(&c.g);
    c.big_c = x.shape[1];
    c.small_c = a->shape[0];
    c.n_samples = x.shape[0];
    em_tensor *ts[2] = {in[0], in[1]};
    const char **data[2] = {&c.x, &c.gy};
    if (is_channels_last(in[0]) && !em_tensor_is_contiguous(in[0]))
        return conv_weight_channels_last(&c.g, in, out[0], c.groups);
    if (goes_direct(&c, op)) return run(&c, op, ts, data, 2, 0, NULL);
    int64_t cg = c.big_c / c.groups;
    /* Samples in chunks first (each packs the gradient once per sample),
     * as far as partial sums of w of at most PARTIAL_BYTES allow; then
     * blocks of channels (each packs it again). */
    int64_t wbytes = out[0]->numel * (int64_t)c.item, most = PARTIAL_BYTES / (wbytes ? wbytes : 1) + 1;
    int64_t want = (MIN_ITEMS + c.groups - 1) / c.groups;
    c.chunks = want < most ? want : most;
    if (c.chunks > c.n_samples) c.chunks = c.n_samples > 0 ? c.n_samples : 1;
    c.blocks = blocks_for(c.groups * c.chunks, cg, 1);
    int64_t wnumel = out[0]->numel;
    size_t pbytes = (size_t)((c.chunks - 1) * wnumel) * c.item;
    if (pbytes && !(c.partial = em_cpu_alloc(pbytes))) return em_last_status();
    st = run(&c, op, ts, data, 2, c.groups * c.blocks * c.chunks, weight_items);
    for (int64_t q = 1; st == EM_OK && q < c.chunks; q++) /* the chunks' sums, in order */
        add_into(c.dt, c.y, c.partial + (q - 1) * wnumel * (int64_t)c.item, wnumel);
    if (c.partial) em_cpu_free(c.partial, pbytes);
    return st;
}
