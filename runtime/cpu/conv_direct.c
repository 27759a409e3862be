/*
 * conv_direct.c - float32 convolutions at stride 1 without im2col's columns.
 *
 * im2col copies the input once per tap (9 times for a 3x3 kernel) so that a
 * GEMM can read it, and the GEMM packs those columns again. Here a piece of
 * one sample's input is copied once per tap of the kernel's last spatial
 * dim only, into "row-shifted" copies:
 *
 *   xs[c][kd][kw][r][j] = x[c][plane + dd kd - pd][r - ph][j + dw kw - pw]
 *                         (0 in the padding), j < the output's width,
 *
 * so that, for output positions numbered densely (q = row * width + j, the
 * output's own layout), tap (kd, kh, kw) of position q is element
 * q + dh kh width of copy (kd, kw): one run of VL outputs reads one run of
 * VL inputs per tap, across row ends too. A convolution is then a GEMM
 * whose columns are never written ("implicit GEMM"), with no position
 * computed that is not an output, for images of any width:
 *
 *   conv:         y[o, q] = sum over c, taps of w[o, c, tap] xs[c, tap][q]
 *     register tile: MR output channels x NV vectors of positions; the
 *     weights, packed [channel][tap][MR], broadcast.
 *   conv_weight:  dw[o, c, tap] = sum over q of gy[o, q] xs[c, tap][q]
 *     register tile: MO output channels x NT (channel, tap) pairs of VL
 *     lanes each, summed across lanes once per piece.
 *
 * The input planes are cut into pieces of whole output rows (the copies of
 * a piece stay in L2); a piece is one item of work, or, with few of them,
 * several: a block of output channels each. Every output element is one
 * sum in one fixed order (channels, then taps), however the work is cut,
 * so the bits do not depend on the thread count. conv_weight sums each
 * chunk of samples apart and the chunks in order, as conv.c's GEMM path.
 *
 * Vectors are vec.h's (16 floats with AVX-512, 8 with AVX2, 4 otherwise);
 * this file is built with -ffp-contract=fast so that their multiply-adds
 * become FMAs.
 */
#include <string.h>

#include "conv_direct.h"
#include "vec.h"
#include "ember/alloc.h"
#include "ember/parallel.h"

#if VL == 16
#define MR 8 /* conv's tile: MR x NV accumulators of the 32 registers */
#define NV 3
#define MO 4 /* conv_weight's: MO x NT */
#define NT 6
#elif VL == 8
#define MR 4
#define NV 3
#define MO 2
#define NT 6
#else
#define MR 4
#define NV 2
#define MO 2
#define NT 4
#endif
#define TW (NV * VL)        /* positions per conv tile */
#define PIECE_BYTES (512 << 10) /* the most a piece's copies take */
#define MIN_ITEMS 8
#define MIN_BLOCK_TERMS 128 /* see em_conv_block_channels */

/* The sum of v's lanes by halving (a fixed order, log2 VL dependent adds
 * instead of VL). */
typedef float vf4 __attribute__((vector_size(4 * sizeof(float))));
static inline float hsum(vf v) {
#if VL == 16
    typedef float vf8 __attribute__((vector_size(8 * sizeof(float))));
    vf8 h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
            __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    vf4 f = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#elif VL == 8
    vf4 f = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
#else
    vf4 f = v;
#endif
    return (f[0] + f[2]) + (f[1] + f[3]);
}

/* ---- the shape of the work ---- */

typedef struct {
    const em_window_geom *g;
    int64_t groups, cg, og, cout; /* channels per group in and out; out in all */
    int64_t kk, kd, kw;           /* taps in all; taps of dims 0 and 2 */
    int64_t cblock;               /* conv: input channels a tile sums in registers at once */
    int64_t width, rows, planes;  /* the output's spatial sizes */
    int64_t piece_rows, pieces;   /* output rows per piece, pieces per plane */
    int64_t copy_rows;            /* input rows a piece's copies hold */
    int64_t cstride;              /* floats per channel in the copies */
    int64_t *off;                 /* per tap: its copy's offset within a channel's */
    int64_t *pair_off;            /* conv_weight: per (channel, tap): its copy's offset */
    const float *x, *w, *b, *gy;
    float *y, *wp, *partial;
    int64_t osplit, chunks, n;    /* blocks of output channels per piece; sample chunks */
    int64_t batch;                /* conv_weight: units whose copies a tile sums over at once */
    int failed;
} plan;

/* Blocks of output channels (of ob_n) each of `items` pieces is cut into,
 * for MIN_ITEMS items in all where there are fewer. */
static int64_t split_for(int64_t items, int64_t ob_n) {
    if (items >= MIN_ITEMS) return 1;
    int64_t want = (MIN_ITEMS + items - 1) / items;
    return want < ob_n ? want : ob_n;
}

/* Sizes the pieces: whole output rows, as many as PIECE_BYTES of copies
 * hold; with `units` (samples x groups) > 0, also enough pieces for
 * MIN_ITEMS items, halving them down to a few tiles each. */
static void size_pieces(plan *p, int64_t units) {
    const em_window_geom *g = p->g;
    int64_t halo = g->d[1] * (g->k[1] - 1), per_row = p->cg * p->kd * p->kw * p->width * (int64_t)sizeof(float);
    int64_t fit = PIECE_BYTES / (per_row ? per_row : 1) - halo;
    p->piece_rows = fit < 1 ? 1 : fit < p->rows ? fit : p->rows;
    int64_t pieces = (p->rows + p->piece_rows - 1) / p->piece_rows;
    while (units > 0 && units * pieces * p->planes < MIN_ITEMS && p->piece_rows > 1 &&
           p->piece_rows * p->width >= 4 * TW) {
        p->piece_rows = (p->piece_rows + 1) / 2;
        pieces = (p->rows + p->piece_rows - 1) / p->piece_rows;
    }
    p->pieces = pieces;
    p->copy_rows = p->piece_rows + halo;
    p->cstride = p->kd * p->kw * p->copy_rows * p->width;
}

/* Channels per block of conv's sum (see conv_tile): sqrt(cg/kk), so that
 * the sums within blocks and of the blocks have about as many terms each
 * (the error of a serial float sum grows with its length), but at least
 * MIN_BLOCK_TERMS terms: blocks of 36 terms cost a 64-channel 3x3 step 10%
 * (a flush per 36 multiply-adds of the tile), blocks of 128 about 1%, and
 * already bring the error under PyTorch's (tests/python/
 * test_float32_accuracy.py). */
int64_t em_conv_block_channels(int64_t cg, int64_t kk) {
    int64_t b = 1;
    while ((b + 1) * (b + 1) * kk <= cg) b++;
    int64_t least = (MIN_BLOCK_TERMS + kk - 1) / kk;
    return b < least ? least : b;
}

static void init_plan(plan *p, const em_window_geom *g, int64_t groups, int64_t cin, int64_t cout) {
    memset(p, 0, sizeof *p);
    p->g = g;
    p->groups = groups;
    p->cg = cin / groups;
    p->og = cout / groups;
    p->cout = cout;
    p->kk = g->k_numel;
    p->kd = g->k[0];
    p->kw = g->k[2];
    p->cblock = em_conv_block_channels(p->cg, p->kk);
    p->planes = g->out[0];
    p->rows = g->out[1];
    p->width = g->out[2];
}

/* The offsets of each tap's copy, in the weights' tap order (d, h, w). */
static bool make_offsets(plan *p) {
    const em_window_geom *g = p->g;
    if (!(p->off = em_cpu_alloc((size_t)p->kk * sizeof(int64_t)))) return false;
    int64_t t = 0;
    for (int64_t a = 0; a < g->k[0]; a++)
        for (int64_t h = 0; h < g->k[1]; h++)
            for (int64_t w = 0; w < g->k[2]; w++)
                p->off[t++] = ((a * p->kw + w) * p->copy_rows + h * g->d[1]) * p->width;
    return true;
}

/* Fills the row-shifted copies of sample-group input xg (cg planes of
 * in_numel) for output plane `plane`, output rows [r0, r0 + piece rows). */
static void copy_piece(const plan *p, const float *xg, int64_t plane, int64_t r0, float *xs) {
    const em_window_geom *g = p->g;
    int64_t W = p->width, R = p->copy_rows, in_w = g->in[2], in_h = g->in[1], in_d = g->in[0];
    for (int64_t c = 0; c < p->cg; c++) {
        const float *xc = xg + c * g->in_numel;
        for (int64_t a = 0; a < p->kd; a++) {
            int64_t z = plane + a * g->d[0] - g->p[0];
            for (int64_t kw = 0; kw < p->kw; kw++) {
                float *dst = xs + c * p->cstride + (a * p->kw + kw) * R * W;
                int64_t shift = kw * g->d[2] - g->p[2]; /* output column j reads input column j + shift */
                int64_t j0 = shift < 0 ? -shift : 0, j1 = in_w - shift < W ? in_w - shift : W;
                if (j1 < j0) j1 = j0;
                for (int64_t r = 0; r < R; r++, dst += W) {
                    int64_t row = r0 + r - g->p[1];
                    if (z < 0 || z >= in_d || row < 0 || row >= in_h || j0 >= j1) {
                        memset(dst, 0, (size_t)W * sizeof(float));
                        continue;
                    }
                    const float *src = xc + (z * in_h + row) * in_w + shift;
                    if (j0) memset(dst, 0, (size_t)j0 * sizeof(float));
                    memcpy(dst + j0, src + j0, (size_t)(j1 - j0) * sizeof(float));
                    if (j1 < W) memset(dst + j1, 0, (size_t)(W - j1) * sizeof(float));
                }
            }
        }
    }
}

/* Bytes of a piece's copies, with room for a tile read past the end. */
static size_t piece_bytes(const plan *p) { return (size_t)(p->cg * p->cstride + TW) * sizeof(float); }

/* ---- conv ---- */

/* Adds (first: stores) a tile's sums acc[i][0..cols) to row i of y, rows
 * ldy apart: the running total of the channel blocks summed so far. */
static inline void flush_row(float *y, const vf *acc, int nv, int64_t cols, bool first) {
    if (cols == (int64_t)nv * VL) {
        for (int j = 0; j < nv; j++) vstore(y + j * VL, first ? acc[j] : vload(y + j * VL) + acc[j]);
        return;
    }
    float tmp[TW];
    for (int j = 0; j < nv; j++) vstore(tmp + j * VL, acc[j]);
    if (first) {
        memcpy(y, tmp, (size_t)cols * sizeof(float));
        return;
    }
    for (int64_t j = 0; j < cols; j++) y[j] += tmp[j];
}

/* MR output channels x TW positions from x (a piece's copies at position
 * q0) and wp (packed [c][tap][MR]): into y (rows ldy apart), the first
 * `rows` rows and `cols` columns.
 *
 * The sum over channels x taps runs in blocks of p->cblock channels, each
 * summed in registers from zero and then added to y, as a GEMM blocks its
 * inner dimension: one serial sum of 512 x 9 terms has 5-10x the float32
 * error of PyTorch's; blocks of 128 terms or more (em_conv_block_channels) bring
 * it under PyTorch's, for a load and a store of the tile per block. */
static void conv_tile(const plan *p, const float *x, const float *wp, const float *bias, int rows, int64_t cols,
                      float *y, int64_t ldy) {
    const int64_t *off = p->off, kk = p->kk;
    for (int64_t c0 = 0; c0 < p->cg; c0 += p->cblock) {
        int64_t c1 = c0 + p->cblock < p->cg ? c0 + p->cblock : p->cg;
        vf acc[MR][NV];
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NV; j++) acc[i][j] = (vf){0} + (c0 == 0 && bias && i < rows ? bias[i] : 0.0f);
        for (int64_t c = c0; c < c1; c++, x += p->cstride) {
            for (int64_t t = 0; t < kk; t++, wp += MR) {
                const float *xt = x + off[t];
                vf xv[NV];
                for (int j = 0; j < NV; j++) xv[j] = vload(xt + j * VL);
                for (int i = 0; i < MR; i++) {
                    float wi = wp[i];
                    for (int j = 0; j < NV; j++) acc[i][j] += wi * xv[j];
                }
            }
        }
        for (int i = 0; i < rows; i++) flush_row(y + i * ldy, acc[i], NV, cols, c0 == 0);
    }
}

/* The rest of a run, under TW positions (all of a 4x4 image's 16, which
 * the wide tile would compute 48 for): 2 MR output channels, the packed
 * blocks wp0 and wp1 (`two` false: wp0's only), x one vector of positions,
 * `cols` <= VL of them kept. */
static inline __attribute__((always_inline)) void narrow_tile(const plan *p, const float *x, const float *wp0,
                                                              const float *wp1, bool two, const float *bias,
                                                              int rows, int64_t cols, float *y, int64_t ldy) {
    const int64_t *off = p->off, kk = p->kk;
    for (int64_t c0 = 0; c0 < p->cg; c0 += p->cblock) { /* blocks as conv_tile's */
        int64_t c1 = c0 + p->cblock < p->cg ? c0 + p->cblock : p->cg;
        vf acc[2 * MR];
        for (int i = 0; i < 2 * MR; i++) acc[i] = (vf){0} + (c0 == 0 && bias && i < rows ? bias[i] : 0.0f);
        for (int64_t c = c0; c < c1; c++, x += p->cstride)
            for (int64_t t = 0; t < kk; t++, wp0 += MR, wp1 += MR) {
                vf xv = vload_reg(x + off[t]);
                for (int i = 0; i < MR; i++) acc[i] += wp0[i] * xv;
                if (two)
                    for (int i = 0; i < MR; i++) acc[MR + i] += wp1[i] * xv;
            }
        for (int i = 0; i < rows; i++) flush_row(y + i * ldy, &acc[i], 1, cols, c0 == 0);
    }
}

static void narrow_tile_1(const plan *p, const float *x, const float *wp0, const float *bias, int rows,
                          int64_t cols, float *y, int64_t ldy) {
    narrow_tile(p, x, wp0, wp0, false, bias, rows, cols, y, ldy);
}

static void narrow_tile_2(const plan *p, const float *x, const float *wp0, const float *wp1, const float *bias,
                          int rows, int64_t cols, float *y, int64_t ldy) {
    narrow_tile(p, x, wp0, wp1, true, bias, rows, cols, y, ldy);
}

/* The weights of group gi, MR output channels at a time (zero past og):
 * wp[(ob * cg + c) * kk + tap][i] = w[gi og + ob MR + i, c, tap]. */
static void pack_weights(const plan *p, int64_t gi, float *wp) {
    int64_t ob_n = (p->og + MR - 1) / MR, ck = p->cg * p->kk;
    for (int64_t ob = 0; ob < ob_n; ob++)
        for (int64_t e = 0; e < ck; e++)
            for (int i = 0; i < MR; i++) {
                int64_t o = ob * MR + i;
                wp[(ob * ck + e) * MR + i] = o < p->og ? p->w[(gi * p->og + o) * ck + e] : 0.0f;
            }
}

/* Item: (sample, group, plane, piece, block of output channels). */
static void conv_items(void *arg, int64_t i0, int64_t i1) {
    plan *p = arg;
    const em_window_geom *g = p->g;
    size_t bytes = piece_bytes(p);
    float *xs = em_cpu_alloc(bytes);
    if (!xs) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    memset(xs + p->cg * p->cstride, 0, TW * sizeof(float));
    int64_t ob_n = (p->og + MR - 1) / MR, ck = p->cg * p->kk, L = g->out_numel;
    int64_t last = -1; /* the piece xs holds */
    for (int64_t i = i0; i < i1; i++) {
        int64_t s = i % p->osplit, piece = i / p->osplit;
        int64_t k = piece % p->pieces, plane = piece / p->pieces % p->planes;
        int64_t gi = piece / (p->pieces * p->planes) % p->groups, n = piece / (p->pieces * p->planes * p->groups);
        int64_t r0 = k * p->piece_rows, r1 = r0 + p->piece_rows < p->rows ? r0 + p->piece_rows : p->rows;
        if (piece != last) {
            copy_piece(p, p->x + (n * p->groups + gi) * p->cg * g->in_numel, plane, r0, xs);
            last = piece;
        }
        int64_t len = (r1 - r0) * p->width, start = (plane * p->rows + r0) * p->width;
        int64_t b0 = ob_n * s / p->osplit, b1 = ob_n * (s + 1) / p->osplit;
        int64_t wide = len / TW * TW; /* wide tiles up to here, narrow ones after */
        for (int64_t ob = b0; ob < b1; ob += wide < len ? 2 : 1) {
            int64_t o = gi * p->og + ob * MR, left = p->og - ob * MR;
            float *y = p->y + (n * p->cout + o) * L + start;
            const float *wp = p->wp + (gi * ob_n + ob) * ck * MR, *bias = p->b ? p->b + o : NULL;
            for (int64_t q = 0; q < wide; q += TW)
                conv_tile(p, xs + q, wp, bias, left < MR ? (int)left : MR, TW, y + q, L);
            if (ob + 1 < b1 && wide < len)
                for (int64_t q = 0; q < wide; q += TW)
                    conv_tile(p, xs + q, wp + ck * MR, bias ? bias + MR : NULL, left - MR < MR ? (int)(left - MR) : MR,
                              TW, y + MR * L + q, L);
            for (int64_t q = wide; q < len; q += VL) {
                int64_t cols = len - q < VL ? len - q : VL;
                if (ob + 1 < b1)
                    narrow_tile_2(p, xs + q, wp, wp + ck * MR, bias, left < 2 * MR ? (int)left : 2 * MR, cols,
                                  y + q, L);
                else
                    narrow_tile_1(p, xs + q, wp, bias, left < MR ? (int)left : MR, cols, y + q, L);
            }
        }
    }
    em_cpu_free(xs, bytes);
}

em_status em_conv_direct(const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout,
                         const float *x, const float *w, const float *b, float *y) {
    plan p;
    init_plan(&p, g, groups, cin, cout);
    p.x = x, p.w = w, p.b = b, p.y = y;
    size_pieces(&p, n * groups);
    int64_t ob_n = (p.og + MR - 1) / MR, items = n * groups * p.planes * p.pieces;
    p.osplit = split_for(items, ob_n);
    size_t wbytes = (size_t)(groups * ob_n * p.cg * p.kk * MR) * sizeof(float);
    if (!make_offsets(&p)) return em_last_status();
    if (!(p.wp = em_cpu_alloc(wbytes))) {
        em_cpu_free(p.off, (size_t)p.kk * sizeof(int64_t));
        return em_last_status();
    }
    for (int64_t gi = 0; gi < groups; gi++) pack_weights(&p, gi, p.wp + gi * ob_n * p.cg * p.kk * MR);
    em_parallel_for_heavy(items * p.osplit, conv_items, &p);
    em_cpu_free(p.wp, wbytes);
    em_cpu_free(p.off, (size_t)p.kk * sizeof(int64_t));
    return p.failed ? em_error(EM_ERR_NOMEM, "conv: out of memory for the input's copies") : EM_OK;
}

/* ---- conv_weight ---- */

/* One run of conv_weight's sum: output positions [start, start + len) of
 * one sample and plane, gy the sample's gradient, xs the copies of its
 * piece. */
typedef struct {
    const float *gy, *xs;
    int64_t start, len;
} run_of;

/* dw[i][e] += sum over the runs and their positions q of
 * gy[o0 + i][q] xs[e][q], for `rows` output channels from o0 (rows L apart
 * in gy) and `cols` (channel, tap) pairs from e0 (dw rows ck apart). The
 * tile is always MO x NT: missing rows and pairs repeat the first, and are
 * dropped. Lanes are summed once per call, so a call takes as many runs as
 * fit (small images are short runs). */
static void weight_tile(const plan *p, const run_of *runs, int n_runs, int64_t o0, int rows, int64_t e0, int cols,
                        float *dw, int64_t ck) {
    vf acc[MO][NT];
    for (int i = 0; i < MO; i++)
        for (int j = 0; j < NT; j++) acc[i][j] = (vf){0};
    int64_t L = p->g->out_numel;
    for (int u = 0; u < n_runs; u++) {
        const float *gy[MO], *xj[NT];
        for (int i = 0; i < MO; i++) gy[i] = runs[u].gy + (o0 + (i < rows ? i : 0)) * L + runs[u].start;
        for (int j = 0; j < NT; j++) {
            xj[j] = runs[u].xs + p->pair_off[e0 + (j < cols ? j : 0)];
        }
        int64_t q = 0, len = runs[u].len;
        for (; q + VL <= len; q += VL) {
            vf gv[MO]; /* held; each pair's input streamed through one register */
            for (int i = 0; i < MO; i++) gv[i] = vload_reg(gy[i] + q);
            for (int j = 0; j < NT; j++) {
                vf xv = vload_reg(xj[j] + q);
                for (int i = 0; i < MO; i++) acc[i][j] += gv[i] * xv;
            }
        }
        if (q < len) { /* the last part vector: copied out, zero-padded */
            float gt[MO][VL] = {{0}}, xt[VL] = {0};
            for (int i = 0; i < MO; i++) memcpy(gt[i], gy[i] + q, (size_t)(len - q) * sizeof(float));
            for (int j = 0; j < NT; j++) {
                memcpy(xt, xj[j] + q, (size_t)(len - q) * sizeof(float));
                vf xv = vload(xt);
                for (int i = 0; i < MO; i++) acc[i][j] += vload(gt[i]) * xv;
            }
        }
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dw[i * ck + e0 + j] += hsum(acc[i][j]);
}

/* The (sample, plane, piece) units of samples [n0, n1), in order: unit u
 * is sample n0 + u / per_sample. */
static run_of unit_run(const plan *p, int64_t gi, int64_t n0, int64_t u, int64_t *plane, int64_t *r0) {
    int64_t per_sample = p->planes * p->pieces, n = n0 + u / per_sample, k = u % p->pieces;
    *plane = u / p->pieces % p->planes;
    *r0 = k * p->piece_rows;
    int64_t r1 = *r0 + p->piece_rows < p->rows ? *r0 + p->piece_rows : p->rows;
    run_of r = {p->gy + (n * p->cout + gi * p->og) * p->g->out_numel, NULL, (*plane * p->rows + *r0) * p->width,
                (r1 - *r0) * p->width};
    return r;
}

/* Item: (group, chunk of samples, block of output channels); the chunk's
 * sum goes to dw (chunk 0) or its partial. The chunk's units go `batch`
 * at a time: their copies side by side, each tile summed over them all. */
static void weight_items(void *arg, int64_t i0, int64_t i1) {
    plan *p = arg;
    const em_window_geom *g = p->g;
    size_t one = piece_bytes(p), bytes = one * (size_t)p->batch;
    float *buf = em_cpu_alloc(bytes);
    run_of *runs = buf ? em_cpu_alloc((size_t)p->batch * sizeof *runs) : NULL;
    if (!runs) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        if (buf) em_cpu_free(buf, bytes);
        return;
    }
    int64_t ck = p->cg * p->kk, wnumel = p->cout * ck, ob_n = (p->og + MO - 1) / MO;
    int64_t stride = (int64_t)(one / sizeof(float));
    for (int64_t b = 0; b < p->batch; b++) memset(buf + b * stride + p->cg * p->cstride, 0, TW * sizeof(float));
    for (int64_t i = i0; i < i1; i++) {
        int64_t s = i % p->osplit, q = i / p->osplit % p->chunks, gi = i / (p->osplit * p->chunks);
        int64_t n0 = p->n * q / p->chunks, n1 = p->n * (q + 1) / p->chunks;
        int64_t b0 = ob_n * s / p->osplit, b1 = ob_n * (s + 1) / p->osplit;
        float *dw = (q == 0 ? p->y : p->partial + (q - 1) * wnumel) + gi * p->og * ck;
        for (int64_t o = b0 * MO; o < p->og && o < b1 * MO; o++) memset(dw + o * ck, 0, (size_t)ck * sizeof(float));
        int64_t units = (n1 - n0) * p->planes * p->pieces;
        for (int64_t u0 = 0; u0 < units; u0 += p->batch) {
            int n_runs = (int)(units - u0 < p->batch ? units - u0 : p->batch);
            for (int u = 0; u < n_runs; u++) {
                int64_t plane, r0, n = n0 + (u0 + u) / (p->planes * p->pieces);
                runs[u] = unit_run(p, gi, n0, u0 + u, &plane, &r0);
                runs[u].xs = buf + u * stride;
                copy_piece(p, p->x + (n * p->groups + gi) * p->cg * g->in_numel, plane, r0, buf + u * stride);
            }
            for (int64_t ob = b0; ob < b1; ob++) {
                int rows = (int)(p->og - ob * MO < MO ? p->og - ob * MO : MO);
                for (int64_t e0 = 0; e0 < ck; e0 += NT)
                    weight_tile(p, runs, n_runs, ob * MO, rows, e0, (int)(ck - e0 < NT ? ck - e0 : NT),
                                dw + ob * MO * ck, ck);
            }
        }
    }
    em_cpu_free(runs, (size_t)p->batch * sizeof *runs);
    em_cpu_free(buf, bytes);
}

/* Sizes conv_weight's work (see weight_items). */
static void plan_weight(plan *p, int64_t n) {
    p->n = n;
    size_pieces(p, 0); /* pieces for L2 only: the samples are the work's cut */
    int64_t wnumel = p->cout * p->cg * p->kk, ob_n = (p->og + MO - 1) / MO;
    /* Chunks of samples, each summed apart (a partial of w's size), as far
     * as 16 MiB of partials allow; then blocks of output channels. */
    int64_t most = ((int64_t)16 << 20) / (wnumel * (int64_t)sizeof(float)) + 1;
    int64_t want = (MIN_ITEMS + p->groups - 1) / p->groups;
    p->chunks = want < most ? want : most;
    if (p->chunks > n) p->chunks = n > 0 ? n : 1;
    int64_t items = p->groups * p->chunks;
    p->osplit = split_for(items, ob_n);
    /* Units (sample, plane, piece) a tile takes at once: runs of 1024
     * positions or more, as far as PIECE_BYTES of copies allow. */
    int64_t run = p->piece_rows * p->width, per_chunk = (n + p->chunks - 1) / p->chunks * p->planes * p->pieces;
    p->batch = (1024 + run - 1) / run;
    int64_t fit = (int64_t)(PIECE_BYTES / piece_bytes(p));
    if (p->batch > fit) p->batch = fit > 1 ? fit : 1;
    if (p->batch > per_chunk) p->batch = per_chunk > 1 ? per_chunk : 1;
}

/* Positions a conv_weight tile sums over before its lanes are summed, at
 * least: below that the per-tile work (the sum across lanes, the pointers)
 * outweighs the loop, and im2col + GEMM, which keeps its sums in lanes
 * across positions, is faster (measured: 28x28 images of 128 channels take
 * twice the GEMM's time, 32x32 of 32 channels a third). */
#define MIN_WEIGHT_RUN 512
#define FEW_PAIRS 32

bool em_conv_direct_fits(bool weight, em_dtype dt, const em_window_geom *g, int64_t n, int64_t groups, int64_t cin,
                         int64_t cout) {
    if (dt != EM_DTYPE_F32) return false;
    for (int i = 0; i < W3; i++)
        if (g->s[i] != 1) return false;
    /* Each tap reads a run of VL outputs: rows narrower than that still
     * vectorise (runs cross row ends), but a sample under one vector of
     * outputs, or a single input channel with few taps, keeps the GEMM. */
    if (g->out_numel < VL || cin / groups * g->k_numel < 4) return false;
    if (!weight) return true;
    plan p;
    init_plan(&p, g, groups, cin, cout);
    plan_weight(&p, n);
    /* (Few (channel, tap) pairs, as in a first layer's 1 or 3 channels, make
     * a GEMM too narrow to be fast: direct whatever the runs.) */
    return p.batch * p.piece_rows * p.width >= MIN_WEIGHT_RUN || p.cg * p.kk <= FEW_PAIRS;
}

em_status em_conv_direct_weight(const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout,
                                const float *x, const float *gy, float *dw) {
    plan p;
    init_plan(&p, g, groups, cin, cout);
    p.x = x, p.gy = gy, p.y = dw;
    plan_weight(&p, n);
    int64_t wnumel = cout * p.cg * p.kk, ck = p.cg * p.kk, items = groups * p.chunks;
    size_t pbytes = (size_t)((p.chunks - 1) * wnumel) * sizeof(float), obytes = (size_t)ck * sizeof(int64_t);
    if (pbytes && !(p.partial = em_cpu_alloc(pbytes))) return em_last_status();
    if (!make_offsets(&p) || !(p.pair_off = em_cpu_alloc(obytes))) {
        if (p.off) em_cpu_free(p.off, (size_t)p.kk * sizeof(int64_t));
        if (p.partial) em_cpu_free(p.partial, pbytes);
        return em_last_status();
    }
    for (int64_t e = 0; e < ck; e++) p.pair_off[e] = e / p.kk * p.cstride + p.off[e % p.kk];
    em_parallel_for_heavy(items * p.osplit, weight_items, &p);
    for (int64_t q = 1; q < p.chunks; q++) /* the chunks' sums, in order */
        for (int64_t i = 0; i < wnumel; i++) dw[i] += p.partial[(q - 1) * wnumel + i];
    if (p.partial) em_cpu_free(p.partial, pbytes);
    em_cpu_free(p.pair_off, obytes);
    em_cpu_free(p.off, (size_t)p.kk * sizeof(int64_t));
    return p.failed ? em_error(EM_ERR_NOMEM, "conv_weight: out of memory for the input's copies") : EM_OK;
}
