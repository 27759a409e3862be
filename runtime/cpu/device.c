/*
 * device.c - the CPU device of the device table (../device.h): the host's
 * memory (../memory.c), and the eager CPU kernels of every op, chosen per
 * kind (elementwise kinds share one driver) or per op (OTHER and factory
 * rows: cpu_<name>).
 */
#include "../device.h"

#define CPU_FOR(kind, name) CPU_FOR_##kind(name)
#define CPU_FOR_UNARY(n) cpu_elementwise
#define CPU_FOR_BINARY(n) cpu_elementwise
#define CPU_FOR_TERNARY(n) cpu_elementwise
#define CPU_FOR_CAST(n) cpu_cast
#define CPU_FOR_REDUCE(n) cpu_reduce
#define CPU_FOR_SCAN(n) cpu_scan
#define CPU_FOR_MATMUL(n) cpu_matmul
#define CPU_FOR_VIEW(n) cpu_view
#define CPU_FOR_COPY(n) cpu_contiguous
#define CPU_FOR_FACTORY(n) cpu_##n
#define CPU_FOR_RANDOM(n) cpu_random
#define CPU_FOR_FUSED(n) cpu_fused
#define CPU_FOR_OTHER(n) cpu_##n

static const em_kernel_fn kernels[EM_OP_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) [EM_OP_##E] = CPU_FOR(kind, n),
#include "ember/ops.def"
#undef EM_OP
};

static bool cpu_supports(em_op op) { return (unsigned)op < EM_OP_COUNT && kernels[op]; }

static em_status cpu_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    return kernels[op](op, in, n_in, attrs, out);
}

static em_status cpu_write(em_op op, em_tensor *const *in, int n_in, em_tensor *out) {
    (void)n_in;
    return em_op_get(op)->kind == EM_KIND_CAST ? em_copy_into(out, in[0]) : em_elementwise_into(op, in, out);
}

const em_device_impl em_cpu_device = {"cpu", &em_host_memory, cpu_supports, cpu_run, cpu_write, NULL};
