/*
 * device.c - the CUDA device of the device table (runtime/device.h): tensors on
 * "cuda" whose memory comes from the caching allocator over cuMemAlloc,
 * and whose eager ops are the CUDA C the code generator makes from the op
 * table (codegen_cuda/), compiled by NVRTC once per kernel (its PTX cache),
 * loaded into the device's context and launched on its stream.
 *
 * It sits above the CUDA code generator, which sits above the op table, so
 * it is a library of its own (ember_cuda) that registers itself in the
 * device table (em_cuda_device_register) rather than being named there.
 * Registering touches no driver: the driver starts, and a device's
 * context, stream and allocator are made, at its first use.
 *
 * It is the top of the device's files (internal.h): context.c makes a
 * device's context, stream, memory and kernel table; each op runs in its
 * file (elementwise.c: elementwise ops, casts, copies, views; reduce.c:
 * reductions and ops along lines; blas.c: matmul through cuBLAS;
 * indexing.c: gather, scatter, advanced indexing, index_select, cat;
 * window.c and conv.c: convolutions, unfold, fold, pools; movement.c:
 * flip, roll, tril, triu, one_hot, nonzero, masked_select; sort.c: sort,
 * topk, kthvalue, median, nanmedian; optim.c: the fused optimizer steps),
 * and here the factories and random ops are the CPU's kernels copied over
 * (the same values as on the CPU, the same numbers for a seed). Every
 * other op says by name that it has no CUDA kernel yet.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "stand_in.h"
#include "ember/codegen_cuda.h"
#include "ember/cuda.h"

/* A factory or random op: the CPU's kernel into host memory, copied over:
 * the same values as on the CPU (for random ops, the same numbers after
 * the same seed, drawn from the one Philox stream). */
static em_status run_on_host(cuda_dev *d, em_op op, const em_attrs *attrs, em_tensor *out) {
    (void)d;
    if (op == EM_OP_EMPTY) return EM_OK;
    em_tensor *h = em_tensor_empty(out->shape, out->ndim, out->dtype, em_cpu());
    if (!h) return em_last_status();
    em_attrs a = *attrs;
    a.device = em_cpu();
    em_status st = em_cpu_device.run(op, NULL, 0, &a, &h);
    if (st == EM_OK && out->numel)
        st = em_cuda_memory.from_host(out->device.index, em_tensor_data(out), em_tensor_data(h),
                                      (size_t)out->numel * em_dtype_size(out->dtype));
    em_tensor_release(h);
    return st;
}

/* ---- the device table's entry ---- */

static bool cuda_supports(em_op op) {
    if ((unsigned)op >= EM_OP_COUNT) return false;
    const em_op_info *info = em_op_get(op);
    switch (info->kind) {
    case EM_KIND_CAST:
    case EM_KIND_VIEW:
    case EM_KIND_COPY:
    case EM_KIND_FACTORY:
    case EM_KIND_RANDOM:
        return true;
    case EM_KIND_REDUCE:
        return true;
    case EM_KIND_MATMUL:
        return op == EM_OP_MATMUL;
    default:
        return em_cuda_line_op(op) || em_cuda_window_op(op) || em_cuda_indexing_op(op) ||
               em_cuda_movement_op(op) || op == EM_OP_SORT || op == EM_OP_TOPK ||
               op == EM_OP_KTHVALUE || op == EM_OP_MEDIAN || op == EM_OP_NANMEDIAN ||
               op == EM_OP_GATHER || op == EM_OP_SCATTER || (info->flags & EM_F_ELEMENTWISE) != 0;
    }
}

static em_status cuda_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                          em_tensor **out) {
    const em_op_info *info = em_op_get(op);
    em_device where = n_in > 0 ? in[0]->device : out[0] ? out[0]->device : attrs->device;
    for (int i = 0; i < n_in && where.type != EM_DEVICE_CUDA; i++) where = in[i]->device;
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(where.index, &d);
    if (st != EM_OK) return st;
    switch (info->kind) {
    case EM_KIND_VIEW:
        return em_cuda_run_view(op, in, attrs, out, d);
    case EM_KIND_COPY:
        return em_cuda_run_contiguous(d, in[0], out);
    case EM_KIND_CAST:
        return em_cuda_run_elementwise(d, op, in, 1, out[0]);
    case EM_KIND_REDUCE:
        return em_cuda_run_reduce(d, op, in[0], attrs, out[0]);
    case EM_KIND_MATMUL:
        return em_cuda_run_matmul(d, in, attrs, out[0]);
    case EM_KIND_FACTORY:
    case EM_KIND_RANDOM:
        return run_on_host(d, op, attrs, out[0]);
    default:
        if (op == EM_OP_GATHER || op == EM_OP_SCATTER)
            return em_cuda_run_gather_scatter(d, op, in, attrs, out[0]);
        if (em_cuda_window_op(op)) return em_cuda_run_window(d, op, in, n_in, attrs, out);
        if (em_cuda_indexing_op(op)) return em_cuda_run_indexing(d, op, in, n_in, attrs, out);
        if (em_cuda_movement_op(op)) return em_cuda_run_movement(d, op, in, n_in, attrs, out);
        if (op == EM_OP_SORT) return em_cuda_run_sort(d, in[0], attrs, out);
        if (op == EM_OP_TOPK || op == EM_OP_KTHVALUE || op == EM_OP_MEDIAN || op == EM_OP_NANMEDIAN)
            return em_cuda_select(op, in, attrs, out);
        return em_cuda_line_op(op) ? em_cuda_run_lines(d, op, in, n_in, attrs, out[0])
                                   : em_cuda_run_elementwise(d, op, in, n_in, out[0]);
    }
}

static em_status cuda_write(em_op op, em_tensor *const *in, int n_in, em_tensor *out) {
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(out->device.index, &d);
    return st == EM_OK ? em_cuda_run_elementwise(d, op, in, n_in, out) : st;
}

static const em_device_impl cuda_device = {"cuda",   &em_cuda_memory, cuda_supports,
                                           cuda_run, cuda_write,      &em_cuda_optim};

void em_cuda_device_register(void) {
    if (em_cuda_stand_in_wanted())
        em_cuda_stand_in_register(cuda_supports); /* (tests without a GPU: stand_in.c) */
    else
        em_device_register(EM_DEVICE_CUDA, &cuda_device);
}

bool em_cuda_available(char *why, size_t n) {
    if (em_cuda_stand_in_active()) {
        if (why && n) why[0] = '\0';
        return true;
    }
    char driver[512] = "", compiler[512] = "";
    int devices = em_cuda_driver_devices(driver, sizeof driver);
    bool nvrtc = em_nvrtc_available(compiler, sizeof compiler);
    bool registered = em_device_impl_of((em_device){EM_DEVICE_CUDA, 0}) == &cuda_device;
    if (why && n) {
        if (!devices)
            snprintf(why, n, "%s", driver);
        else if (!nvrtc)
            snprintf(why, n,
                     "ember compiles its CUDA kernels with NVRTC, which could not be loaded: %s",
                     compiler);
        else if (!registered)
            snprintf(why, n,
                     "this program did not register ember's CUDA device (em_cuda_device_register)");
        else
            snprintf(why, n, "%s", "");
    }
    return devices > 0 && nvrtc && registered;
}

int em_cuda_device_count(void) {
    if (em_cuda_stand_in_active()) return 1;
    return em_cuda_available(NULL, 0) ? em_cuda_driver_devices(NULL, 0) : 0;
}

/* ---- what ember.cuda reports ---- */

/* (the stand-in: one device, index 0, nothing to wait for, no allocator) */
static em_status stand_in_index(int index) {
    return index <= 0 ? EM_OK
                      : em_error(EM_ERR_DEVICE,
                                 "CUDA error: invalid device ordinal (cuda:%d; 1 device)", index);
}

em_status em_cuda_device_properties(int index, em_cuda_properties *out) {
    memset(out, 0, sizeof *out);
    if (em_cuda_stand_in_active()) {
        snprintf(out->name, sizeof out->name,
                 "host stand-in for a CUDA device (EMBER_CUDA_HOST_STAND_IN=1)");
        out->multiprocessors = 1;
        return stand_in_index(index);
    }
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(index, &d);
    if (st != EM_OK) return st;
    snprintf(out->name, sizeof out->name, "%s", d->name);
    out->major = d->sm / 10;
    out->minor = d->sm % 10;
    out->total_memory = d->total_memory;
    out->multiprocessors = d->sms;
    return EM_OK;
}

em_status em_cuda_synchronize(int index) {
    return em_cuda_stand_in_active() ? stand_in_index(index) : em_cuda_memory.synchronize(index);
}

em_status em_cuda_stream_handle(int index, uint64_t *stream) {
    *stream = 0;
    if (em_cuda_stand_in_active()) return stand_in_index(index);
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(index, &d);
    if (st == EM_OK) *stream = (uint64_t)(uintptr_t)d->stream;
    return st;
}

em_status em_cuda_wait_stream(uint64_t stream) {
    if (em_cuda_stand_in_active()) return EM_OK;
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(-1, &d); /* (a context current on this thread) */
    if (st != EM_OK) return st;
    CUresult rc = em_cu()->StreamSynchronize((CUstream)(uintptr_t)stream);
    return rc == EM_CU_SUCCESS
               ? EM_OK
               : em_cuda_fail("waiting for the producer's stream (cuStreamSynchronize)", rc);
}

em_status em_cuda_pointer_device(uint64_t ptr, int *index) {
    *index = 0;
    if (em_cuda_stand_in_active()) return EM_OK;
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(-1, &d);
    if (st != EM_OK) return st;
    unsigned type = 0;
    int ordinal = -1;
    CUresult rc = em_cu()->PointerGetAttribute(&type, EM_CU_POINTER_MEMORY_TYPE, (CUdeviceptr)ptr);
    if (rc == EM_CU_SUCCESS && type == EM_CU_MEMORYTYPE_DEVICE)
        rc = em_cu()->PointerGetAttribute(&ordinal, EM_CU_POINTER_DEVICE_ORDINAL, (CUdeviceptr)ptr);
    if (rc != EM_CU_SUCCESS || type != EM_CU_MEMORYTYPE_DEVICE || ordinal < 0)
        return em_error(EM_ERR_VALUE,
                        "the CUDA array interface's pointer 0x%llx is not CUDA device memory",
                        (unsigned long long)ptr);
    *index = ordinal;
    return EM_OK;
}
