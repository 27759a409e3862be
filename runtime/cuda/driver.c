/*
 * driver.c - the CUDA driver, loaded at run time (libcuda.so.1, which only
 * a machine with an NVIDIA driver has): what ember.cuda.is_available()
 * and its errors report, and the entry points the CUDA device calls
 * (cu.h). ember links no CUDA library, so one build runs with and without
 * a driver (DESIGN.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "ember/cuda.h"

static struct {
    int devices;   /* what cuDeviceGetCount said, or 0 */
    char why[512]; /* why the driver gives no device ("" when it does) */
    em_cu_api api; /* its entry points, whole when devices > 0 */
} drv;

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Each entry point of em_cu_api by its exported name (the `_v2` ones where
 * the driver versions them). */
#define EM_CU_ENTRIES(X)                                                                         \
    X(Init, "cuInit") X(DeviceGetCount, "cuDeviceGetCount") X(DeviceGet, "cuDeviceGet")          \
    X(DeviceGetAttribute, "cuDeviceGetAttribute") X(DeviceGetName, "cuDeviceGetName")            \
    X(DeviceTotalMem, "cuDeviceTotalMem_v2") X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") \
    X(CtxSetCurrent, "cuCtxSetCurrent") X(CtxSynchronize, "cuCtxSynchronize")                    \
    X(StreamCreate, "cuStreamCreate") X(StreamSynchronize, "cuStreamSynchronize")                \
    X(MemAlloc, "cuMemAlloc_v2") X(MemFree, "cuMemFree_v2") X(MemGetInfo, "cuMemGetInfo_v2")     \
    X(MemcpyHtoD, "cuMemcpyHtoD_v2") X(MemcpyDtoH, "cuMemcpyDtoH_v2")                            \
    X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2") X(MemsetD8Async, "cuMemsetD8Async")               \
    X(ModuleLoadData, "cuModuleLoadData") X(ModuleGetFunction, "cuModuleGetFunction")            \
    X(LaunchKernel, "cuLaunchKernel") X(GetErrorString, "cuGetErrorString")                      \
    X(EventCreate, "cuEventCreate") X(EventRecord, "cuEventRecord")                              \
    X(EventSynchronize, "cuEventSynchronize") X(EventQuery, "cuEventQuery")                      \
    X(EventElapsedTime, "cuEventElapsedTime") X(EventDestroy, "cuEventDestroy_v2")               \
    X(PointerGetAttribute, "cuPointerGetAttribute")

static void probe(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(drv.why, sizeof drv.why, "no NVIDIA driver: libcuda.so.1 could not be loaded (%s)",
                 err ? err : "not found");
        return;
    }
    em_cu_api api;
    const char *missing = NULL;
    /* (dlsym hands back a data pointer; POSIX guarantees it converts) */
#define LOAD(member, symbol)                                               \
    *(void **)(&api.member) = dlsym(lib, symbol);                          \
    if (!api.member && !missing) missing = symbol;
    EM_CU_ENTRIES(LOAD)
#undef LOAD
    if (missing) {
        snprintf(drv.why, sizeof drv.why, "the NVIDIA driver in libcuda.so.1 lacks %s (too old for ember)", missing);
        return;
    }
    CUresult rc = api.Init(0);
    if (rc != EM_CU_SUCCESS) {
        snprintf(drv.why, sizeof drv.why, "the NVIDIA driver did not start (cuInit returned %d)", rc);
        return;
    }
    if (api.DeviceGetCount(&drv.devices) != EM_CU_SUCCESS || drv.devices <= 0) {
        drv.devices = 0;
        snprintf(drv.why, sizeof drv.why, "the NVIDIA driver reports no CUDA device");
        return;
    }
    drv.api = api;
    /* (lib stays loaded: a driver is not unloaded once initialised) */
}

const em_cu_api *em_cu(void) {
    pthread_once(&once, probe);
    return drv.devices > 0 ? &drv.api : NULL;
}

int em_cuda_driver_devices(char *why, size_t n) {
    pthread_once(&once, probe);
    if (why && n) snprintf(why, n, "%s", drv.why);
    return drv.devices;
}
