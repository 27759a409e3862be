/*
 * optim.c - the fused optimizer updates of optim.h.
 *
 * Each update is one pass over the elements of a parameter and its state,
 * split across the thread pool; the arithmetic follows torch.optim's
 * single-tensor code step by step (same order, same dtype), so the same
 * gradients give the same parameters to rounding. float32 and float64
 * parameters; the loops are written once as a macro over the element type.
 */
#include <math.h>
#include <string.h>

#include "ember/optim.h"
#include "ember/parallel.h"
#include "ember/types.h"
#include "../device.h"

#define GRAIN 16384

static em_status check(const char *what, const em_tensor *p, const em_tensor *t, const char *role) {
    if (!t) return em_error(EM_ERR_VALUE, "%s: missing %s tensor", what, role);
    if (t->dtype != p->dtype || !em_shape_eq(t->shape, t->ndim, p->shape, p->ndim)) {
        char a[128], b[128];
        em_shape_str(p->shape, p->ndim, a, sizeof a);
        em_shape_str(t->shape, t->ndim, b, sizeof b);
        return em_error(EM_ERR_SHAPE, "%s: the %s (%s %s) does not match its parameter (%s %s)", what,
                        role, em_dtype_long_name(t->dtype), b, em_dtype_long_name(p->dtype), a);
    }
    if (!em_device_eq(t->device, p->device)) {
        char a[16], b[16];
        return em_error(EM_ERR_DEVICE, "%s: the %s is on %s, its parameter on %s", what, role,
                        em_device_str(t->device, a), em_device_str(p->device, b));
    }
    if (!em_tensor_is_contiguous(t))
        return em_error(EM_ERR_VALUE, "%s: the %s must be contiguous", what, role);
    return EM_OK;
}

static em_status check_param(const char *what, const em_tensor *p) {
    if (p->dtype != EM_DTYPE_F32 && p->dtype != EM_DTYPE_F64)
        return em_error(EM_ERR_DTYPE, "%s: parameters must be float32 or float64, got %s", what,
                        em_dtype_long_name(p->dtype));
    if (!em_tensor_is_contiguous(p)) return em_error(EM_ERR_VALUE, "%s: parameters must be contiguous", what);
    if (p->device.type != EM_DEVICE_CPU && p->device.type != EM_DEVICE_META && !em_device_has_fused_steps(p->device)) {
        char d[16];
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: no fused step on %s yet", what, em_device_str(p->device, d));
    }
    return EM_OK;
}

bool em_device_has_fused_steps(em_device d) {
    if (d.type == EM_DEVICE_CPU || d.type == EM_DEVICE_META) return true;
    const em_device_impl *impl = em_device_impl_of(d);
    return impl && impl->optim;
}

/* The fused steps of the device the parameters are on (NULL: the CPU's
 * loops here, also for meta, whose step is its checks); an error when
 * they are on more than one device. */
static em_status device_steps(const char *what, em_tensor *const *params, int n, const em_device_optim **out) {
    *out = NULL;
    for (int i = 1; i < n; i++)
        if (!em_device_eq(params[i]->device, params[0]->device)) {
            char a[16], b[16];
            return em_error(EM_ERR_DEVICE, "%s: the parameters are on %s and %s: one fused step takes one device's",
                            what, em_device_str(params[0]->device, a), em_device_str(params[i]->device, b));
        }
    if (n > 0 && params[0]->device.type != EM_DEVICE_CPU && params[0]->device.type != EM_DEVICE_META)
        *out = em_device_impl_of(params[0]->device)->optim;
    return EM_OK;
}

#define PTR(t, T) ((T *)((char *)(t)->storage->data + (t)->offset * (int64_t)sizeof(T)))

/* ---- SGD ---- */

typedef struct {
    em_tensor *p, *g, *buf;
    bool first;
    const em_sgd_options *o;
} sgd_job;

/* Optional state (momentum buffers, amsgrad's maxima, ...) gets a loop of
 * its own rather than a test inside one loop: gcc if-converts such a test
 * into masked loads from the NULL pointer, which cost a microcode assist
 * per vector (30x slower). */
#define SGD_LOOP(T)                                                                                \
    static void sgd_##T(void *arg, int64_t b, int64_t e) {                                        \
        const sgd_job *j = arg;                                                                    \
        const em_sgd_options *o = j->o;                                                            \
        T *restrict p = PTR(j->p, T);                                                              \
        const T *restrict g = PTR(j->g, T);                                                        \
        const T lr = (T)o->lr, wd = (T)o->weight_decay, mom = (T)o->momentum;                     \
        const T damp = (T)(1 - o->dampening), sign = o->maximize ? (T)-1 : (T)1;                  \
        const bool decay = o->weight_decay != 0, nesterov = o->nesterov;                          \
        if (!j->buf) {                                                                             \
            for (int64_t i = b; i < e; i++) {                                                      \
                T d = sign * g[i];                                                                 \
                if (decay) d = d + wd * p[i];                                                      \
                p[i] = p[i] - lr * d;                                                              \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        T *restrict buf = PTR(j->buf, T);                                                          \
        for (int64_t i = b; i < e; i++) {                                                          \
            T d = sign * g[i];                                                                     \
            if (decay) d = d + wd * p[i];                                                          \
            T m = j->first ? d : buf[i] * mom + damp * d;                                          \
            buf[i] = m;                                                                            \
            p[i] = p[i] - lr * (nesterov ? d + mom * m : m);                                       \
        }                                                                                          \
    }
SGD_LOOP(float)
SGD_LOOP(double)

static em_status cpu_sgd(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *momentum_buf,
                         const bool *first, int n, const em_sgd_options *o) {
    for (int i = 0; i < n; i++) {
        sgd_job j = {params[i], grads[i], o->momentum != 0 ? momentum_buf[i] : NULL, first && first[i], o};
        if (em_tensor_has_data(params[i])) /* (a meta parameter's step is its checks) */
            em_parallel_for(params[i]->numel, GRAIN, params[i]->dtype == EM_DTYPE_F32 ? sgd_float : sgd_double, &j);
        __atomic_fetch_add(&params[i]->storage->version, 1, __ATOMIC_RELAXED);
    }
    return EM_OK;
}

em_status em_sgd_step(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *momentum_buf,
                      const bool *first, int n, const em_sgd_options *o) {
    for (int i = 0; i < n; i++) {
        em_status st = check_param("sgd", params[i]);
        if (st == EM_OK) st = check("sgd", params[i], grads[i], "gradient");
        if (st == EM_OK && o->momentum != 0) st = check("sgd", params[i], momentum_buf[i], "momentum buffer");
        if (st != EM_OK) return st;
    }
    const em_device_optim *dev;
    em_status st = device_steps("sgd", params, n, &dev);
    if (st != EM_OK || dev) return st != EM_OK ? st : dev->sgd(params, grads, momentum_buf, first, n, o);
    return cpu_sgd(params, grads, momentum_buf, first, n, o);
}

/* ---- Adam, AdamW ---- */

typedef struct {
    em_tensor *p, *g, *m, *v, *vmax;
    double step_size, bias2_sqrt;
    const em_adam_options *o;
} adam_job;

#define ADAM_LOOP(T, SQRT, NAME, AMSGRAD)                                                          \
    static void NAME(void *arg, int64_t b, int64_t e) {                                           \
        const adam_job *j = arg;                                                                   \
        const em_adam_options *o = j->o;                                                           \
        T *restrict p = PTR(j->p, T), *restrict m = PTR(j->m, T), *restrict v = PTR(j->v, T);     \
        const T *restrict g = PTR(j->g, T);                                                        \
        T *restrict vmax = AMSGRAD ? PTR(j->vmax, T) : NULL;                                      \
        const T b1 = (T)o->beta1, b2 = (T)o->beta2, eps = (T)o->eps, wd = (T)o->weight_decay;     \
        const T omb1 = (T)(1 - o->beta1), omb2 = (T)(1 - o->beta2); /* as PyTorch's alpha= */      \
        const T decay = (T)(1 - o->lr * o->weight_decay), step = (T)j->step_size;                 \
        const T c2 = (T)j->bias2_sqrt, sign = o->maximize ? (T)-1 : (T)1;                         \
        const bool coupled = o->weight_decay != 0 && !o->decoupled;                                \
        const bool decoupled = o->weight_decay != 0 && o->decoupled;                               \
        for (int64_t i = b; i < e; i++) {                                                          \
            T gi = sign * g[i];                                                                    \
            if (decoupled) p[i] = p[i] * decay;                                                    \
            if (coupled) gi = gi + wd * p[i];                                                      \
            T mi = m[i] * b1 + omb1 * gi;                                                          \
            T vi = v[i] * b2 + omb2 * gi * gi;                                                     \
            m[i] = mi;                                                                             \
            v[i] = vi;                                                                             \
            if (AMSGRAD) vi = vmax[i] = vmax[i] > vi ? vmax[i] : vi;                              \
            p[i] = p[i] - step * (mi / (SQRT(vi) / c2 + eps));                                     \
        }                                                                                          \
    }
ADAM_LOOP(float, sqrtf, adam_float, 0)
ADAM_LOOP(double, sqrt, adam_double, 0)
ADAM_LOOP(float, sqrtf, amsgrad_float, 1)
ADAM_LOOP(double, sqrt, amsgrad_double, 1)

static em_status cpu_adam(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *exp_avg,
                          em_tensor *const *exp_avg_sq, em_tensor *const *max_exp_avg_sq, const int64_t *step, int n,
                          const em_adam_options *o) {
    for (int i = 0; i < n; i++) {
        double bias1 = 1 - pow(o->beta1, (double)step[i]), bias2 = 1 - pow(o->beta2, (double)step[i]);
        adam_job j = {params[i], grads[i], exp_avg[i], exp_avg_sq[i],
                      o->amsgrad ? max_exp_avg_sq[i] : NULL, o->lr / bias1, sqrt(bias2), o};
        bool f32 = params[i]->dtype == EM_DTYPE_F32;
        em_parallel_fn fn = o->amsgrad ? (f32 ? amsgrad_float : amsgrad_double) : (f32 ? adam_float : adam_double);
        if (em_tensor_has_data(params[i])) em_parallel_for(params[i]->numel, GRAIN, fn, &j);
        __atomic_fetch_add(&params[i]->storage->version, 1, __ATOMIC_RELAXED);
    }
    return EM_OK;
}

em_status em_adam_step(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *exp_avg,
                       em_tensor *const *exp_avg_sq, em_tensor *const *max_exp_avg_sq,
                       const int64_t *step, int n, const em_adam_options *o) {
    const char *what = o->decoupled ? "adamw" : "adam";
    for (int i = 0; i < n; i++) {
        em_status st = check_param(what, params[i]);
        if (st == EM_OK) st = check(what, params[i], grads[i], "gradient");
        if (st == EM_OK) st = check(what, params[i], exp_avg[i], "exp_avg");
        if (st == EM_OK) st = check(what, params[i], exp_avg_sq[i], "exp_avg_sq");
        if (st == EM_OK && o->amsgrad) st = check(what, params[i], max_exp_avg_sq[i], "max_exp_avg_sq");
        if (st == EM_OK && step[i] < 1) st = em_error(EM_ERR_VALUE, "%s: step must be at least 1", what);
        if (st != EM_OK) return st;
    }
    const em_device_optim *dev;
    em_status st = device_steps(what, params, n, &dev);
    if (st != EM_OK || dev)
        return st != EM_OK ? st : dev->adam(params, grads, exp_avg, exp_avg_sq, max_exp_avg_sq, step, n, o);
    return cpu_adam(params, grads, exp_avg, exp_avg_sq, max_exp_avg_sq, step, n, o);
}

/* ---- RMSprop ---- */

typedef struct {
    em_tensor *p, *g, *sq, *ga, *buf;
    const em_rmsprop_options *o;
} rms_job;

#define RMS_LOOP(T, SQRT, NAME, CENTERED, MOMENTUM)                                               \
    static void NAME(void *arg, int64_t b, int64_t e) {                                           \
        const rms_job *j = arg;                                                                    \
        const em_rmsprop_options *o = j->o;                                                        \
        T *restrict p = PTR(j->p, T), *restrict sq = PTR(j->sq, T);                               \
        const T *restrict g = PTR(j->g, T);                                                        \
        T *restrict ga = CENTERED ? PTR(j->ga, T) : NULL;                                         \
        T *restrict buf = MOMENTUM ? PTR(j->buf, T) : NULL;                                       \
        const T alpha = (T)o->alpha, eps = (T)o->eps, wd = (T)o->weight_decay;                    \
        const T oma = (T)(1 - o->alpha);                                                           \
        const T lr = (T)o->lr, mom = (T)o->momentum, sign = o->maximize ? (T)-1 : (T)1;          \
        const bool decay = o->weight_decay != 0;                                                   \
        for (int64_t i = b; i < e; i++) {                                                          \
            T gi = sign * g[i];                                                                    \
            if (decay) gi = gi + wd * p[i];                                                        \
            T s = sq[i] * alpha + oma * gi * gi;                                                   \
            sq[i] = s;                                                                             \
            T avg;                                                                                 \
            if (CENTERED) {                                                                        \
                T a = ga[i] * alpha + oma * gi;                                                    \
                ga[i] = a;                                                                         \
                avg = SQRT(s - a * a) + eps;                                                       \
            } else {                                                                               \
                avg = SQRT(s) + eps;                                                               \
            }                                                                                      \
            if (MOMENTUM) {                                                                        \
                T bi = buf[i] * mom + gi / avg;                                                    \
                buf[i] = bi;                                                                       \
                p[i] = p[i] - lr * bi;                                                             \
            } else {                                                                               \
                p[i] = p[i] - lr * (gi / avg);                                                     \
            }                                                                                      \
        }                                                                                          \
    }
RMS_LOOP(float, sqrtf, rms_f, 0, 0)
RMS_LOOP(float, sqrtf, rms_f_c, 1, 0)
RMS_LOOP(float, sqrtf, rms_f_m, 0, 1)
RMS_LOOP(float, sqrtf, rms_f_cm, 1, 1)
RMS_LOOP(double, sqrt, rms_d, 0, 0)
RMS_LOOP(double, sqrt, rms_d_c, 1, 0)
RMS_LOOP(double, sqrt, rms_d_m, 0, 1)
RMS_LOOP(double, sqrt, rms_d_cm, 1, 1)

static em_status cpu_rmsprop(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *square_avg,
                             em_tensor *const *grad_avg, em_tensor *const *momentum_buf, int n,
                             const em_rmsprop_options *o) {
    for (int i = 0; i < n; i++) {
        rms_job j = {params[i], grads[i], square_avg[i], o->centered ? grad_avg[i] : NULL,
                     o->momentum > 0 ? momentum_buf[i] : NULL, o};
        static const em_parallel_fn fns[2][2][2] = {{{rms_d, rms_d_m}, {rms_d_c, rms_d_cm}},
                                                     {{rms_f, rms_f_m}, {rms_f_c, rms_f_cm}}};
        em_parallel_fn fn = fns[params[i]->dtype == EM_DTYPE_F32][o->centered][o->momentum > 0];
        if (em_tensor_has_data(params[i])) em_parallel_for(params[i]->numel, GRAIN, fn, &j);
        __atomic_fetch_add(&params[i]->storage->version, 1, __ATOMIC_RELAXED);
    }
    return EM_OK;
}

em_status em_rmsprop_step(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *square_avg,
                          em_tensor *const *grad_avg, em_tensor *const *momentum_buf, int n,
                          const em_rmsprop_options *o) {
    for (int i = 0; i < n; i++) {
        em_status st = check_param("rmsprop", params[i]);
        if (st == EM_OK) st = check("rmsprop", params[i], grads[i], "gradient");
        if (st == EM_OK) st = check("rmsprop", params[i], square_avg[i], "square_avg");
        if (st == EM_OK && o->centered) st = check("rmsprop", params[i], grad_avg[i], "grad_avg");
        if (st == EM_OK && o->momentum > 0) st = check("rmsprop", params[i], momentum_buf[i], "momentum buffer");
        if (st != EM_OK) return st;
    }
    const em_device_optim *dev;
    em_status st = device_steps("rmsprop", params, n, &dev);
    if (st != EM_OK || dev)
        return st != EM_OK ? st : dev->rmsprop(params, grads, square_avg, grad_avg, momentum_buf, n, o);
    return cpu_rmsprop(params, grads, square_avg, grad_avg, momentum_buf, n, o);
}

const em_device_optim em_cpu_optim = {cpu_sgd, cpu_adam, cpu_rmsprop};
