/*
 * conv_last.c - float32 convolution of a channels-last input into a
 * channels-last result, without columns.
 *
 * Channels-last, a position's channels lie side by side, and so do a
 * result position's output channels: the natural register tile is P
 * positions x OV vectors of output channels. For each (tap, input channel)
 * it loads OV vectors of weights (packed [group][block][tap][channel][OB],
 * OB = OV x VL output channels, zero past the group's) and broadcasts one
 * input value per position:
 *
 *   y[q, o] = sum over taps t, channels c of x[origin(q) + off(t), c] w[o, c, t]
 *
 * Positions are numbered across rows, planes and samples (q < n x out
 * positions); a tile takes P of them, each with its own pointer, so tiles
 * never waste lanes at row ends; the last tile of all overlaps the one
 * before and writes only the positions that one does not (another thread
 * may be adding that tile's channel blocks into y). Padding is a
 * zero border around a copy of the input, made once per call, so the tile
 * never tests bounds; without padding the input is read in place.
 *
 * The sum runs in blocks of em_conv_block_channels channels, each summed
 * in registers from zero and added to y, as conv_direct.c's: a float32
 * error at PyTorch's level. Each output element is one sum in one fixed
 * order however the work is cut, so the bits do not depend on the thread
 * count. Built with -ffp-contract=fast, as conv_direct.c.
 */
#include <string.h>

#include "conv_direct.h"
#include "conv_last.h"
#include "ember/alloc.h"
#include "ember/parallel.h"
#include "vec.h"

/* Tiles: OV vectors of output channels x P positions, OV x P accumulators
 * and OV weight vectors in the vector registers (32 with AVX-512, 16
 * otherwise). */
#if VL == 16
#define MAX_OV 4
#define P_FOR(ov) ((ov) == 4 ? 6 : (ov) == 3 ? 8 : 10)
#else
#define MAX_OV 2
#define P_FOR(ov) ((ov) == 2 ? 6 : 10)
#endif
#define MAX_P 10
#define TILES_PER_ITEM 32
#define MIN_ITEMS 8

typedef struct {
    const em_window_geom *g;
    int64_t groups, cg, og, cin, cout;
    int64_t kk, cblock;          /* taps; channels per block of the sum */
    int64_t ext[3];              /* spatial sizes of the (padded) input read */
    int64_t *off;                /* per tap: its offset from a window's origin, in floats */
    int ov, p;                   /* the tile */
    int64_t ob_n, positions;     /* blocks of OB output channels per group; n x out positions */
    int64_t tiles, tile_blocks;  /* tiles of P positions; items of them per (group, block) */
    const float *x, *wp, *bp;    /* input (padded), packed weights and bias */
    float *y;
} lplan;

/* Adds (first: stores) acc to y's first `lanes` channels. */
static inline void flush(float *y, const vf *acc, int ov, int lanes, bool first) {
    for (int v = 0; v < ov; v++, lanes -= VL, y += VL) {
        if (lanes >= VL) {
            vstore(y, first ? acc[v] : vload(y) + acc[v]);
            continue;
        }
        if (lanes <= 0) return;
        float tmp[VL];
        vstore(tmp, acc[v]);
        for (int j = 0; j < lanes; j++) y[j] = first ? tmp[j] : y[j] + tmp[j];
        return;
    }
}

/* One tile: positions xp[0..P) (window origins, at the group's channels)
 * into yp[skip..P) (at the block's channels), `lanes` channels of them. */
static inline __attribute__((always_inline)) void tile(const lplan *lp, const int ov, const int np,
                                                       const float *const *xp, const float *wp, const float *bias,
                                                       float *const *yp, int lanes, int skip) {
    const int64_t ob = (int64_t)ov * VL, cg = lp->cg;
    for (int64_t c0 = 0; c0 < cg; c0 += lp->cblock) {
        int64_t c1 = c0 + lp->cblock < cg ? c0 + lp->cblock : cg;
        vf acc[MAX_P][MAX_OV];
        for (int v = 0; v < ov; v++) {
            vf init = c0 == 0 && bias ? vload(bias + v * VL) : (vf){0};
            for (int p = 0; p < np; p++) acc[p][v] = init;
        }
        for (int64_t t = 0; t < lp->kk; t++) {
            const float *w = wp + (t * cg + c0) * ob;
            const float *xt[MAX_P];
            for (int p = 0; p < np; p++) xt[p] = xp[p] + lp->off[t];
            for (int64_t c = c0; c < c1; c++, w += ob) {
                vf wv[MAX_OV];
                for (int v = 0; v < ov; v++) wv[v] = vload_reg(w + v * VL);
                for (int p = 0; p < np; p++) {
                    float xb = xt[p][c]; /* (a scalar times a vector: one broadcast, where (vf){0} + xb adds) */
                    for (int v = 0; v < ov; v++) acc[p][v] += xb * wv[v];
                }
            }
        }
        for (int p = skip; p < np; p++) flush(yp[p], acc[p], ov, lanes, c0 == 0);
    }
}

#if VL == 16
static void tile_4(const lplan *lp, const float *const *xp, const float *wp, const float *b, float *const *yp,
                   int lanes, int skip) {
    tile(lp, 4, P_FOR(4), xp, wp, b, yp, lanes, skip);
}
static void tile_3(const lplan *lp, const float *const *xp, const float *wp, const float *b, float *const *yp,
                   int lanes, int skip) {
    tile(lp, 3, P_FOR(3), xp, wp, b, yp, lanes, skip);
}
#endif
static void tile_2(const lplan *lp, const float *const *xp, const float *wp, const float *b, float *const *yp,
                   int lanes, int skip) {
    tile(lp, 2, P_FOR(2), xp, wp, b, yp, lanes, skip);
}
static void tile_1(const lplan *lp, const float *const *xp, const float *wp, const float *b, float *const *yp,
                   int lanes, int skip) {
    tile(lp, 1, P_FOR(1), xp, wp, b, yp, lanes, skip);
}

typedef void (*tile_fn)(const lplan *, const float *const *, const float *, const float *, float *const *, int,
                        int);

static tile_fn tile_for(int ov) {
#if VL == 16
    if (ov == 4) return tile_4;
    if (ov == 3) return tile_3;
#endif
    return ov == 2 ? tile_2 : tile_1;
}

/* Item: (run of tiles, group, block of output channels), the blocks
 * innermost: a thread's consecutive items read the same run of the input,
 * from cache (blocks outermost read a batch of 32 128-channel images from
 * memory once per block: a stride-2 layer 1.5x slower). */
static void last_items(void *arg, int64_t i0, int64_t i1) {
    const lplan *lp = arg;
    const em_window_geom *g = lp->g;
    tile_fn fn = tile_for(lp->ov);
    int64_t ob = (int64_t)lp->ov * VL, L = g->out_numel;
    for (int64_t i = i0; i < i1; i++) {
        int64_t blk = i % lp->ob_n, gi = i / lp->ob_n % lp->groups, k = i / (lp->ob_n * lp->groups);
        int64_t t0 = lp->tiles * k / lp->tile_blocks, t1 = lp->tiles * (k + 1) / lp->tile_blocks;
        int64_t o = gi * lp->og + blk * ob, left = lp->og - blk * ob;
        int lanes = left < ob ? (int)left : (int)ob;
        const float *wp = lp->wp + (gi * lp->ob_n + blk) * lp->kk * lp->cg * ob;
        const float *bias = lp->bp ? lp->bp + (gi * lp->ob_n + blk) * ob : NULL;
        for (int64_t t = t0; t < t1; t++) {
            int64_t q0 = t * lp->p, skip = 0;
            if (q0 + lp->p > lp->positions) { /* the last tile overlaps the one before */
                skip = q0 - (lp->positions - lp->p);
                q0 -= skip;
            }
            const float *xp[MAX_P];
            float *yp[MAX_P];
            /* the first position's coordinates by division, the others by
             * stepping (divisions for each cost a quarter of a small tile) */
            int64_t n = q0 / L, l = q0 % L;
            int64_t o2 = l % g->out[2], o1 = l / g->out[2] % g->out[1], a = l / (g->out[2] * g->out[1]);
            for (int p = 0; p < lp->p; p++) {
                int64_t at = ((n * lp->ext[0] + a * g->s[0]) * lp->ext[1] + o1 * g->s[1]) * lp->ext[2] + o2 * g->s[2];
                xp[p] = lp->x + at * lp->cin + gi * lp->cg;
                yp[p] = lp->y + (q0 + p) * lp->cout + o;
                if (++o2 < g->out[2]) continue;
                o2 = 0;
                if (++o1 < g->out[1]) continue;
                o1 = 0;
                if (++a < g->out[0]) continue;
                a = 0;
                n++;
            }
            fn(lp, xp, wp, bias, yp, lanes, (int)skip);
        }
    }
}

/* ---- the padded input ---- */

typedef struct {
    const em_window_geom *g;
    int64_t ext[3], cin;
    const float *x;
    float *xp;
} pad_ctx;

/* Rows (sample, plane, row) of the padded copy: zero, with the input's
 * row inside. */
static void pad_rows(void *arg, int64_t r0, int64_t r1) {
    const pad_ctx *c = arg;
    const em_window_geom *g = c->g;
    int64_t row_len = c->ext[2] * c->cin;
    for (int64_t r = r0; r < r1; r++) {
        int64_t e1 = r % c->ext[1], e0 = r / c->ext[1] % c->ext[0], n = r / (c->ext[1] * c->ext[0]);
        int64_t i0 = e0 - g->p[0], i1 = e1 - g->p[1];
        float *dst = c->xp + r * row_len;
        if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1]) {
            memset(dst, 0, (size_t)row_len * sizeof(float));
            continue;
        }
        int64_t j0 = g->p[2], j1 = g->p[2] + g->in[2] < c->ext[2] ? g->p[2] + g->in[2] : c->ext[2];
        const float *src = c->x + ((n * g->in[0] + i0) * g->in[1] + i1) * g->in[2] * c->cin;
        memset(dst, 0, (size_t)(j0 * c->cin) * sizeof(float));
        if (j1 > j0) memcpy(dst + j0 * c->cin, src, (size_t)((j1 - j0) * c->cin) * sizeof(float));
        if (j1 < c->ext[2]) memset(dst + j1 * c->cin, 0, (size_t)((c->ext[2] - j1) * c->cin) * sizeof(float));
    }
}

bool em_conv_last_fits(em_dtype dt, const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout) {
    (void)cin;
    return dt == EM_DTYPE_F32 && cout / groups >= VL && n * g->out_numel >= MAX_P;
}

/* Packs w (cout, cg, kk) as [group][block][tap][channel][OB] and the bias
 * as [group][block][OB], zero past each group's og. */
static void pack(const lplan *lp, const float *w, const float *b, float *wp, float *bp) {
    int64_t ob = (int64_t)lp->ov * VL;
    for (int64_t gi = 0; gi < lp->groups; gi++)
        for (int64_t blk = 0; blk < lp->ob_n; blk++) {
            float *dst = wp + (gi * lp->ob_n + blk) * lp->kk * lp->cg * ob;
            for (int64_t t = 0; t < lp->kk; t++)
                for (int64_t c = 0; c < lp->cg; c++)
                    for (int64_t j = 0; j < ob; j++) {
                        int64_t o = blk * ob + j;
                        *dst++ = o < lp->og ? w[((gi * lp->og + o) * lp->cg + c) * lp->kk + t] : 0.0f;
                    }
            for (int64_t j = 0; bp && j < ob; j++) {
                int64_t o = blk * ob + j;
                bp[(gi * lp->ob_n + blk) * ob + j] = o < lp->og ? b[gi * lp->og + o] : 0.0f;
            }
        }
}

em_status em_conv_last(const em_window_geom *g, int64_t n, int64_t groups, int64_t cin, int64_t cout, const float *x,
                       const float *w, const float *b, float *y) {
    lplan lp;
    memset(&lp, 0, sizeof lp);
    lp.g = g;
    lp.groups = groups;
    lp.cin = cin;
    lp.cout = cout;
    lp.cg = cin / groups;
    lp.og = cout / groups;
    lp.kk = g->k_numel;
    lp.cblock = em_conv_block_channels(lp.cg, lp.kk);
    /* blocks of output channels: as few as MAX_OV vectors allow, as even as
     * can be (80 channels: two blocks of 3 vectors, not 4 and 1) */
    int64_t vecs = (lp.og + VL - 1) / VL;
    lp.ob_n = (vecs + MAX_OV - 1) / MAX_OV;
    lp.ov = (int)((vecs + lp.ob_n - 1) / lp.ob_n);
    lp.p = P_FOR(lp.ov);
    lp.positions = n * g->out_numel;
    lp.tiles = (lp.positions + lp.p - 1) / lp.p;
    int64_t units = groups * lp.ob_n, want = (MIN_ITEMS + units - 1) / units;
    lp.tile_blocks = (lp.tiles + TILES_PER_ITEM - 1) / TILES_PER_ITEM;
    if (lp.tile_blocks < want) lp.tile_blocks = want < lp.tiles ? want : lp.tiles;
    bool padded = false;
    for (int d = 0; d < 3; d++) {
        lp.ext[d] = (g->out[d] - 1) * g->s[d] + (g->k[d] - 1) * g->d[d] + 1;
        padded |= g->p[d] != 0;
    }
    if (!padded) memcpy(lp.ext, g->in, sizeof lp.ext); /* (reads stop short of the ends, where they do) */
    int64_t ob = (int64_t)lp.ov * VL;
    size_t wbytes = (size_t)(groups * lp.ob_n * lp.kk * lp.cg * ob) * sizeof(float);
    size_t bbytes = b ? (size_t)(groups * lp.ob_n * ob) * sizeof(float) : 0;
    size_t obytes = (size_t)lp.kk * sizeof(int64_t);
    size_t xbytes = padded ? (size_t)(n * lp.ext[0] * lp.ext[1] * lp.ext[2] * cin) * sizeof(float) : 0;
    float *wp = em_cpu_alloc(wbytes), *bp = bbytes ? em_cpu_alloc(bbytes) : NULL;
    int64_t *off = em_cpu_alloc(obytes);
    float *xp = xbytes ? em_cpu_alloc(xbytes) : NULL;
    em_status st = EM_OK;
    if (!wp || !off || (bbytes && !bp) || (xbytes && !xp)) {
        st = em_error(EM_ERR_NOMEM, "conv: out of memory for the packed weights or the padded input");
    } else {
        pack(&lp, w, b, wp, bp);
        int64_t t = 0;
        for (int64_t a = 0; a < g->k[0]; a++)
            for (int64_t h = 0; h < g->k[1]; h++)
                for (int64_t v = 0; v < g->k[2]; v++)
                    off[t++] = ((a * g->d[0] * lp.ext[1] + h * g->d[1]) * lp.ext[2] + v * g->d[2]) * cin;
        if (xp) {
            pad_ctx pc = {g, {lp.ext[0], lp.ext[1], lp.ext[2]}, cin, x, xp};
            em_parallel_for(n * lp.ext[0] * lp.ext[1], 16, pad_rows, &pc);
        }
        lp.off = off;
        lp.x = xp ? xp : x;
        lp.wp = wp;
        lp.bp = bp;
        lp.y = y;
        em_parallel_for_heavy(units * lp.tile_blocks, last_items, &lp);
    }
    if (wp) em_cpu_free(wp, wbytes);
    if (bp) em_cpu_free(bp, bbytes);
    if (off) em_cpu_free(off, obytes);
    if (xp) em_cpu_free(xp, xbytes);
    return st;
}
