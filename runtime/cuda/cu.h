/*
 * cu.h - the CUDA driver API as ember calls it: the few types and entry
 * points the CUDA device uses, resolved from libcuda.so.1 at run time
 * (driver.c). ember links no CUDA library and includes no CUDA header, so
 * one build runs with and without a driver, and builds where the toolkit
 * is absent. The declarations follow the driver API's (cuda.h, CUDA 12
 * and later: the `_v2` entry points). Not a public header.
 */
#ifndef EMBER_RUNTIME_CUDA_CU_H
#define EMBER_RUNTIME_CUDA_CU_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult; /* 0: CUDA_SUCCESS */
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;

enum {
    EM_CU_SUCCESS = 0,
    EM_CU_ERROR_OUT_OF_MEMORY = 2,
    /* cuDeviceGetAttribute */
    EM_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    EM_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    EM_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    EM_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    /* cuPointerGetAttribute */
    EM_CU_POINTER_MEMORY_TYPE = 2,    /* a CUmemorytype: */
    EM_CU_MEMORYTYPE_DEVICE = 2,
    EM_CU_POINTER_DEVICE_ORDINAL = 9,
};

/* The entry points, loaded once (em_cu); NULL members never: a driver
 * that lacks one is no driver to ember. */
typedef struct em_cu_api {
    CUresult (*Init)(unsigned flags);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*DeviceGetAttribute)(int *value, int attribute, CUdevice dev);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*CtxSetCurrent)(CUcontext ctx);
    CUresult (*CtxSynchronize)(void);
    CUresult (*StreamCreate)(CUstream *stream, unsigned flags);
    CUresult (*StreamSynchronize)(CUstream stream);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);
    CUresult (*ModuleLoadData)(CUmodule *module, const void *image);
    CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule module, const char *name);
    CUresult (*LaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, CUstream stream, void **params, void **extra);
    CUresult (*GetErrorString)(CUresult error, const char **text);
    CUresult (*EventCreate)(CUevent *event, unsigned flags);
    CUresult (*EventRecord)(CUevent event, CUstream stream);
    CUresult (*EventSynchronize)(CUevent event);
    CUresult (*EventQuery)(CUevent event);
    CUresult (*EventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*EventDestroy)(CUevent event);
    CUresult (*PointerGetAttribute)(void *data, int attribute, CUdeviceptr ptr);
} em_cu_api;

/* The driver's entry points once cuInit succeeded and a device exists;
 * NULL otherwise (em_cuda_driver_devices says why). */
const em_cu_api *em_cu(void);

#endif
