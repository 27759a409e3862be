/*
 * scan.c - ops along one dim that keep the shape: cumsum, cumprod, softmax,
 * log_softmax.
 *
 * The tensor is cut into lines along the dim; lines are independent, so the
 * thread pool splits them. Each line is read into a scratch buffer of
 * doubles (floats: exact; 16-bit floats: widened), processed, and written
 * back converted: float results in PyTorch's acc type (double on the CPU),
 * integer cumsum/cumprod in wrapping int64. softmax subtracts the line's max
 * first, so large values do not overflow.
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/parallel.h"
#include "minmax.h"

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
        double lanes[8], m = -INFINITY;
        int64_t done = vminmax_f64(buf, n, false, false, lanes);
        for (int k = 0; k < 8 && done; k++) m = lanes[k] != lanes[k] || lanes[k] > m ? lanes[k] : m;
        for (int64_t i = done; i < n; i++) m = buf[i] != buf[i] || buf[i] > m ? buf[i] : m;
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
            double ls = m + log(s);
            for (int64_t i = 0; i < n; i++) buf[i] -= ls;
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

static void lines_task(void *arg, int64_t b, int64_t e) {
    scan_ctx *c = arg;
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
        line(c, (const char *)em_tensor_data(c->x) + xo * (int64_t)xi, c->x->strides[c->dim],
             (char *)em_tensor_data(c->y) + yo * (int64_t)yi, c->y->strides[c->dim], buf, ibuf);
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
    em_parallel_for(lines, EM_GRAIN_ELEMENTWISE / (c.len ? c.len : 1) + 1, lines_task, &c);
    return c.status ? em_error(c.status, "%s: out of memory", em_op_name(op)) : EM_OK;
}
