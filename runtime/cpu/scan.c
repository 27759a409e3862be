/*
 * scan.c - ops along one dim that keep the shape: cumsum, cumprod, softmax,
 * log_softmax.
 *
 * The tensor is cut into lines along the dim; lines are independent, so the
 * thread pool splits them. Each line is read into a scratch buffer of
 * doubles (floats: exact; 16-bit floats: widened), processed, and written
 * back converted: float results in PyTorch's acc type (double on the CPU),
 * integer cumsum/cumprod in wrapping int64. softmax subtracts the line's max
 * first, so large values do not overflow. Lines that lie side by side (a
 * scan over a dim that is not the innermost) or are short (at most 32 long)
 * go through a buffer 16 lines at a time, each step running across them.
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/parallel.h"
#include "minmax.h"
#include "rowexp.h"

typedef struct {
    em_op op;
    const em_tensor *x;
    em_tensor *y;
    int dim;
    int64_t len;
    int n_outer;
    int64_t oshape[EM_MAX_DIMS], xstride[EM_MAX_DIMS], ystride[EM_MAX_DIMS];
    em_status status;
} scan_ctx;

#define LOAD_F(unused, S, T, sfx)                                                                  \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = 0; i < n; i++) buf[i] = sc_cast_##sfx##_f64(((const T *)p)[i * st]);      \
        break;
#define LOAD_I(unused, S, T, sfx)                                                                  \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = 0; i < n; i++) ibuf[i] = (int64_t)((const T *)p)[i * st];                 \
        break;
#define STORE_F(unused, S, T, sfx)                                                                 \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = 0; i < n; i++) ((T *)q)[i * st] = sc_cast_f64_##sfx(buf[i]);              \
        break;
#define STORE_I(unused, S, T, sfx)                                                                 \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = 0; i < n; i++) ((T *)q)[i * st] = sc_cast_i64_##sfx(ibuf[i]);             \
        break;

static void line(const scan_ctx *c, const char *p, int64_t st, char *q, int64_t ost, double *buf,
                 int64_t *ibuf) {
    int64_t n = c->len;
    bool fl = em_dtype_is_float(c->x->dtype);
    if (fl) {
        switch (c->x->dtype) {
            EM_FOR_DTYPES_FLOAT(LOAD_F, _)
            EM_FOR_DTYPES_HALF(LOAD_F, _)
        default: break;
        }
    } else {
        switch (c->x->dtype) {
            EM_FOR_DTYPES_INTBOOL(LOAD_I, _)
        default: break;
        }
    }
    switch (c->op) {
    case EM_OP_CUMSUM:
        if (fl)
            for (int64_t i = 1; i < n; i++) buf[i] += buf[i - 1];
        else
            for (int64_t i = 1; i < n; i++) ibuf[i] = (int64_t)((uint64_t)ibuf[i] + (uint64_t)ibuf[i - 1]);
        break;
    case EM_OP_CUMPROD:
        if (fl)
            for (int64_t i = 1; i < n; i++) buf[i] *= buf[i - 1];
        else
            for (int64_t i = 1; i < n; i++) ibuf[i] = (int64_t)((uint64_t)ibuf[i] * (uint64_t)ibuf[i - 1]);
        break;
    default: { /* softmax, log_softmax */
        double lanes[EM_FOLD_VF64], m = -INFINITY;
        int64_t done = em_fold_vminmax_f64(buf, n, false, false, lanes);
        for (int k = 0; k < EM_FOLD_VF64 && done; k++) m = em_fold_max_step(m, lanes[k], false);
        for (int64_t i = done; i < n; i++) m = em_fold_max_step(m, buf[i], false);
        if (isinf(m)) m = m > 0 ? m : 0.0; /* all -inf: exp(-inf - 0) = 0 */
        /* exp in float for float32 and the 16-bit floats (ops_math.h's
         * vectorised exp, as PyTorch computes these in float), libm's for
         * float64; the sum in double */
        bool f64 = c->x->dtype == EM_DTYPE_F64, soft = c->op == EM_OP_SOFTMAX;
        double *e = soft ? buf : (double *)ibuf; /* (log_softmax still needs x) */
        if (f64)
            for (int64_t i = 0; i < n; i++) e[i] = exp(buf[i] - m);
        else
            for (int64_t i = 0; i < n; i++) e[i] = (double)sc_exp_f32((float)(buf[i] - m));
        double l[8] = {0}, s = 0; /* 8 lanes in a fixed order: vectorises, stays deterministic */
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) l[k] += e[i + k];
        for (; i < n; i++) s += e[i];
        s += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        if (soft) {
            for (int64_t i = 0; i < n; i++) buf[i] /= s;
        } else {
            double ls = log(s); /* (x - max) - log(sum): exact near 0, as PyTorch */
            for (int64_t i = 0; i < n; i++) buf[i] = (buf[i] - m) - ls;
        }
    }
    }
    n = c->len;
    st = ost;
    if (em_dtype_is_float(c->y->dtype)) {
        switch (c->y->dtype) {
            EM_FOR_DTYPES_FLOAT(STORE_F, _)
            EM_FOR_DTYPES_HALF(STORE_F, _)
        default: break;
        }
    } else {
        switch (c->y->dtype) {
            EM_FOR_DTYPES_INTBOOL(STORE_I, _)
        default: break;
        }
    }
}

/* softmax or log_softmax of one contiguous float32 row, straight from x
 * into y, as PyTorch's vectorised kernel computes it: the max, then exp(x -
 * max) stored and summed in float lanes (in a fixed order: no dependence on
 * threads), then y times 1 / sum (log_softmax: x - max - log(sum)). Three
 * passes over a row that stays in cache; the general path (line())
 * widens every value to double and divides. */
static void softmax_row_f32(bool soft, const float *restrict x, float *restrict y, int64_t n) {
    float m = row_max_f32(x, n);
    if (isinf(m)) m = m > 0 ? m : 0.0f; /* all -inf: exp(-inf - 0) = 0 */
    float sum = row_sumexp_f32(x, soft ? y : NULL, n, m);
    if (soft) {
        float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    } else {
        float ls = (float)log((double)sum); /* (x - max) - log(sum): exact near 0 */
        for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) - ls;
    }
}

static void lines_task(void *arg, int64_t b, int64_t e) {
    scan_ctx *c = arg;
    bool fast = (c->op == EM_OP_SOFTMAX || c->op == EM_OP_LOG_SOFTMAX) && c->x->dtype == EM_DTYPE_F32 &&
                c->y->dtype == EM_DTYPE_F32 && (c->len <= 1 || (c->x->strides[c->dim] == 1 && c->y->strides[c->dim] == 1));
    double *buf = em_malloc((size_t)(c->len ? c->len : 1) * sizeof *buf);
    int64_t *ibuf = em_malloc((size_t)(c->len ? c->len : 1) * sizeof *ibuf);
    if (!buf || !ibuf) {
        c->status = EM_ERR_NOMEM; /* a racy write of one value: any writer says the same */
        em_free(buf);
        em_free(ibuf);
        return;
    }
    size_t xi = em_dtype_size(c->x->dtype), yi = em_dtype_size(c->y->dtype);
    for (int64_t l = b; l < e; l++) {
        int64_t xo = 0, yo = 0, rem = l;
        for (int d = c->n_outer - 1; d >= 0; d--) {
            int64_t k = rem % c->oshape[d];
            rem /= c->oshape[d];
            xo += k * c->xstride[d];
            yo += k * c->ystride[d];
        }
        const char *p = (const char *)em_tensor_data(c->x) + xo * (int64_t)xi;
        char *q = (char *)em_tensor_data(c->y) + yo * (int64_t)yi;
        if (fast)
            softmax_row_f32(c->op == EM_OP_SOFTMAX, (const float *)p, (float *)q, c->len);
        else
            line(c, p, c->x->strides[c->dim], q, c->y->strides[c->dim], buf, ibuf);
    }
    em_free(buf);
    em_free(ibuf);
}

/* ---- columns: the scan dim is not the innermost, which is contiguous in
 * x (softmax over dim 0, or over the last dim of a transposed view; y's
 * lines may lie anywhere). Lines W apart in memory would each read one
 * element per cache line; instead W adjacent lines go through one buffer of
 * len rows x W columns, and every step runs across the W columns. ---- */
#define W 16

typedef struct {
    const scan_ctx *c;
    int64_t inner, blocks_per_outer; /* the innermost dim, in blocks of W */
} cols_ctx;

#define LOAD_W(unused, S, T, sfx)                                                                  \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t r = 0; r < n; r++)                                                            \
            for (int64_t w = 0; w < nw; w++)                                                       \
                buf[r * W + w] = sc_cast_##sfx##_f64(((const T *)p)[r * st + w * wst]);            \
        break;
#define LOAD_WI(unused, S, T, sfx)                                                                 \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t r = 0; r < n; r++)                                                            \
            for (int64_t w = 0; w < nw; w++) ibuf[r * W + w] = (int64_t)((const T *)p)[r * st + w * wst]; \
        break;
#define STORE_W(unused, S, T, sfx)                                                                 \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t r = 0; r < n; r++)                                                            \
            for (int64_t w = 0; w < nw; w++)                                                       \
                ((T *)q)[r * ost + w * owst] = sc_cast_f64_##sfx(buf[r * W + w]);                  \
        break;
#define STORE_WI(unused, S, T, sfx)                                                                \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t r = 0; r < n; r++)                                                            \
            for (int64_t w = 0; w < nw; w++)                                                       \
                ((T *)q)[r * ost + w * owst] = sc_cast_i64_##sfx(ibuf[r * W + w]);                 \
        break;

/* nw lines: line w's element r at p[r * st + w * wst] (q: ost, owst). */
static void block(const scan_ctx *c, const char *p, int64_t st, int64_t wst, char *q, int64_t ost,
                  int64_t owst, int64_t nw, double *buf, int64_t *ibuf) {
    int64_t n = c->len;
    bool fl = em_dtype_is_float(c->x->dtype);
    switch (c->x->dtype) {
        EM_FOR_DTYPES_FLOAT(LOAD_W, _)
        EM_FOR_DTYPES_HALF(LOAD_W, _)
        EM_FOR_DTYPES_INTBOOL(LOAD_WI, _)
    default: break;
    }
    if (c->op == EM_OP_CUMSUM || c->op == EM_OP_CUMPROD) {
        bool sum = c->op == EM_OP_CUMSUM;
        for (int64_t r = 1; r < n; r++)
            for (int64_t w = 0; w < W; w++) {
                if (fl)
                    buf[r * W + w] = sum ? buf[r * W + w] + buf[(r - 1) * W + w] : buf[r * W + w] * buf[(r - 1) * W + w];
                else
                    ibuf[r * W + w] = (int64_t)(sum ? (uint64_t)ibuf[r * W + w] + (uint64_t)ibuf[(r - 1) * W + w]
                                                    : (uint64_t)ibuf[r * W + w] * (uint64_t)ibuf[(r - 1) * W + w]);
            }
    } else { /* softmax, log_softmax: as line() does, across W columns */
        double m[W], sum[W] = {0};
        bool f64 = c->x->dtype == EM_DTYPE_F64, soft = c->op == EM_OP_SOFTMAX;
        for (int64_t w = 0; w < W; w++) m[w] = -INFINITY;
        for (int64_t r = 0; r < n; r++)
            for (int64_t w = 0; w < W; w++) {
                double v = buf[r * W + w], t = v > m[w] ? v : m[w];
                m[w] = v != v ? v : m[w] != m[w] ? m[w] : t; /* NaN wins */
            }
        for (int64_t w = 0; w < W; w++)
            if (isinf(m[w])) m[w] = m[w] > 0 ? m[w] : 0.0;
        double *e = soft ? buf : (double *)ibuf;
        /* the exps, then the sums: two loops without branches vectorise
         * across the W lines (one, with the dtype test inside, did not) */
        if (f64)
            for (int64_t r = 0; r < n; r++)
                for (int64_t w = 0; w < W; w++) e[r * W + w] = exp(buf[r * W + w] - m[w]);
        else
            for (int64_t r = 0; r < n; r++)
                for (int64_t w = 0; w < W; w++)
                    e[r * W + w] = (double)sc_exp_f32((float)(buf[r * W + w] - m[w]));
        for (int64_t r = 0; r < n; r++)
            for (int64_t w = 0; w < W; w++) sum[w] += e[r * W + w];
        double sub[W];
        for (int64_t w = 0; w < W; w++) sub[w] = log(sum[w]);
        for (int64_t r = 0; r < n; r++) /* (log_softmax: (x - max) - log(sum), as PyTorch) */
            for (int64_t w = 0; w < W; w++)
                buf[r * W + w] = soft ? buf[r * W + w] / sum[w] : (buf[r * W + w] - m[w]) - sub[w];
    }
    if (em_dtype_is_float(c->y->dtype)) {
        switch (c->y->dtype) {
            EM_FOR_DTYPES_FLOAT(STORE_W, _)
            EM_FOR_DTYPES_HALF(STORE_W, _)
        default: break;
        }
    } else {
        switch (c->y->dtype) {
            EM_FOR_DTYPES_INTBOOL(STORE_WI, _)
        default: break;
        }
    }
}

static void cols_task(void *arg, int64_t b, int64_t e) {
    const cols_ctx *k = arg;
    scan_ctx *c = (scan_ctx *)k->c;
    size_t n = (size_t)(c->len ? c->len : 1) * W;
    double *buf = em_malloc(n * sizeof *buf);
    int64_t *ibuf = em_malloc(n * sizeof *ibuf);
    if (!buf || !ibuf) {
        c->status = EM_ERR_NOMEM;
        em_free(buf);
        em_free(ibuf);
        return;
    }
    memset(buf, 0, n * sizeof *buf); /* columns past nw compute on zeros, unused */
    memset(ibuf, 0, n * sizeof *ibuf);
    size_t xi = em_dtype_size(c->x->dtype), yi = em_dtype_size(c->y->dtype);
    int last = c->n_outer - 1; /* the innermost dim among the lines' dims */
    for (int64_t t = b; t < e; t++) {
        int64_t ol = t / k->blocks_per_outer, w0 = (t % k->blocks_per_outer) * W;
        int64_t nw = k->inner - w0 < W ? k->inner - w0 : W;
        int64_t xo = w0 * c->xstride[last], yo = w0 * c->ystride[last], rem = ol;
        for (int d = last - 1; d >= 0; d--) {
            int64_t i = rem % c->oshape[d];
            rem /= c->oshape[d];
            xo += i * c->xstride[d];
            yo += i * c->ystride[d];
        }
        block(c, (const char *)em_tensor_data(c->x) + xo * (int64_t)xi, c->x->strides[c->dim], 1,
              (char *)em_tensor_data(c->y) + yo * (int64_t)yi, c->y->strides[c->dim], c->ystride[last], nw,
              buf, ibuf);
    }
    em_free(buf);
    em_free(ibuf);
}

/* ---- short rows: x and y contiguous, the scan dim innermost and at most
 * SHORT long (log_softmax over 10 classes). One line at a time spends its
 * time on per-line overhead and scalar exps; W lines go through block() at
 * once instead, every step running across them. ---- */
#define SHORT 32

static void short_rows_task(void *arg, int64_t b, int64_t e) {
    scan_ctx *c = arg;
    size_t n = (size_t)c->len * W;
    double *buf = em_calloc(n, sizeof *buf);
    int64_t *ibuf = em_calloc(n, sizeof *ibuf);
    if (!buf || !ibuf) {
        c->status = EM_ERR_NOMEM;
        em_free(buf);
        em_free(ibuf);
        return;
    }
    int64_t lines = c->x->numel / c->len;
    size_t xi = em_dtype_size(c->x->dtype), yi = em_dtype_size(c->y->dtype);
    for (int64_t t = b; t < e; t++) {
        int64_t l0 = t * W, nw = lines - l0 < W ? lines - l0 : W;
        block(c, (const char *)em_tensor_data(c->x) + l0 * c->len * (int64_t)xi, 1, c->len,
              (char *)em_tensor_data(c->y) + l0 * c->len * (int64_t)yi, 1, c->len, nw, buf, ibuf);
    }
    em_free(buf);
    em_free(ibuf);
}

em_status cpu_scan(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    scan_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.x = in[0];
    c.y = out[0];
    if (c.x->ndim == 0 || c.x->numel == 0) { /* one element or none */
        if (c.x->numel == 0) return EM_OK;
        c.len = 1;
        c.n_outer = 0;
        c.dim = 0;
        double buf[1];
        int64_t ibuf[1];
        em_tensor x1 = *c.x, y1 = *c.y; /* view them as 1-d for line() */
        x1.ndim = y1.ndim = 1;
        x1.shape[0] = y1.shape[0] = 1;
        x1.strides[0] = y1.strides[0] = 1;
        c.x = &x1;
        c.y = &y1;
        line(&c, em_tensor_data(&x1), 1, em_tensor_data(&y1), 1, buf, ibuf);
        return EM_OK;
    }
    c.dim = (int)attrs->dims[0];
    c.len = c.x->shape[c.dim];
    int64_t lines = 1;
    for (int d = 0; d < c.x->ndim; d++) {
        if (d == c.dim) continue;
        c.oshape[c.n_outer] = c.x->shape[d];
        c.xstride[c.n_outer] = c.x->strides[d];
        c.ystride[c.n_outer] = c.y->strides[d];
        c.n_outer++;
        lines *= c.x->shape[d];
    }
    int last = c.n_outer - 1;
    if (c.dim == c.x->ndim - 1 && c.len <= SHORT && lines > 1 && em_tensor_is_contiguous(c.x) &&
        em_tensor_is_contiguous(c.y)) {
        int64_t tiles = (lines + W - 1) / W;
        em_parallel_for(tiles, EM_GRAIN_ELEMENTWISE / (c.len * W) + 1, short_rows_task, &c);
        return c.status ? em_error(c.status, "%s: out of memory", em_op_name(op)) : EM_OK;
    }
    /* columns wherever x's lines lie side by side, whatever y's layout: a
     * contiguous result of a transposed input (softmax(x.t(), -1)) took
     * the lines path before, reading one element per cache line */
    if (last >= 0 && c.xstride[last] == 1 && c.oshape[last] >= W && c.x->strides[c.dim] != 1) {
        cols_ctx k = {&c, c.oshape[last], (c.oshape[last] + W - 1) / W};
        int64_t blocks = (lines / k.inner) * k.blocks_per_outer;
        em_parallel_for(blocks, EM_GRAIN_ELEMENTWISE / ((c.len ? c.len : 1) * W) + 1, cols_task, &k);
    } else {
        em_parallel_for(lines, EM_GRAIN_ELEMENTWISE / (c.len ? c.len : 1) + 1, lines_task, &c);
    }
    return c.status ? em_error(c.status, "%s: out of memory", em_op_name(op)) : EM_OK;
}
