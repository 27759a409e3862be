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
 * Order: every kernel and every copy of a device runs on one stream of its
 * own, made blocking, so the driver's synchronous copies (cuMemcpyHtoD,
 * cuMemcpyDtoH: the legacy stream) wait for the kernels before them. A
 * block the allocator hands back is reused by later work on that same
 * stream, which runs after the work that used it (PyTorch's rule for a
 * stream's own pool). Copies to the host return once the data is there,
 * so .item(), printing and .cpu() synchronise.
 *
 * What runs here: every elementwise op and cast the generator defines (its
 * 16-byte-vector layout where the operands are contiguous and aligned, any
 * strides and broadcasts otherwise), contiguous(), the views (their
 * geometry is the CPU's), every reduction (var, std and logsumexp after a
 * first one for their centers; few long ones split across the GPU), the
 * ops along lines (cumsum, cumprod, softmax, log_softmax, layer_norm),
 * gather and scatter (an index out of range raises the CPU's error),
 * matmul through cuBLAS (matmul.c maps it to GEMMs), convolutions and max
 * pooling (window.c), advanced indexing, index_select and cat
 * (indexing.c), flip, roll, tril, triu, one_hot, nonzero and masked_select
 * (movement.c), sort, topk, kthvalue, median and nanmedian (sort.c), and the factories and random ops, computed by the CPU's
 * kernels and copied over (the same values as on the CPU, the same numbers
 * for a seed). Every other op says by name that it has no CUDA kernel yet.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_internal.h"
#include "matmul.h"
#include "stand_in.h"
#include "ember/codegen_cuda.h"
#include "ember/cuda.h"

#define MAX_DEVICES 16
#define THREADS EM_CUDA_THREADS

typedef struct kernel_entry {
    struct kernel_entry *next;
    CUfunction fn;
    char name[];
} kernel_entry;

#define KERNEL_BUCKETS 512

struct cuda_dev {
    bool ready;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    int sm;  /* compute capability, 90 for 9.0 */
    int sms; /* multiprocessors */
    size_t total_memory;
    char name[128];
    em_cuda_allocator *alloc;
    void *blas;    /* its cuBLAS handle, made at its first matmul */
    int blas_mode; /* the handle's math mode (0: cuBLAS's default, no TF32) */
    pthread_mutex_t lock; /* the allocator, the kernel table and the handle */
    kernel_entry *kernels[KERNEL_BUCKETS];
};

static cuda_dev devs[MAX_DEVICES];
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local CUcontext current_ctx;

static em_status cu_fail(const char *what, CUresult rc) {
    const em_cu_api *cu = em_cu();
    const char *text = NULL;
    if (cu) cu->GetErrorString(rc, &text);
    if (rc == EM_CU_ERROR_OUT_OF_MEMORY)
        return em_error(EM_ERR_DEVICE_NOMEM, "CUDA out of memory in %s", what);
    return em_error(EM_ERR_RUNTIME, "CUDA error in %s: %s (%d)", what, text ? text : "unknown error", rc);
}

/* ---- memory from the driver, for the caching allocator ---- */

static int source_alloc(void *ctx, size_t bytes, uint64_t *ptr) {
    (void)ctx;
    CUdeviceptr p = 0;
    CUresult rc = em_cu()->MemAlloc(&p, bytes);
    *ptr = p;
    return rc;
}

static void source_free(void *ctx, uint64_t ptr) {
    cuda_dev *d = ctx;
    em_cu()->StreamSynchronize(d->stream); /* (nothing queued may still use it) */
    em_cu()->MemFree(ptr);
}

/* ---- a device, made at its first use ---- */

static em_status start(int index, cuda_dev *d) {
    const em_cu_api *cu = em_cu();
    CUresult rc;
    if ((rc = cu->DeviceGet(&d->dev, index)) != EM_CU_SUCCESS) return cu_fail("cuDeviceGet", rc);
    if ((rc = cu->DevicePrimaryCtxRetain(&d->ctx, d->dev)) != EM_CU_SUCCESS)
        return cu_fail("cuDevicePrimaryCtxRetain", rc);
    if ((rc = cu->CtxSetCurrent(d->ctx)) != EM_CU_SUCCESS) return cu_fail("cuCtxSetCurrent", rc);
    current_ctx = d->ctx;
    if ((rc = cu->StreamCreate(&d->stream, 0)) != EM_CU_SUCCESS) return cu_fail("cuStreamCreate", rc);
    int major = 0, minor = 0;
    cu->DeviceGetAttribute(&major, EM_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, d->dev);
    cu->DeviceGetAttribute(&minor, EM_CU_ATTR_COMPUTE_CAPABILITY_MINOR, d->dev);
    cu->DeviceGetAttribute(&d->sms, EM_CU_ATTR_MULTIPROCESSOR_COUNT, d->dev);
    cu->DeviceGetName(d->name, sizeof d->name, d->dev);
    cu->DeviceTotalMem(&d->total_memory, d->dev);
    d->sm = major * 10 + minor;
    if (d->sms <= 0) d->sms = 1;
    d->alloc = em_cuda_allocator_new((em_cuda_memory_source){d, source_alloc, source_free, "CUDA"});
    if (!d->alloc) return em_last_status();
    pthread_mutex_init(&d->lock, NULL);
    return EM_OK;
}

/* Device `index` (-1: cuda:0), started and current on this thread. */
static em_status enter(int index, cuda_dev **out) {
    if (index < 0) index = 0;
    cuda_dev *d = index < MAX_DEVICES ? &devs[index] : NULL;
    if (!d || !__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) { /* (its first use) */
        char why[512];
        int n = em_cuda_driver_devices(why, sizeof why);
        if (n <= 0) return em_error(EM_ERR_DEVICE, "CUDA is not available: %s", why);
        if (index >= n || !d)
            return em_error(EM_ERR_DEVICE, "CUDA error: invalid device ordinal (cuda:%d; %d device%s)", index, n,
                            n == 1 ? "" : "s");
        pthread_mutex_lock(&init_lock);
        em_status st = d->ready ? EM_OK : start(index, d);
        if (st == EM_OK) __atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&init_lock);
        if (st != EM_OK) return st;
    }
    if (current_ctx != d->ctx) {
        CUresult rc = em_cu()->CtxSetCurrent(d->ctx);
        if (rc != EM_CU_SUCCESS) return cu_fail("cuCtxSetCurrent", rc);
        current_ctx = d->ctx;
    }
    *out = d;
    return EM_OK;
}

/* ---- the device's memory (memory.h) ---- */

static void *cuda_alloc(int index, size_t nbytes) {
    cuda_dev *d;
    if (enter(index, &d) != EM_OK) return NULL;
    uint64_t p = 0;
    pthread_mutex_lock(&d->lock);
    em_status st = em_cuda_alloc(d->alloc, nbytes ? nbytes : 1, &p); /* (a storage's data is never NULL) */
    pthread_mutex_unlock(&d->lock);
    return st == EM_OK ? (void *)(uintptr_t)p : NULL;
}

static void cuda_release(void *ctx, void *data, size_t nbytes) {
    (void)ctx;
    (void)nbytes;
    /* (the block's device is the one whose allocator handed it out) */
    for (int i = 0; i < MAX_DEVICES; i++) {
        cuda_dev *d = &devs[i];
        if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) continue;
        pthread_mutex_lock(&d->lock);
        em_status st = em_cuda_release(d->alloc, (uint64_t)(uintptr_t)data);
        pthread_mutex_unlock(&d->lock);
        if (st == EM_OK) return;
    }
    em_clear_error(); /* (not ours: nothing to give back) */
}

static em_status cuda_to_host(int index, void *dst, const void *src, size_t nbytes) {
    cuda_dev *d;
    em_status st = enter(index, &d);
    if (st != EM_OK || !nbytes) return st;
    CUresult rc = em_cu()->MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, nbytes);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("a copy to the host (cuMemcpyDtoH)", rc);
}

static em_status cuda_from_host(int index, void *dst, const void *src, size_t nbytes) {
    cuda_dev *d;
    em_status st = enter(index, &d);
    if (st != EM_OK || !nbytes) return st;
    CUresult rc = em_cu()->MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, nbytes);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("a copy from the host (cuMemcpyHtoD)", rc);
}

static em_status cuda_copy(int index, void *dst, const void *src, size_t nbytes) {
    cuda_dev *d;
    em_status st = enter(index, &d);
    if (st != EM_OK || !nbytes) return st;
    CUresult rc = em_cu()->MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, nbytes, d->stream);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("a copy on the device (cuMemcpyDtoDAsync)", rc);
}

static em_status cuda_synchronize(int index) {
    cuda_dev *d;
    em_status st = enter(index, &d);
    if (st != EM_OK) return st;
    CUresult rc = em_cu()->StreamSynchronize(d->stream);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("synchronize", rc);
}

static const em_device_memory cuda_memory = {"cuda",         cuda_alloc, cuda_release,    cuda_to_host,
                                             cuda_from_host, cuda_copy,  cuda_synchronize};

/* ---- kernels: generated, compiled once, loaded once per device ---- */

static size_t name_hash(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h % KERNEL_BUCKETS;
}

typedef em_status (*ptx_fn)(const void *spec, int sm, char **ptx);

static em_status remember(cuda_dev *d, const char *name, CUfunction fn) {
    kernel_entry *e = malloc(sizeof *e + strlen(name) + 1);
    if (!e) return em_error(EM_ERR_NOMEM, "out of memory");
    e->fn = fn;
    strcpy(e->name, name);
    size_t h = name_hash(name);
    pthread_mutex_lock(&d->lock);
    e->next = d->kernels[h];
    d->kernels[h] = e;
    pthread_mutex_unlock(&d->lock);
    return EM_OK;
}

/* The function `name` of the module that ptx_of makes from `spec`: from
 * the device's table, else loaded, keeping `also` (another kernel of the
 * same module: the other layout) too, so a module is loaded once. */
static em_status kernel(cuda_dev *d, const char *name, const char *also, ptx_fn ptx_of, const void *spec,
                        CUfunction *fn) {
    size_t h = name_hash(name);
    pthread_mutex_lock(&d->lock);
    for (kernel_entry *e = d->kernels[h]; e; e = e->next)
        if (!strcmp(e->name, name)) {
            *fn = e->fn;
            pthread_mutex_unlock(&d->lock);
            return EM_OK;
        }
    pthread_mutex_unlock(&d->lock);
    char *ptx = NULL;
    em_status st = ptx_of(spec, d->sm, &ptx);
    if (st != EM_OK) return st;
    CUmodule mod;
    CUresult rc = em_cu()->ModuleLoadData(&mod, ptx);
    free(ptx);
    if (rc != EM_CU_SUCCESS) return cu_fail("loading a generated module (cuModuleLoadData)", rc);
    /* (the module stays loaded: the driver unloads it with the context) */
    if ((rc = em_cu()->ModuleGetFunction(fn, mod, name)) != EM_CU_SUCCESS) return cu_fail(name, rc);
    CUfunction other;
    if (also && em_cu()->ModuleGetFunction(&other, mod, also) == EM_CU_SUCCESS && (st = remember(d, also, other)) != EM_OK)
        return st;
    return remember(d, name, *fn);
}

static em_status launch(cuda_dev *d, CUfunction fn, long long blocks, void **params, const char *what) {
    if (blocks < 1) blocks = 1;
    if (blocks > 65535LL * 32) blocks = 65535LL * 32; /* (the kernels stride over the grid) */
    CUresult rc = em_cu()->LaunchKernel(fn, (unsigned)blocks, 1, 1, THREADS, 1, 1, 0, d->stream, params, NULL);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail(what, rc);
}

/* Blocks for n elements, one per thread, a few waves of the machine at most
 * (the kernels are grid-stride loops). */
static long long blocks_for(const cuda_dev *d, long long n) {
    long long b = (n + THREADS - 1) / THREADS, cap = (long long)d->sms * 32;
    return b < cap ? b : cap;
}

static CUdeviceptr address(const em_tensor *t) { return (CUdeviceptr)(uintptr_t)em_tensor_data(t); }

/* A 0-d host operand (a Python number's wrapping, a CPU scalar) copied to
 * the device, where a kernel can read it. */
static em_tensor *on_device(em_tensor *t, em_device dev) {
    if (t->device.type == EM_DEVICE_CUDA) {
        em_tensor_retain(t);
        return t;
    }
    return em_to_device(t, dev);
}

static em_status ew_ptx(const void *spec, int sm, char **ptx) { return em_cuda_ew_ptx(spec, 1, sm, ptx); }

/* Is t contiguous over out's shape and its address 16-byte aligned? */
static bool vector_ready(const em_tensor *t, const em_tensor *out) {
    return em_tensor_is_contiguous(t) && em_shape_eq(t->shape, t->ndim, out->shape, out->ndim) &&
           (address(t) & 15) == 0;
}

/* out = op(in...) elementwise (a cast: one operand), out given. */
static em_status run_elementwise(cuda_dev *d, em_op op, em_tensor *const *in, int n_in, em_tensor *out) {
    if (n_in > 3) return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s: more than 3 operands", em_op_name(op));
    em_tensor *x[3] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < n_in && st == EM_OK; i++)
        if (!(x[i] = on_device(in[i], out->device))) st = em_last_status();
    em_cuda_ew_kernel k = {op, n_in, {0}, out->dtype};
    for (int i = 0; i < n_in && st == EM_OK; i++) k.in[i] = x[i]->dtype;
    if (st == EM_OK) st = em_cuda_ew_check(&k);
    long long n = out->numel;
    if (st == EM_OK && n > 0) {
        bool contig = em_tensor_is_contiguous(out) && (address(out) & 15) == 0;
        for (int i = 0; i < n_in; i++) contig = contig && vector_ready(x[i], out);
        char name[200], other[200];
        em_cuda_ew_name(&k, contig ? EM_CUDA_CONTIG : EM_CUDA_STRIDED, name, sizeof name);
        em_cuda_ew_name(&k, contig ? EM_CUDA_STRIDED : EM_CUDA_CONTIG, other, sizeof other);
        CUfunction fn;
        st = kernel(d, name, other, ew_ptx, &k, &fn);
        CUdeviceptr ptrs[4] = {address(out)};
        for (int i = 0; i < n_in; i++) ptrs[i + 1] = address(x[i]);
        em_cuda_geometry g;
        memset(&g, 0, sizeof g);
        void *params[6];
        int np = 0;
        params[np++] = &n;
        if (!contig) {
            g.ndim = out->ndim;
            for (int dim = 0; dim < out->ndim; dim++) {
                g.shape[dim] = out->shape[dim];
                g.strides[0][dim] = out->strides[dim];
            }
            for (int i = 0; i < n_in; i++) { /* (aligned to the right; broadcast dims step 0) */
                int lead = out->ndim - x[i]->ndim;
                for (int dim = 0; dim < x[i]->ndim; dim++)
                    g.strides[i + 1][lead + dim] = x[i]->shape[dim] == 1 ? 0 : x[i]->strides[dim];
            }
            params[np++] = &g;
        }
        for (int i = 0; i <= n_in; i++) params[np++] = &ptrs[i];
        if (st == EM_OK) {
            long long per_thread = contig ? 16 / (long long)em_dtype_size(out->dtype) : 1;
            st = launch(d, fn, blocks_for(d, (n + per_thread - 1) / per_thread), params, name);
        }
    }
    for (int i = 0; i < n_in; i++) em_tensor_release(x[i]);
    return st;
}

/* ---- reductions ---- */

static em_status reduce_ptx(const void *spec, int sm, char **ptx) { return em_cuda_reduce_ptx(spec, 1, sm, ptx); }

/* out = op over attrs' dims of x (out contiguous, its elements in the kept
 * dims' row-major order), each output folded around centers[o] (a device
 * array of doubles, or 0) with parameter p. */
static em_status reduce_into(cuda_dev *d, em_op op, em_tensor *x, const em_attrs *attrs, em_tensor *out,
                             CUdeviceptr centers, double p) {
    em_cuda_reduce_kernel k = {op, x->dtype, out->dtype, attrs->ord};
    em_status st = em_cuda_reduce_check(&k);
    if (st != EM_OK) return st;
    if (!em_tensor_is_contiguous(out))
        return em_error(EM_ERR_INTERNAL, "cuda: %s: the result is not contiguous", em_op_name(op));
    em_cuda_reduce_geometry g;
    memset(&g, 0, sizeof g);
    bool reduced[EM_MAX_DIMS] = {false};
    for (int i = 0; i < attrs->n_dims; i++)
        if (attrs->dims[i] >= 0 && attrs->dims[i] < x->ndim) reduced[attrs->dims[i]] = true;
    long long n_out = 1, n_red = 1;
    for (int dim = 0; dim < x->ndim; dim++) {
        if (reduced[dim]) {
            g.r_shape[g.r_ndim] = x->shape[dim];
            g.r_in[g.r_ndim++] = x->strides[dim];
            n_red *= x->shape[dim];
        } else {
            g.k_shape[g.k_ndim] = x->shape[dim];
            g.k_in[g.k_ndim++] = x->strides[dim];
            n_out *= x->shape[dim];
        }
    }
    long long step = 1; /* (the result: row-major over the kept dims) */
    for (int i = g.k_ndim - 1; i >= 0; i--) {
        g.k_out[i] = step;
        step *= g.k_shape[i];
    }
    if (n_out == 0) return EM_OK;
    long long chunks = 1;
    em_cuda_reduce_layout layout = em_cuda_reduce_plan(n_out, n_red, d->sms, THREADS, &chunks);
    bool block = layout != EM_CUDA_REDUCE_THREAD;
    char name[200], other[200];
    em_cuda_reduce_name(&k, layout, name, sizeof name);
    em_cuda_reduce_name(&k, chunks > 1 ? EM_CUDA_REDUCE_JOIN : block ? EM_CUDA_REDUCE_THREAD : EM_CUDA_REDUCE_BLOCK,
                        other, sizeof other);
    CUfunction fn;
    if ((st = kernel(d, name, other, reduce_ptx, &k, &fn)) != EM_OK) return st;
    CUdeviceptr o = address(out), i = address(x);
    if (chunks == 1) {
        void *params[] = {&n_out, &n_red, &g, &o, &i, &centers, &p};
        return launch(d, fn, block ? (n_out < 65535 ? n_out : 65535) : blocks_for(d, n_out), params, name);
    }
    CUfunction join; /* (loaded with the split kernel, as `other`) */
    uint64_t part = 0;
    if ((st = kernel(d, other, NULL, reduce_ptx, &k, &join)) != EM_OK) return st;
    pthread_mutex_lock(&d->lock);
    st = em_cuda_alloc(d->alloc, (size_t)(n_out * chunks) * EM_CUDA_REDUCE_PARTIAL_BYTES, &part);
    pthread_mutex_unlock(&d->lock);
    if (st != EM_OK) return st;
    CUdeviceptr partials = part;
    void *split_params[] = {&n_out, &n_red, &g, &partials, &i, &centers, &p, &chunks};
    void *join_params[] = {&n_out, &n_red, &g, &o, &partials, &centers, &p, &chunks};
    st = launch(d, fn, n_out * chunks, split_params, name);
    if (st == EM_OK) st = launch(d, join, n_out, join_params, other);
    /* (the partials' block is reused only by work queued after the join,
     * on the same stream) */
    pthread_mutex_lock(&d->lock);
    em_cuda_release(d->alloc, part);
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* x as a new device tensor of dtype dt (x itself, retained, when it is). */
static em_tensor *converted(cuda_dev *d, em_tensor *x, em_dtype dt) {
    if (x->dtype == dt) {
        em_tensor_retain(x);
        return x;
    }
    em_tensor *y = em_tensor_empty(x->shape, x->ndim, dt, x->device);
    if (y && run_elementwise(d, EM_OP_CAST, &x, 1, y) != EM_OK) {
        em_tensor_release(y);
        y = NULL;
    }
    return y;
}

/* A reduction. var and std fold squared deviations around the mean, and
 * logsumexp exp(x - max) around the max: a first reduction makes those
 * centers, in double (the fold's value type, as the CPU's first pass). */
static em_status run_reduce(cuda_dev *d, em_op op, em_tensor *x, const em_attrs *attrs, em_tensor *out) {
    em_reduction red = em_op_get(op)->reduction;
    if (red != EM_RED_SUMSQDEV && red != EM_RED_SUMEXP) return reduce_into(d, op, x, attrs, out, 0, attrs->ord);
    em_tensor *xf = NULL, *first = NULL, *centers = NULL;
    em_status st = EM_OK;
    /* (logsumexp of integers: of their float values, as the CPU's) */
    if (!(xf = converted(d, x, red == EM_RED_SUMEXP ? out->dtype : EM_DTYPE_F64))) st = em_last_status();
    if (st == EM_OK) {
        em_dtype fd = red == EM_RED_SUMEXP ? xf->dtype : EM_DTYPE_F64;
        if (!(first = em_tensor_empty(out->shape, out->ndim, fd, out->device))) st = em_last_status();
    }
    if (st == EM_OK) st = reduce_into(d, red == EM_RED_SUMEXP ? EM_OP_AMAX : EM_OP_MEAN, xf, attrs, first, 0, 0.0);
    if (st == EM_OK && !(centers = converted(d, first, EM_DTYPE_F64))) st = em_last_status();
    /* (var and std fold x itself around the mean of its float64 values) */
    if (st == EM_OK)
        st = red == EM_RED_SUMSQDEV ? reduce_into(d, op, x, attrs, out, address(centers), attrs->correction)
                                    : reduce_into(d, op, xf, attrs, out, address(centers), 0.0);
    em_tensor_release(xf);
    em_tensor_release(first);
    em_tensor_release(centers);
    return st;
}

/* ---- ops along lines: cumsum, cumprod, softmax, log_softmax, layer_norm ---- */

static em_status line_ptx(const void *spec, int sm, char **ptx) { return em_cuda_line_ptx(spec, 1, sm, ptx); }

static bool is_line_op(em_op op) {
    return op == EM_OP_CUMSUM || op == EM_OP_CUMPROD || op == EM_OP_SOFTMAX || op == EM_OP_LOG_SOFTMAX ||
           op == EM_OP_LAYER_NORM;
}

/* Along dim `dim` of x (the scans, softmax), or along its last n_norm dims
 * made one (layer_norm, whose input, weight and bias are made contiguous
 * for it), into out (new, contiguous). */
static em_status run_lines(cuda_dev *d, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                           em_tensor *out) {
    bool norm = op == EM_OP_LAYER_NORM;
    em_tensor *x[3] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < n_in && i < 3 && st == EM_OK; i++) {
        if (norm) x[i] = em_contiguous(in[i]);
        else {
            x[i] = in[i];
            em_tensor_retain(x[i]);
        }
        if (!x[i]) st = em_last_status();
    }
    em_cuda_line_kernel k = {op, in[0]->dtype, out->dtype, norm ? n_in : 1};
    if (st == EM_OK) st = em_cuda_line_check(&k);
    em_cuda_line_geometry g;
    memset(&g, 0, sizeof g);
    long long n_lines = 1;
    if (st == EM_OK) {
        em_tensor *t = x[0];
        int first_line_dim = norm ? t->ndim - attrs->n_dims : (t->ndim ? (int)attrs->dims[0] : 0);
        g.len = 1;
        if (norm) { /* (contiguous: the trailing dims are one line) */
            for (int dim = first_line_dim; dim < t->ndim; dim++) g.len *= t->shape[dim];
            g.in_step = g.out_step = 1;
        } else if (t->ndim) {
            g.len = t->shape[first_line_dim];
            g.in_step = t->strides[first_line_dim];
            g.out_step = out->strides[first_line_dim];
        }
        for (int dim = 0; dim < t->ndim; dim++) {
            bool along = norm ? dim >= first_line_dim : dim == first_line_dim;
            if (along) continue;
            g.k_shape[g.k_ndim] = t->shape[dim];
            g.k_in[g.k_ndim] = t->strides[dim];
            g.k_out[g.k_ndim++] = out->strides[dim];
            n_lines *= t->shape[dim];
        }
    }
    if (st == EM_OK && n_lines > 0 && g.len > 0) {
        bool block = g.len >= 512 || n_lines < (long long)d->sms * 4;
        char name[200], other[200];
        em_cuda_line_name(&k, block ? EM_CUDA_LINE_BLOCK : EM_CUDA_LINE_THREAD, name, sizeof name);
        em_cuda_line_name(&k, block ? EM_CUDA_LINE_THREAD : EM_CUDA_LINE_BLOCK, other, sizeof other);
        CUfunction fn;
        st = kernel(d, name, other, line_ptx, &k, &fn);
        CUdeviceptr ptrs[4] = {address(out), address(x[0]), n_in > 1 && norm ? address(x[1]) : 0,
                               n_in > 2 && norm ? address(x[2]) : 0};
        double eps = norm ? attrs->value : 0.0;
        void *params[7];
        int np = 0;
        params[np++] = &n_lines;
        params[np++] = &g;
        params[np++] = &ptrs[0];
        params[np++] = &ptrs[1];
        for (int i = 1; norm && i < n_in; i++) params[np++] = &ptrs[i + 1];
        params[np++] = &eps;
        if (st == EM_OK)
            st = launch(d, fn, block ? (n_lines < 65535 ? n_lines : 65535) : blocks_for(d, n_lines), params, name);
    }
    for (int i = 0; i < 3; i++) em_tensor_release(x[i]);
    return st;
}

/* ---- matmul: cuBLAS (libcublas, dlopen), the mapping in matmul.c ---- */

/* cuBLAS's entry points (cublas_api.h, CUDA 12 and later). A handle
 * starts in the default math mode, so float32 GEMMs do not use TF32
 * (PyTorch's default); allow_tf32 switches it (em_cuda_set_allow_tf32). */
static struct {
    char why[512];
    int (*create)(void **handle);
    int (*set_stream)(void *handle, CUstream stream);
    int (*sgemm)(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                 long long sa, const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                 long long sc, int batch);
    int (*dgemm)(void *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a, int lda,
                 long long sa, const double *b, int ldb, long long sb, const double *beta, double *c, int ldc,
                 long long sc, int batch);
    int (*gemm_ex)(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int atype, int lda,
                   long long sa, const void *b, int btype, int ldb, long long sb, const void *beta, void *c,
                   int ctype, int ldc, long long sc, int batch, int compute, int algo);
    int (*set_math_mode)(void *handle, int mode);
} blas;

static bool allow_tf32; /* (torch.backends.cuda.matmul.allow_tf32) */

void em_cuda_set_allow_tf32(bool on) { __atomic_store_n(&allow_tf32, on, __ATOMIC_RELAXED); }
bool em_cuda_allow_tf32(void) { return __atomic_load_n(&allow_tf32, __ATOMIC_RELAXED); }

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void load_blas(void) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(blas.why, sizeof blas.why, "cuBLAS could not be loaded (tried libcublas.so.13, .12 and .so: %s)",
                 dlerror());
        return;
    }
    *(void **)&blas.create = dlsym(lib, "cublasCreate_v2");
    *(void **)&blas.set_stream = dlsym(lib, "cublasSetStream_v2");
    *(void **)&blas.sgemm = dlsym(lib, "cublasSgemmStridedBatched");
    *(void **)&blas.dgemm = dlsym(lib, "cublasDgemmStridedBatched");
    *(void **)&blas.gemm_ex = dlsym(lib, "cublasGemmStridedBatchedEx");
    *(void **)&blas.set_math_mode = dlsym(lib, "cublasSetMathMode");
    if (!blas.create || !blas.set_stream || !blas.sgemm || !blas.dgemm || !blas.gemm_ex || !blas.set_math_mode)
        snprintf(blas.why, sizeof blas.why, "the cuBLAS loaded lacks the strided-batched GEMMs (too old for ember)");
}

enum {
    CUBLAS_OP_N = 0,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_GEMM_DEFAULT = -1,
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
};

static em_status cublas_gemm(void *ctx, const em_cuda_gemm *g) {
    cuda_dev *d = ctx;
    const void *a = (const void *)(uintptr_t)g->a, *b = (const void *)(uintptr_t)g->b;
    void *c = (void *)(uintptr_t)g->c;
    int rc;
    if (g->dtype == EM_DTYPE_F32) {
        float alpha = (float)g->alpha, beta = 0;
        int mode = em_cuda_allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
        if (mode != d->blas_mode && (rc = blas.set_math_mode(d->blas, mode)) != 0)
            return em_error(EM_ERR_RUNTIME, "matmul: cuBLAS refused its math mode (status %d)", rc);
        d->blas_mode = mode;
        rc = blas.sgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &alpha, a, g->lda, g->stride_a, b, g->ldb,
                        g->stride_b, &beta, c, g->ldc, g->stride_c, g->batch);
    } else if (g->dtype == EM_DTYPE_F64) {
        double alpha = g->alpha, beta = 0;
        rc = blas.dgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &alpha, a, g->lda, g->stride_a, b, g->ldb,
                        g->stride_b, &beta, c, g->ldc, g->stride_c, g->batch);
    } else { /* float16, bfloat16: products summed in float32, rounded once */
        float alpha = (float)g->alpha, beta = 0;
        int t = g->dtype == EM_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
        rc = blas.gemm_ex(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &alpha, a, t, g->lda, g->stride_a, b, t,
                          g->ldb, g->stride_b, &beta, c, t, g->ldc, g->stride_c, g->batch, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
    }
    return rc == 0 ? EM_OK : em_error(EM_ERR_RUNTIME, "matmul: cuBLAS failed (status %d) on a %d x %d x %d GEMM", rc,
                                      g->m, g->n, g->k);
}

static em_status run_matmul(cuda_dev *d, em_tensor *const *in, const em_attrs *attrs, em_tensor *out) {
    pthread_once(&blas_once, load_blas);
    if (blas.why[0]) return em_error(EM_ERR_NOT_IMPLEMENTED, "matmul on cuda needs cuBLAS: %s", blas.why);
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (!d->blas && (rc = blas.create(&d->blas)) == 0 && (rc = blas.set_stream(d->blas, d->stream)) != 0) d->blas = NULL;
    pthread_mutex_unlock(&d->lock);
    if (rc != 0) return em_error(EM_ERR_RUNTIME, "matmul: cuBLAS did not start on cuda:%d (status %d)", d->dev, rc);
    return em_cuda_matmul(in[0], in[1], out, em_matmul_alpha(attrs), cublas_gemm, d);
}

/* ---- gather and scatter ---- */

static em_status index_ptx(const void *spec, int sm, char **ptx) { return em_cuda_index_ptx(spec, 1, sm, ptx); }

/* out = gather(x, d, index), or x with src scattered into it along d
 * (added with accumulate). A word on the device catches the first index
 * out of range; it is read back (which waits for the kernel), and such an
 * index raises the CPU's error. */
static em_status run_index(cuda_dev *d, em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor *out) {
    bool scatter = op == EM_OP_SCATTER;
    int dim = (int)attrs->dims[0];
    em_tensor *x = in[0];
    em_cuda_index_kernel k = {op, x->dtype, in[1]->dtype, scatter && attrs->accumulate};
    em_status st = em_cuda_index_check(&k);
    if (st != EM_OK) return st;
    em_tensor *ix = on_device(in[1], out->device), *moved = scatter ? on_device(in[2], out->device) : NULL;
    em_tensor *src = moved ? converted(d, moved, x->dtype) : NULL;
    if (!ix || (scatter && !src)) st = em_last_status();
    if (st == EM_OK && scatter) st = run_elementwise(d, EM_OP_CAST, &x, 1, out); /* (out starts as x) */
    uint64_t bad = 0;
    long long seen = INT64_MIN;
    if (st == EM_OK && ix->numel > 0) {
        pthread_mutex_lock(&d->lock);
        st = em_cuda_alloc(d->alloc, sizeof seen, &bad);
        pthread_mutex_unlock(&d->lock);
        if (st == EM_OK) st = cuda_from_host(out->device.index, (void *)(uintptr_t)bad, &seen, sizeof seen);
        em_cuda_index_geometry g;
        if (scatter)
            em_cuda_scatter_geometry(out, ix, src, dim, &g);
        else
            em_cuda_gather_geometry(x, ix, out, dim, &g);
        char name[96];
        em_cuda_index_name(&k, name, sizeof name);
        CUfunction fn;
        if (st == EM_OK) st = kernel(d, name, NULL, index_ptx, &k, &fn);
        long long n = ix->numel;
        CUdeviceptr o = address(out), a = address(ix), b = scatter ? address(src) : address(x), w = bad;
        /* (gather: out, x, index; scatter: out, index, src) */
        void *params[] = {&n, &g, &o, scatter ? (void *)&a : (void *)&b, scatter ? (void *)&b : (void *)&a, &w};
        if (st == EM_OK) st = launch(d, fn, blocks_for(d, n), params, name);
        if (st == EM_OK) st = cuda_to_host(out->device.index, &seen, (void *)(uintptr_t)bad, sizeof seen);
        if (st == EM_OK && seen != INT64_MIN)
            st = em_error(EM_ERR_RUNTIME, "%s: index %lld is out of bounds for dimension %d with size %lld",
                          em_op_name(op), seen, dim, (long long)(x->ndim ? x->shape[dim] : 1));
        pthread_mutex_lock(&d->lock);
        if (bad) em_cuda_release(d->alloc, bad);
        pthread_mutex_unlock(&d->lock);
    }
    em_tensor_release(ix);
    em_tensor_release(moved);
    em_tensor_release(src);
    return st;
}

/* ---- views and copies ---- */

static em_status run_view(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out, cuda_dev *d) {
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS], off;
    int nd;
    em_tensor *src = in[0], *copy = NULL;
    if (!em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off)) {
        if (op != EM_OP_RESHAPE) return em_error(EM_ERR_INTERNAL, "%s: no view geometry", em_op_name(op));
        /* reshape of strides that allow no view: of a copy, as on the CPU */
        if (!(src = copy = em_tensor_empty(in[0]->shape, in[0]->ndim, in[0]->dtype, in[0]->device)))
            return em_last_status();
        em_status st = run_elementwise(d, EM_OP_CAST, in, 1, copy);
        if (st != EM_OK) {
            em_tensor_release(copy);
            return st;
        }
        em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off);
    }
    out[0] = em_tensor_alias(src, src->offset + off, shape, strides, nd);
    em_tensor_release(copy);
    return out[0] ? EM_OK : em_last_status();
}

static em_status run_contiguous(cuda_dev *d, em_tensor *x, em_tensor **out) {
    if (em_tensor_is_contiguous(x)) {
        em_tensor_retain(x);
        out[0] = x;
        return EM_OK;
    }
    if (!(out[0] = em_tensor_empty(x->shape, x->ndim, x->dtype, x->device))) return em_last_status();
    em_status st = run_elementwise(d, EM_OP_CAST, &x, 1, out[0]);
    if (st != EM_OK) {
        em_tensor_release(out[0]);
        out[0] = NULL;
    }
    return st;
}

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
        st = cuda_memory.from_host(out->device.index, em_tensor_data(out), em_tensor_data(h),
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
    case EM_KIND_RANDOM: return true;
    case EM_KIND_REDUCE: return true;
    case EM_KIND_MATMUL: return op == EM_OP_MATMUL;
    default: return is_line_op(op) || em_cuda_window_op(op) || em_cuda_indexing_op(op) || em_cuda_movement_op(op) ||
                      op == EM_OP_SORT || op == EM_OP_TOPK || op == EM_OP_KTHVALUE || op == EM_OP_MEDIAN ||
                      op == EM_OP_NANMEDIAN || op == EM_OP_GATHER || op == EM_OP_SCATTER || (info->flags & EM_F_ELEMENTWISE) != 0;
    }
}

static em_status cuda_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    const em_op_info *info = em_op_get(op);
    em_device where = n_in > 0 ? in[0]->device : out[0] ? out[0]->device : attrs->device;
    for (int i = 0; i < n_in && where.type != EM_DEVICE_CUDA; i++) where = in[i]->device;
    cuda_dev *d;
    em_status st = enter(where.index, &d);
    if (st != EM_OK) return st;
    switch (info->kind) {
    case EM_KIND_VIEW: return run_view(op, in, attrs, out, d);
    case EM_KIND_COPY: return run_contiguous(d, in[0], out);
    case EM_KIND_CAST: return run_elementwise(d, op, in, 1, out[0]);
    case EM_KIND_REDUCE: return run_reduce(d, op, in[0], attrs, out[0]);
    case EM_KIND_MATMUL: return run_matmul(d, in, attrs, out[0]);
    case EM_KIND_FACTORY:
    case EM_KIND_RANDOM: return run_on_host(d, op, attrs, out[0]);
    default:
        if (op == EM_OP_GATHER || op == EM_OP_SCATTER) return run_index(d, op, in, attrs, out[0]);
        if (em_cuda_window_op(op)) return em_cuda_run_window(d, op, in, n_in, attrs, out);
        if (em_cuda_indexing_op(op)) return em_cuda_run_indexing(d, op, in, n_in, attrs, out);
        if (em_cuda_movement_op(op)) return em_cuda_run_movement(d, op, in, n_in, attrs, out);
        if (op == EM_OP_SORT) return em_cuda_run_sort(d, in[0], attrs, out);
        if (op == EM_OP_TOPK || op == EM_OP_KTHVALUE || op == EM_OP_MEDIAN || op == EM_OP_NANMEDIAN)
            return em_cuda_select(op, in, attrs, out);
        return is_line_op(op) ? run_lines(d, op, in, n_in, attrs, out[0]) : run_elementwise(d, op, in, n_in, out[0]);
    }
}

static em_status cuda_write(em_op op, em_tensor *const *in, int n_in, em_tensor *out) {
    cuda_dev *d;
    em_status st = enter(out->device.index, &d);
    return st == EM_OK ? run_elementwise(d, op, in, n_in, out) : st;
}

/* ---- what the op files take (device_internal.h) ---- */

em_status em_cuda_dev_enter(int index, cuda_dev **d) { return enter(index, d); }

em_status em_cuda_dev_kernel(cuda_dev *d, const char *name, const char *also, em_cuda_ptx_fn ptx_of, const void *spec,
                             CUfunction *fn) {
    return kernel(d, name, also, ptx_of, spec, fn);
}

em_status em_cuda_dev_launch(cuda_dev *d, CUfunction fn, long long blocks, void **params, const char *what) {
    return launch(d, fn, blocks, params, what);
}

long long em_cuda_dev_blocks_for(const cuda_dev *d, long long n) { return blocks_for(d, n); }

em_status em_cuda_dev_scratch(cuda_dev *d, size_t bytes, uint64_t *ptr) {
    pthread_mutex_lock(&d->lock);
    em_status st = em_cuda_alloc(d->alloc, bytes ? bytes : 1, ptr);
    pthread_mutex_unlock(&d->lock);
    return st;
}

void em_cuda_dev_scratch_free(cuda_dev *d, uint64_t ptr) {
    if (!ptr) return;
    pthread_mutex_lock(&d->lock);
    em_cuda_release(d->alloc, ptr);
    pthread_mutex_unlock(&d->lock);
}

em_status em_cuda_dev_word(cuda_dev *d, long long value, uint64_t *ptr) {
    em_status st = em_cuda_dev_scratch(d, sizeof value, ptr);
    CUresult rc = st == EM_OK ? em_cu()->MemcpyHtoD((CUdeviceptr)*ptr, &value, sizeof value) : EM_CU_SUCCESS;
    if (rc != EM_CU_SUCCESS) {
        em_cuda_dev_scratch_free(d, *ptr);
        *ptr = 0;
        return cu_fail("a copy from the host (cuMemcpyHtoD)", rc);
    }
    return st;
}

em_status em_cuda_dev_read_word(cuda_dev *d, uint64_t ptr, long long *value) {
    (void)d;
    CUresult rc = em_cu()->MemcpyDtoH(value, (CUdeviceptr)ptr, sizeof *value);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("a copy to the host (cuMemcpyDtoH)", rc);
}

em_tensor *em_cuda_dev_on_device(em_tensor *t, em_device dev) { return on_device(t, dev); }

em_tensor *em_cuda_dev_converted(cuda_dev *d, em_tensor *x, em_dtype dt) { return converted(d, x, dt); }

em_status em_cuda_dev_ew_into(cuda_dev *d, em_op op, em_tensor *const *in, int n_in, em_tensor *out) {
    return run_elementwise(d, op, in, n_in, out);
}

em_status em_cuda_dev_copy_into(cuda_dev *d, em_tensor *out, em_tensor *x) {
    return run_elementwise(d, EM_OP_CAST, &x, 1, out);
}

static const em_device_impl cuda_device = {"cuda", &cuda_memory, cuda_supports, cuda_run, cuda_write, &em_cuda_optim};

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
            snprintf(why, n, "ember compiles its CUDA kernels with NVRTC, which could not be loaded: %s", compiler);
        else if (!registered)
            snprintf(why, n, "this program did not register ember's CUDA device (em_cuda_device_register)");
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
    return index <= 0 ? EM_OK : em_error(EM_ERR_DEVICE, "CUDA error: invalid device ordinal (cuda:%d; 1 device)", index);
}

em_status em_cuda_device_properties(int index, em_cuda_properties *out) {
    memset(out, 0, sizeof *out);
    if (em_cuda_stand_in_active()) {
        snprintf(out->name, sizeof out->name, "host stand-in for a CUDA device (EMBER_CUDA_HOST_STAND_IN=1)");
        out->multiprocessors = 1;
        return stand_in_index(index);
    }
    cuda_dev *d;
    em_status st = enter(index, &d);
    if (st != EM_OK) return st;
    snprintf(out->name, sizeof out->name, "%s", d->name);
    out->major = d->sm / 10;
    out->minor = d->sm % 10;
    out->total_memory = d->total_memory;
    out->multiprocessors = d->sms;
    return EM_OK;
}

em_status em_cuda_synchronize(int index) {
    return em_cuda_stand_in_active() ? stand_in_index(index) : cuda_synchronize(index);
}

em_status em_cuda_stream_handle(int index, uint64_t *stream) {
    *stream = 0;
    if (em_cuda_stand_in_active()) return stand_in_index(index);
    cuda_dev *d;
    em_status st = enter(index, &d);
    if (st == EM_OK) *stream = (uint64_t)(uintptr_t)d->stream;
    return st;
}

em_status em_cuda_wait_stream(uint64_t stream) {
    if (em_cuda_stand_in_active()) return EM_OK;
    cuda_dev *d;
    em_status st = enter(-1, &d); /* (a context current on this thread) */
    if (st != EM_OK) return st;
    CUresult rc = em_cu()->StreamSynchronize((CUstream)(uintptr_t)stream);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("waiting for the producer's stream (cuStreamSynchronize)", rc);
}

em_status em_cuda_pointer_device(uint64_t ptr, int *index) {
    *index = 0;
    if (em_cuda_stand_in_active()) return EM_OK;
    cuda_dev *d;
    em_status st = enter(-1, &d);
    if (st != EM_OK) return st;
    unsigned type = 0;
    int ordinal = -1;
    CUresult rc = em_cu()->PointerGetAttribute(&type, EM_CU_POINTER_MEMORY_TYPE, (CUdeviceptr)ptr);
    if (rc == EM_CU_SUCCESS && type == EM_CU_MEMORYTYPE_DEVICE)
        rc = em_cu()->PointerGetAttribute(&ordinal, EM_CU_POINTER_DEVICE_ORDINAL, (CUdeviceptr)ptr);
    if (rc != EM_CU_SUCCESS || type != EM_CU_MEMORYTYPE_DEVICE || ordinal < 0)
        return em_error(EM_ERR_VALUE, "the CUDA array interface's pointer 0x%llx is not CUDA device memory",
                        (unsigned long long)ptr);
    *index = ordinal;
    return EM_OK;
}

/* Devices never started have no allocator and hold nothing: zeros. */
em_status em_cuda_memory_stats_of(int index, em_cuda_memory_stats *out) {
    memset(out, 0, sizeof *out);
    if (index < 0) index = 0;
    if (index >= MAX_DEVICES) return em_error(EM_ERR_DEVICE, "CUDA error: invalid device ordinal (cuda:%d)", index);
    cuda_dev *d = &devs[index];
    if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return EM_OK;
    pthread_mutex_lock(&d->lock);
    em_cuda_allocator_stats(d->alloc, out);
    pthread_mutex_unlock(&d->lock);
    return EM_OK;
}

void em_cuda_empty_cache_of(int index) {
    if (index < 0) index = 0;
    if (index >= MAX_DEVICES || !__atomic_load_n(&devs[index].ready, __ATOMIC_ACQUIRE)) return;
    cuda_dev *d;
    if (enter(index, &d) != EM_OK) return; /* (segments go back through the device's context) */
    pthread_mutex_lock(&d->lock);
    em_cuda_empty_cache(d->alloc);
    pthread_mutex_unlock(&d->lock);
}

void em_cuda_reset_peak_memory_stats(int index) {
    if (index < 0) index = 0;
    if (index >= MAX_DEVICES) return;
    cuda_dev *d = &devs[index];
    if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&d->lock);
    em_cuda_allocator_reset_peaks(d->alloc);
    pthread_mutex_unlock(&d->lock);
}

/* ---- events (torch.cuda.Event): points in a device's stream ---- */

struct em_cuda_event {
    int index;
    bool timing, recorded;
    CUevent ev;    /* NULL under the stand-in, whose work is done when queued */
    double host_s; /* the stand-in's record time */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

em_cuda_event *em_cuda_event_new(int index, bool timing) {
    em_cuda_event *e = calloc(1, sizeof *e);
    if (!e) {
        em_error(EM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    e->index = index < 0 ? 0 : index;
    e->timing = timing;
    if (em_cuda_stand_in_active()) return e;
    cuda_dev *d;
    if (enter(e->index, &d) != EM_OK) {
        free(e);
        return NULL;
    }
    /* (CU_EVENT_DISABLE_TIMING = 2: cheaper, as PyTorch's default) */
    CUresult rc = em_cu()->EventCreate(&e->ev, timing ? 0 : 2);
    if (rc != EM_CU_SUCCESS) {
        cu_fail("cuEventCreate", rc);
        free(e);
        return NULL;
    }
    return e;
}

em_status em_cuda_event_record(em_cuda_event *e) {
    e->recorded = true;
    if (!e->ev) {
        e->host_s = now_s();
        return EM_OK;
    }
    cuda_dev *d;
    em_status st = enter(e->index, &d);
    CUresult rc = st == EM_OK ? em_cu()->EventRecord(e->ev, d->stream) : EM_CU_SUCCESS;
    return st != EM_OK ? st : rc == EM_CU_SUCCESS ? EM_OK : cu_fail("cuEventRecord", rc);
}

em_status em_cuda_event_synchronize(em_cuda_event *e) {
    if (!e->ev || !e->recorded) return EM_OK;
    CUresult rc = em_cu()->EventSynchronize(e->ev);
    return rc == EM_CU_SUCCESS ? EM_OK : cu_fail("cuEventSynchronize", rc);
}

int em_cuda_event_query(em_cuda_event *e) {
    if (!e->ev || !e->recorded) return 1;
    CUresult rc = em_cu()->EventQuery(e->ev);
    if (rc == EM_CU_SUCCESS) return 1;
    if (rc == 600) return 0; /* CUDA_ERROR_NOT_READY */
    cu_fail("cuEventQuery", rc);
    return -1;
}

em_status em_cuda_event_elapsed_ms(em_cuda_event *start, em_cuda_event *end, double *ms) {
    if (!start->timing || !end->timing)
        return em_error(EM_ERR_RUNTIME, "Both events must be created with argument 'enable_timing=True'.");
    if (!start->recorded || !end->recorded)
        return em_error(EM_ERR_RUNTIME, "Both events must be recorded before calculating elapsed time.");
    if (!start->ev || !end->ev) {
        *ms = (end->host_s - start->host_s) * 1e3;
        return EM_OK;
    }
    float t = 0;
    em_status st = em_cuda_event_synchronize(end);
    CUresult rc = st == EM_OK ? em_cu()->EventElapsedTime(&t, start->ev, end->ev) : EM_CU_SUCCESS;
    if (st != EM_OK) return st;
    if (rc != EM_CU_SUCCESS) return cu_fail("cuEventElapsedTime", rc);
    *ms = t;
    return EM_OK;
}

void em_cuda_event_free(em_cuda_event *e) {
    if (!e) return;
    if (e->ev) em_cu()->EventDestroy(e->ev);
    free(e);
}
