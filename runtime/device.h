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

#include "ember/tensor.h"
#include "kernels.h"
#include "memory.h"

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
} em_device_impl;

/* The entry for d's type; NULL where this build has none. */
const em_device_impl *em_device_impl_of(em_device d);
/* Installs the entry (and its memory) of a device built above the runtime:
 * the CUDA device (cuda/device.c) needs the CUDA code generator,
 * which needs the op table, so it registers itself rather than being
 * named here. NULL removes it; the CPU and meta entries are fixed. */
void em_device_register(em_device_type type, const em_device_impl *impl);

/* The CPU device (runtime/cpu/device.c). */
extern const em_device_impl em_cpu_device;
/* The meta device (runtime/meta/device.c): inference only, no data. */
extern const em_device_impl em_meta_device;

#endif
