/*
 * stand_in.c - a stand-in for a CUDA device on machines without a GPU, for
 * testing what surrounds the device: dispatch across devices, copies and
 * writes between memories, autograd's and the optimizers' device
 * handling, and the Python layer (.to("cuda"), .cpu(), .item(), printing,
 * DLPack, checkpoints, ember.cuda). With EMBER_CUDA_HOST_STAND_IN=1 in the
 * environment, em_cuda_device_register installs it instead of the CUDA
 * device: tensors on "cuda:0" then live in host memory and run the CPU's
 * kernels, for the ops the CUDA device has kernels for (its own answer to
 * `supports`), so an op a GPU would refuse is refused here too, and a test
 * that passes here fails on a GPU only by a kernel's numbers, not by a
 * missing kernel; the optimizers take their fused steps as on a GPU (here
 * the CPU's loops). It computes nothing a GPU would; the GPU's kernels are checked
 * on a GPU (tools/gpu_check.sh). CI runs the device tests under it, so the
 * code around the kernels is checked on every change, not only in the
 * rare session that has a GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "../runtime/device.h"
#include "stand_in.h"

static em_device_memory memory;
static em_device_impl device;

static bool (*cuda_supports)(em_op);

static bool supports(em_op op) {
    return cuda_supports(op) && em_cpu_device.supports(op);
}

static em_status cpu_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                         em_tensor **out) {
    return em_cpu_device.run(op, in, n_in, attrs, out);
}

bool em_cuda_stand_in_wanted(void) {
    const char *v = getenv("EMBER_CUDA_HOST_STAND_IN");
    return v && !strcmp(v, "1");
}

void em_cuda_stand_in_register(bool (*supported_on_cuda)(em_op)) {
    cuda_supports = supported_on_cuda;
    memory = em_host_memory; /* (the host's memory, under the name cuda) */
    memory.name = "cuda";
    device =
        (em_device_impl){"cuda", &memory, supports, cpu_run, em_cpu_device.write, &em_cpu_optim};
    em_device_register(EM_DEVICE_CUDA, &device);
}

bool em_cuda_stand_in_active(void) {
    return em_device_impl_of((em_device){EM_DEVICE_CUDA, 0}) == &device;
}
