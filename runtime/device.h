/*
 * device.h - the device table (issue 41, item 1): what dispatch and the
 * tensor layer ask of a device, one entry per em_device_type.
 *
 * Dispatch infers result types (device-free: the op table's inference),
 * picks the device of the operands (all on one, or an error in PyTorch's
 * words), asks it whether it supports the op, and runs the op there. A
 * device type this build has no entry for (CUDA without its device layer:
 * issue 43) cannot hold tensors, and says so. Not a public header: only
 * runtime/ includes it.
 */
#ifndef EMBER_RUNTIME_DEVICE_H
#define EMBER_RUNTIME_DEVICE_H

#include "ember/optim.h"
#include "ember/tensor.h"
#include "kernels.h"
#include "memory.h"

/* A device's fused optimizer steps (optim.h's, for parameters on it),
 * called by em_sgd_step and its siblings after their checks. */
typedef struct em_device_optim {
    em_status (*sgd)(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *momentum_buf,
                     const bool *first, int n, const em_sgd_options *o);
    em_status (*adam)(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *exp_avg,
                      em_tensor *const *exp_avg_sq, em_tensor *const *max_exp_avg_sq, const int64_t *step, int n,
                      const em_adam_options *o);
    em_status (*rmsprop)(em_tensor *const *params, em_tensor *const *grads, em_tensor *const *square_avg,
                         em_tensor *const *grad_avg, em_tensor *const *momentum_buf, int n,
                         const em_rmsprop_options *o);
} em_device_optim;

typedef struct em_device_impl {
    const char *name;
    /* Its memory (memory.h: what tensor.c allocates through). */
    const em_device_memory *memory;
    /* Has the device a kernel for op? (Its inference has already accepted
     * the operands' types.) */
    bool (*supports)(em_op op);
    /* Runs op's kernel: results allocated as dispatch.c's run_kernel says. */
    em_status (*run)(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out);
    /* Writes an elementwise op's result (a cast: its operand) into out, in
     * out's own strides, the operands broadcast to out's shape: an
     * in-place op's write. NULL: the device takes no writes (meta). */
    em_status (*write)(em_op op, em_tensor *const *in, int n_in, em_tensor *out);
    /* Its fused optimizer steps; NULL: none (the CPU's are runtime/cpu/
     * optim.c's own loops; elsewhere the optimizers run as ops). */
    const em_device_optim *optim;
} em_device_impl;

/* The entry for d's type; NULL where this build has none. */
const em_device_impl *em_device_impl_of(em_device d);
/* Installs the entry (and its memory) of a device built above the runtime:
 * the CUDA device (cuda/device.c) needs the CUDA code generator,
 * which needs the op table, so it registers itself rather than being
 * named here. NULL removes it; the CPU and meta entries are fixed. */
void em_device_register(em_device_type type, const em_device_impl *impl);

/* The CPU's fused optimizer loops (runtime/cpu/optim.c), for a device whose
 * memory is the host's (the CUDA stand-in). */
extern const em_device_optim em_cpu_optim;
/* The CPU device (runtime/cpu/device.c). */
extern const em_device_impl em_cpu_device;
/* The meta device (runtime/meta/device.c): inference only, no data. */
extern const em_device_impl em_meta_device;

#endif
