/*
 * factory.c - kernels that create data from attributes: full and arange.
 */
#include <math.h>

#include "../kernels.h"
#include "ember/parallel.h"

typedef struct {
    em_tensor *t;
    double value, start, step;
    int64_t istart, istep;
    bool exact_int;
} fill_ctx;

static void full_range(void *arg, int64_t b, int64_t e) {
    const fill_ctx *c = arg;
    void *d = em_tensor_data(c->t);
    switch (c->t->dtype) {
    case EM_DTYPE_F32: {
        float v = (float)c->value;
        for (int64_t i = b; i < e; i++) ((float *)d)[i] = v;
        break;
    }
    case EM_DTYPE_F64:
        for (int64_t i = b; i < e; i++) ((double *)d)[i] = c->value;
        break;
    case EM_DTYPE_I64:
        for (int64_t i = b; i < e; i++) ((int64_t *)d)[i] = c->istart;
        break;
    default:
        for (int64_t i = b; i < e; i++) ((bool *)d)[i] = c->value != 0;
        break;
    }
}

em_status cpu_full(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)in;
    fill_ctx c = {.t = out[0], .value = attrs->value, .istart = attrs->value_i};
    em_parallel_for(out[0]->numel, EM_GRAIN_ELEMENTWISE, full_range, &c);
    return EM_OK;
}

static void arange_range(void *arg, int64_t b, int64_t e) {
    const fill_ctx *c = arg;
    void *d = em_tensor_data(c->t);
    switch (c->t->dtype) {
    case EM_DTYPE_F32:
        for (int64_t i = b; i < e; i++) ((float *)d)[i] = (float)(c->start + (double)i * c->step);
        break;
    case EM_DTYPE_F64:
        for (int64_t i = b; i < e; i++) ((double *)d)[i] = c->start + (double)i * c->step;
        break;
    default: /* int64 */
        for (int64_t i = b; i < e; i++)
            ((int64_t *)d)[i] = c->exact_int ? c->istart + i * c->istep
                                             : (int64_t)floor(c->start + (double)i * c->step);
        break;
    }
}

em_status cpu_arange(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)in;
    fill_ctx c = {.t = out[0], .start = attrs->start, .step = attrs->step};
    c.exact_int = attrs->start == floor(attrs->start) && attrs->step == floor(attrs->step) &&
                  fabs(attrs->start) < 9.0e15 && fabs(attrs->step) < 9.0e15;
    c.istart = c.exact_int ? (int64_t)attrs->start : 0;
    c.istep = c.exact_int ? (int64_t)attrs->step : 0;
    em_parallel_for(out[0]->numel, EM_GRAIN_ELEMENTWISE, arange_range, &c);
    return EM_OK;
}
