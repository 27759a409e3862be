/*
 * optim.h - fused parameter updates for ember.optim.
 *
 * One call updates a list of parameters in place, each element read and
 * written once per step, following PyTorch's update rules (torch.optim,
 * single-tensor forms) operation for operation, in the parameter's dtype.
 * Every tensor (parameter, gradient, state) must be contiguous, of the
 * parameter's shape and floating dtype; states are updated in place too.
 * These are not recorded by autograd.
 */
#ifndef EMBER_OPTIM_H
#define EMBER_OPTIM_H

#include "ember/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
} em_sgd_options;

/* momentum_buf[i] (NULL when momentum is 0) is set to the gradient where
 * first[i], else updated. */
em_status em_sgd_step(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *momentum_buf,
                      const bool *first, int n, const em_sgd_options *o);

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled; /* AdamW: weight decay applied to the parameter, not the gradient */
    bool amsgrad, maximize;
} em_adam_options;

/* step[i]: the step number after this one (1 on the first). max_exp_avg_sq
 * entries are used with amsgrad only. */
em_status em_adam_step(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *exp_avg,
                       em_tensor *const *exp_avg_sq, em_tensor *const *max_exp_avg_sq,
                       const int64_t *step, int n, const em_adam_options *o);

typedef struct {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
} em_rmsprop_options;

/* grad_avg entries are used when centered, momentum_buf when momentum > 0. */
em_status em_rmsprop_step(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *square_avg,
                          em_tensor *const *grad_avg, em_tensor *const *momentum_buf, int n,
                          const em_rmsprop_options *o);

/* Has the device fused steps (the CPU and meta: these; another device:
 * its own, when its entry in the device table provides them)? */
bool em_device_has_fused_steps(em_device d);

#ifdef __cplusplus
}
#endif
#endif
