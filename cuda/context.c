/*
 * context.c - a CUDA device's resources, made at its first use: its primary
 * context and one blocking stream (every kernel and copy of the device runs
 * on it, in order; the driver's synchronous copies wait for the kernels
 * before them), its memory from the caching allocator over cuMemAlloc (a
 * block handed back is reused by later work on that same stream: PyTorch's
 * rule for a stream's own pool), the device-table memory entry, and the
 * table of its loaded kernels (generated, compiled once by NVRTC through
 * the PTX cache, loaded once). The op files (elementwise.c, reduce.c, ...)
 * take these through internal.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "stand_in.h"
#include "ember/cuda.h"

#define MAX_DEVICES 16

static cuda_dev devs[MAX_DEVICES];
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local CUcontext current_ctx;

em_status em_cuda_fail(const char *what, CUresult rc) {
    const em_cu_api *cu = em_cu();
    const char *text = NULL;
    if (cu) cu->GetErrorString(rc, &text);
    if (rc == EM_CU_ERROR_OUT_OF_MEMORY)
        return em_error(EM_ERR_DEVICE_NOMEM, "CUDA out of memory in %s", what);
    return em_error(EM_ERR_RUNTIME, "CUDA error in %s: %s (%d)", what,
                    text ? text : "unknown error", rc);
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
    if ((rc = cu->DeviceGet(&d->dev, index)) != EM_CU_SUCCESS)
        return em_cuda_fail("cuDeviceGet", rc);
    if ((rc = cu->DevicePrimaryCtxRetain(&d->ctx, d->dev)) != EM_CU_SUCCESS)
        return em_cuda_fail("cuDevicePrimaryCtxRetain", rc);
    if ((rc = cu->CtxSetCurrent(d->ctx)) != EM_CU_SUCCESS)
        return em_cuda_fail("cuCtxSetCurrent", rc);
    current_ctx = d->ctx;
    if ((rc = cu->StreamCreate(&d->stream, 0)) != EM_CU_SUCCESS)
        return em_cuda_fail("cuStreamCreate", rc);
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
em_status em_cuda_dev_enter(int index, cuda_dev **out) {
    if (index < 0) index = 0;
    cuda_dev *d = index < MAX_DEVICES ? &devs[index] : NULL;
    if (!d || !__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) { /* (its first use) */
        char why[512];
        int n = em_cuda_driver_devices(why, sizeof why);
        if (n <= 0) return em_error(EM_ERR_DEVICE, "CUDA is not available: %s", why);
        if (index >= n || !d)
            return em_error(EM_ERR_DEVICE,
                            "CUDA error: invalid device ordinal (cuda:%d; %d device%s)", index, n,
                            n == 1 ? "" : "s");
        pthread_mutex_lock(&init_lock);
        em_status st = d->ready ? EM_OK : start(index, d);
        if (st == EM_OK) __atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&init_lock);
        if (st != EM_OK) return st;
    }
    if (current_ctx != d->ctx) {
        CUresult rc = em_cu()->CtxSetCurrent(d->ctx);
        if (rc != EM_CU_SUCCESS) return em_cuda_fail("cuCtxSetCurrent", rc);
        current_ctx = d->ctx;
    }
    *out = d;
    return EM_OK;
}

/* ---- the device's memory (memory.h) ---- */

static void *cuda_alloc(int index, size_t nbytes) {
    cuda_dev *d;
    if (em_cuda_dev_enter(index, &d) != EM_OK) return NULL;
    uint64_t p = 0;
    pthread_mutex_lock(&d->lock);
    em_status st =
        em_cuda_alloc(d->alloc, nbytes ? nbytes : 1, &p); /* (a storage's data is never NULL) */
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
    em_status st = em_cuda_dev_enter(index, &d);
    if (st != EM_OK || !nbytes) return st;
    CUresult rc = em_cu()->MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, nbytes);
    return rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail("a copy to the host (cuMemcpyDtoH)", rc);
}

static em_status cuda_from_host(int index, void *dst, const void *src, size_t nbytes) {
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(index, &d);
    if (st != EM_OK || !nbytes) return st;
    CUresult rc = em_cu()->MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, nbytes);
    return rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail("a copy from the host (cuMemcpyHtoD)", rc);
}

static em_status cuda_copy(int index, void *dst, const void *src, size_t nbytes) {
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(index, &d);
    if (st != EM_OK || !nbytes) return st;
    CUresult rc = em_cu()->MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                           nbytes, d->stream);
    return rc == EM_CU_SUCCESS ? EM_OK
                               : em_cuda_fail("a copy on the device (cuMemcpyDtoDAsync)", rc);
}

static em_status cuda_synchronize(int index) {
    cuda_dev *d;
    em_status st = em_cuda_dev_enter(index, &d);
    if (st != EM_OK) return st;
    CUresult rc = em_cu()->StreamSynchronize(d->stream);
    return rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail("synchronize", rc);
}

const em_device_memory em_cuda_memory = {"cuda",         cuda_alloc, cuda_release,    cuda_to_host,
                                         cuda_from_host, cuda_copy,  cuda_synchronize};

/* ---- kernels: generated, compiled once, loaded once per device ---- */

static size_t name_hash(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h % KERNEL_BUCKETS;
}

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
em_status em_cuda_dev_kernel(cuda_dev *d, const char *name, const char *also, em_cuda_ptx_fn ptx_of,
                             const void *spec, CUfunction *fn) {
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
    if (rc != EM_CU_SUCCESS)
        return em_cuda_fail("loading a generated module (cuModuleLoadData)", rc);
    /* (the module stays loaded: the driver unloads it with the context) */
    if ((rc = em_cu()->ModuleGetFunction(fn, mod, name)) != EM_CU_SUCCESS)
        return em_cuda_fail(name, rc);
    CUfunction other;
    if (also && em_cu()->ModuleGetFunction(&other, mod, also) == EM_CU_SUCCESS &&
        (st = remember(d, also, other)) != EM_OK)
        return st;
    return remember(d, name, *fn);
}

em_status em_cuda_dev_launch(cuda_dev *d, CUfunction fn, long long blocks, void **params,
                             const char *what) {
    if (blocks < 1) blocks = 1;
    if (blocks > 65535LL * 32) blocks = 65535LL * 32; /* (the kernels stride over the grid) */
    CUresult rc = em_cu()->LaunchKernel(fn, (unsigned)blocks, 1, 1, EM_CUDA_THREADS, 1, 1, 0,
                                        d->stream, params, NULL);
    return rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail(what, rc);
}

/* Blocks for n elements, one per thread, a few waves of the machine at most
 * (the kernels are grid-stride loops). */
long long em_cuda_dev_blocks_for(const cuda_dev *d, long long n) {
    long long b = (n + EM_CUDA_THREADS - 1) / EM_CUDA_THREADS, cap = (long long)d->sms * 32;
    return b < cap ? b : cap;
}

/* ---- scratch memory and report words ---- */

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
    CUresult rc =
        st == EM_OK ? em_cu()->MemcpyHtoD((CUdeviceptr)*ptr, &value, sizeof value) : EM_CU_SUCCESS;
    if (rc != EM_CU_SUCCESS) {
        em_cuda_dev_scratch_free(d, *ptr);
        *ptr = 0;
        return em_cuda_fail("a copy from the host (cuMemcpyHtoD)", rc);
    }
    return st;
}

em_status em_cuda_dev_read_word(cuda_dev *d, uint64_t ptr, long long *value) {
    (void)d;
    CUresult rc = em_cu()->MemcpyDtoH(value, (CUdeviceptr)ptr, sizeof *value);
    return rc == EM_CU_SUCCESS ? EM_OK : em_cuda_fail("a copy to the host (cuMemcpyDtoH)", rc);
}

/* Devices never started have no allocator and hold nothing: zeros. */
em_status em_cuda_memory_stats_of(int index, em_cuda_memory_stats *out) {
    memset(out, 0, sizeof *out);
    if (index < 0) index = 0;
    if (index >= MAX_DEVICES)
        return em_error(EM_ERR_DEVICE, "CUDA error: invalid device ordinal (cuda:%d)", index);
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
    if (em_cuda_dev_enter(index, &d) != EM_OK)
        return; /* (segments go back through the device's context) */
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
