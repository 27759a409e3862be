/*
 * internal.h - what the CUDA device's files share. context.c holds a
 * device's resources (its context, stream, memory and loaded kernels);
 * elementwise.c, reduce.c, blas.c, indexing.c, window.c, conv.c,
 * movement.c, sort.c and optim.c run ops on them; device.c, at the top,
 * is the device table's entry that sends each op to its file. Not public.
 */
#ifndef EMBER_CUDA_INTERNAL_H
#define EMBER_CUDA_INTERNAL_H

#include "../runtime/cuda/cu.h"
#include "../runtime/device.h"

#define EM_CUDA_THREADS 256

#include <pthread.h>

#include "ember/cuda.h"

/* A device's resources (context.c): fields read by the op files (its
 * stream, compute capability, multiprocessors, allocator under its lock). */
typedef struct kernel_entry {
    struct kernel_entry *next;
    CUfunction fn;
    char name[];
} kernel_entry;

#define KERNEL_BUCKETS 512

typedef struct cuda_dev {
    bool ready;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    int sm;  /* compute capability, 90 for 9.0 */
    int sms; /* multiprocessors */
    size_t total_memory;
    char name[128];
    em_cuda_allocator *alloc;
    void *blas;           /* its cuBLAS handle, made at its first matmul */
    int blas_mode;        /* the handle's math mode (0: cuBLAS's default, no TF32) */
    pthread_mutex_t lock; /* the allocator, the kernel table and the handle */
    kernel_entry *kernels[KERNEL_BUCKETS];
} cuda_dev;

/* An error naming the failed driver call (out of memory: the CUDA OOM). */
em_status em_cuda_fail(const char *what, CUresult rc);
/* The device table's memory entry for "cuda". */
extern const em_device_memory em_cuda_memory;
/* The PTX of a module from its generator's spec. */
typedef em_status (*em_cuda_ptx_fn)(const void *spec, int sm, char **ptx);

/* Device `index` (-1: cuda:0), started and current on this thread. */
em_status em_cuda_dev_enter(int index, cuda_dev **d);
/* Function `name` of the module ptx_of makes from spec (also keeping
 * `also`, another kernel of that module, when not NULL). */
em_status em_cuda_dev_kernel(cuda_dev *d, const char *name, const char *also, em_cuda_ptx_fn ptx_of,
                             const void *spec, CUfunction *fn);
/* Launches fn on `blocks` blocks of EM_CUDA_THREADS threads (capped: the
 * kernels are grid-stride loops) on the device's stream. */
em_status em_cuda_dev_launch(cuda_dev *d, CUfunction fn, long long blocks, void **params,
                             const char *what);
/* Blocks for n threads' work, a few waves of the machine at most. */
long long em_cuda_dev_blocks_for(const cuda_dev *d, long long n);
/* Scratch memory from the device's allocator (reused only by work queued
 * after what uses it, on the same stream), and its return. */
em_status em_cuda_dev_scratch(cuda_dev *d, size_t bytes, uint64_t *ptr);
void em_cuda_dev_scratch_free(cuda_dev *d, uint64_t ptr);
/* A word on the device set to `value`, for a kernel to report into, and
 * its value read back (which waits for the kernels before it). */
em_status em_cuda_dev_word(cuda_dev *d, long long value, uint64_t *ptr);
em_status em_cuda_dev_read_word(cuda_dev *d, uint64_t ptr, long long *value);
/* out = op(in...) elementwise (elementwise.c), views, contiguous(). */
em_status em_cuda_run_elementwise(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                                  em_tensor *out);
em_status em_cuda_run_view(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out,
                           cuda_dev *d);
em_status em_cuda_run_contiguous(cuda_dev *d, em_tensor *x, em_tensor **out);
/* Reductions and ops along lines (reduce.c). */
em_status em_cuda_run_reduce(cuda_dev *d, em_op op, em_tensor *x, const em_attrs *attrs,
                             em_tensor *out);
bool em_cuda_line_op(em_op op);
em_status em_cuda_run_lines(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                            const em_attrs *attrs, em_tensor *out);
/* matmul through cuBLAS (blas.c). */
em_status em_cuda_run_matmul(cuda_dev *d, em_tensor *const *in, const em_attrs *attrs,
                             em_tensor *out);
/* gather and scatter (indexing.c). */
em_status em_cuda_run_gather_scatter(cuda_dev *d, em_op op, em_tensor *const *in,
                                     const em_attrs *attrs, em_tensor *out);
/* t on the device (a host 0-d operand copied over), a new reference. */
em_tensor *em_cuda_dev_on_device(em_tensor *t, em_device dev);
/* x as dtype dt on the device (x itself, retained, when it is). */
em_tensor *em_cuda_dev_converted(cuda_dev *d, em_tensor *x, em_dtype dt);
/* out = op(in...) elementwise (broadcast to out's shape), in out's strides. */
em_status em_cuda_dev_ew_into(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                              em_tensor *out);
/* out = x (cast to out's dtype, broadcast to its shape), in out's strides. */
em_status em_cuda_dev_copy_into(cuda_dev *d, em_tensor *out, em_tensor *x);
static inline CUdeviceptr em_cuda_address(const em_tensor *t) {
    return (CUdeviceptr)(uintptr_t)em_tensor_data(t);
}

/* The ops of window.c (and conv.c): convolutions, unfold, fold, the pools
 * and their gradients. */
bool em_cuda_window_op(em_op op);
em_status em_cuda_run_window(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                             const em_attrs *attrs, em_tensor **out);
/* conv, conv_weight, conv_transpose as unfold/fold plus matmul (conv.c;
 * device-free). */
em_status em_cuda_conv(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                       em_tensor *out);
/* The ops of indexing.c: index, index_put, index_select, cat. */
bool em_cuda_indexing_op(em_op op);
em_status em_cuda_run_indexing(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                               const em_attrs *attrs, em_tensor **out);

/* cat into out (device-free). */
em_status em_cuda_cat(em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *out);
/* The ops of movement.c: flip, roll, tril, triu, one_hot, nonzero,
 * masked_select; device-free compositions (d may be NULL; the tensors on
 * any device with the ops they are made of). */
bool em_cuda_movement_op(em_op op);
em_status em_cuda_run_movement(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                               const em_attrs *attrs, em_tensor **out);

/* sort (the kernel) into out[0] (values) and out[1] (indices), and topk,
 * kthvalue, median and nanmedian composed from sort through dispatch
 * (device-free). */
em_status em_cuda_run_sort(cuda_dev *d, em_tensor *x, const em_attrs *a, em_tensor **out);
em_status em_cuda_select(em_op op, em_tensor *const *in, const em_attrs *a, em_tensor **out);
/* The fused optimizer steps (optim.c). */
extern const em_device_optim em_cuda_optim;

#endif
