/*
 * optim.c - the CUDA device's fused optimizer steps (the device table's
 * `optim`, called by em_sgd_step, em_adam_step and em_rmsprop_step after
 * their checks): one generated kernel per parameter
 * (codegen_cuda/optim_source.c), which reads and writes each element of
 * the parameter and its state once, with the CPU's arithmetic, rather than
 * the ten or so elementwise kernels the update makes as ember ops.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "ember/codegen_cuda.h"

static em_status optim_ptx(const void *spec, int sm, char **ptx) {
    (void)spec;
    return em_cuda_optim_ptx(sm, ptx);
}

/* Launches em_cuda_<which>_<T> over p's elements with the pointers ptrs
 * (NULL tensors: NULL pointers). */
static em_status step_one(const char *which, em_tensor *p, em_cuda_optim_args *a,
                          em_tensor *const *ts, int n_ts) {
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(p->device.index, &d);
    if (st != EM_OK) return st;
    char name[64];
    snprintf(name, sizeof name, "em_cuda_%s_%s", which, p->dtype == EM_DTYPE_F64 ? "f64" : "f32");
    CUfunction fn;
    if ((st = em_cuda_dev_kernel(d, name, NULL, optim_ptx, NULL, &fn)) != EM_OK) return st;
    long long n = p->numel;
    CUdeviceptr ptrs[6] = {0};
    void *params[8];
    int np = 0;
    params[np++] = &n;
    params[np++] = a;
    for (int i = 0; i < n_ts; i++) {
        ptrs[i] = ts[i] ? em_cuda_address(ts[i]) : 0;
        params[np++] = &ptrs[i];
    }
    if (n > 0) st = em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, n), params, name);
    __atomic_fetch_add(&p->storage->version, 1, __ATOMIC_RELAXED);
    return st;
}

static em_status sgd(em_tensor *const *params, em_tensor *const *grads,
                     em_tensor *const *momentum_buf, const bool *first, int n,
                     const em_sgd_options *o) {
    for (int i = 0; i < n; i++) {
        em_cuda_optim_args a = {.lr = o->lr,
                                .momentum = o->momentum,
                                .dampening = o->dampening,
                                .weight_decay = o->weight_decay,
                                .maximize = o->maximize,
                                .nesterov = o->nesterov,
                                .first = first && first[i]};
        em_tensor *ts[3] = {params[i], grads[i], o->momentum != 0 ? momentum_buf[i] : NULL};
        em_status st = step_one("sgd", params[i], &a, ts, 3);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

static em_status adam(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *exp_avg,
                      em_tensor *const *exp_avg_sq, em_tensor *const *max_exp_avg_sq,
                      const int64_t *step, int n, const em_adam_options *o) {
    for (int i = 0; i < n; i++) {
        /* (the per-step constants in double, as the CPU's em_adam_step) */
        double bias1 = 1 - pow(o->beta1, (double)step[i]),
               bias2 = 1 - pow(o->beta2, (double)step[i]);
        em_cuda_optim_args a = {.lr = o->lr,
                                .weight_decay = o->weight_decay,
                                .beta1 = o->beta1,
                                .beta2 = o->beta2,
                                .eps = o->eps,
                                .step_size = o->lr / bias1,
                                .bias2_sqrt = sqrt(bias2),
                                .maximize = o->maximize,
                                .decoupled = o->decoupled};
        em_tensor *ts[5] = {params[i], grads[i], exp_avg[i], exp_avg_sq[i],
                            o->amsgrad ? max_exp_avg_sq[i] : NULL};
        em_status st = step_one("adam", params[i], &a, ts, 5);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

static em_status rmsprop(em_tensor *const *params, em_tensor *const *grads,
                         em_tensor *const *square_avg, em_tensor *const *grad_avg,
                         em_tensor *const *momentum_buf, int n, const em_rmsprop_options *o) {
    for (int i = 0; i < n; i++) {
        em_cuda_optim_args a = {.lr = o->lr,
                                .momentum = o->momentum,
                                .weight_decay = o->weight_decay,
                                .eps = o->eps,
                                .alpha = o->alpha,
                                .maximize = o->maximize,
                                .centered = o->centered};
        em_tensor *ts[5] = {params[i], grads[i], square_avg[i], o->centered ? grad_avg[i] : NULL,
                            o->momentum > 0 ? momentum_buf[i] : NULL};
        em_status st = step_one("rmsprop", params[i], &a, ts, 5);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

const em_device_optim em_cuda_optim = {sgd, adam, rmsprop};
