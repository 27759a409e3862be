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

typedef struct em_device_impl {
    const char *name;
    /* A storage of nbytes (uninitialised) on device `index`, which frees its
     * memory when released; NULL with the error set. */
    em_storage *(*storage_new)(int index, size_t nbytes);
    /* Copies between the device's memory and the host's, and within it. */
    em_status (*to_host)(int index, void *dst, const void *src, size_t nbytes);
    em_status (*from_host)(int index, void *dst, const void *src, size_t nbytes);
    em_status (*copy)(int index, void *dst, const void *src, size_t nbytes);
    /* Waits for the device's queued work. */
    em_status (*synchronize)(int index);
    /* Has the device a kernel for op? (Its inference has already accepted
     * the operands' types.) */
    bool (*supports)(em_op op);
    /* Runs op's kernel: results allocated as dispatch.c's run_kernel says. */
    em_status (*run)(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out);
} em_device_impl;

/* The entry for d's type; NULL where this build has none. */
const em_device_impl *em_device_impl_of(em_device d);

/* The CPU device (runtime/cpu/device.c), and the release of the host
 * memory its storages own (what tells ember's own memory, which it may
 * grow or swap, from memory it wraps). */
extern const em_device_impl em_cpu_device;
void em_host_release(void *ctx, void *data, size_t nbytes);

#endif
