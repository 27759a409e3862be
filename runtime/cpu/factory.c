/*
 * factory.c - kernels that create data from attributes: full and arange.
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/ops_math.h"
#include "ember/parallel.h"

em_status cpu_full(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)in;
    /* The fill value converted once (exactly for integers), then broadcast. */
    em_dtype dt = out[0]->dtype;
    em_tensor *v = em_dtype_is_float(dt) || dt == EM_DTYPE_BOOL ? em_tensor_scalar(attrs->value, dt)
                                                                 : em_tensor_scalar_i64(attrs->value_i, dt);
    if (!v) return em_last_status();
    em_status st = em_copy_into(out[0], v);
    em_tensor_release(v);
    return st;
}

typedef struct {
    em_tensor *t;
    double start, step;
    int64_t istart, istep;
    bool exact_int;
} arange_ctx;

#define ARANGE_FLOAT(unused, S, T, sfx)                                                            \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = b; i < e; i++)                                                            \
            ((T *)d)[i] = sc_cast_f64_##sfx(c->start + (double)i * c->step);                      \
        break;
#define ARANGE_INT(unused, S, T, sfx)                                                              \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = b; i < e; i++)                                                            \
            ((T *)d)[i] = c->exact_int ? (T)(c->istart + i * c->istep)                             \
                                       : sc_cast_f64_##sfx(floor(c->start + (double)i * c->step)); \
        break;

static void arange_range(void *arg, int64_t b, int64_t e) {
    const arange_ctx *c = arg;
    void *d = em_tensor_data(c->t);
    switch (c->t->dtype) {
        EM_FOR_DTYPES_FLOAT(ARANGE_FLOAT, _)
        EM_FOR_DTYPES_HALF(ARANGE_FLOAT, _)
        EM_FOR_DTYPES_INT(ARANGE_INT, _)
    default: break;
    }
}

em_status cpu_arange(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)in;
    arange_ctx c = {.t = out[0], .start = attrs->start, .step = attrs->step};
    c.exact_int = attrs->start == floor(attrs->start) && attrs->step == floor(attrs->step) &&
                  fabs(attrs->start) < 9.0e15 && fabs(attrs->step) < 9.0e15;
    c.istart = c.exact_int ? (int64_t)attrs->start : 0;
    c.istep = c.exact_int ? (int64_t)attrs->step : 0;
    em_parallel_for(out[0]->numel, EM_GRAIN_ELEMENTWISE, arange_range, &c);
    return EM_OK;
}

em_status cpu_empty(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                    em_tensor **out) {
    return EM_OK; /* uninitialised, like torch.empty */
}

/* linspace: start + i * step with step = (end - start) / (n - 1), the last
 * value exactly end (PyTorch computes the second half from the end too). */
typedef struct {
    em_tensor *t;
    double start, end, step;
    int64_t n;
} lin_ctx;

#define LINSPACE(unused, S, T, sfx)                                                                \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = b; i < e; i++)                                                            \
            ((T *)d)[i] = sc_cast_f64_##sfx(i < half ? c->start + (double)i * c->step              \
                                                     : c->end - (double)(c->n - 1 - i) * c->step); \
        break;

static void linspace_range(void *arg, int64_t b, int64_t e) {
    const lin_ctx *c = arg;
    void *d = em_tensor_data(c->t);
    int64_t half = c->n == 1 ? 1 : c->n / 2; /* one step: start, as PyTorch */
    switch (c->t->dtype) {
        EM_FOR_DTYPES_STORED(LINSPACE, _)
    default: break;
    }
}

em_status cpu_linspace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                       em_tensor **out) {
    lin_ctx c = {out[0], attrs->start, attrs->end, 0.0, out[0]->numel};
    c.step = c.n > 1 ? (attrs->end - attrs->start) / (double)(c.n - 1) : 0.0;
    em_parallel_for(c.n, EM_GRAIN_ELEMENTWISE, linspace_range, &c);
    return EM_OK;
}

/* eye: zeros, then ones on the diagonal. */
em_status cpu_eye(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                  em_tensor **out) {
    em_tensor *y = out[0];
    size_t item = em_dtype_size(y->dtype);
    memset(em_tensor_data(y), 0, (size_t)y->numel * item);
    em_tensor *one = em_tensor_scalar(1.0, y->dtype);
    if (!one) return em_last_status();
    int64_t n = y->shape[0] < y->shape[1] ? y->shape[0] : y->shape[1];
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)em_tensor_data(y) + (size_t)(i * y->shape[1] + i) * item, em_tensor_data(one),
               item);
    em_tensor_release(one);
    return EM_OK;
}
