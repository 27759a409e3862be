/*
 * driver.c - the CUDA driver, loaded at run time (libcuda.so.1, which only
 * a machine with an NVIDIA driver has): what ember.cuda.is_available()
 * and its errors report. ember links no CUDA library, so one build runs
 * with and without a driver (DESIGN.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ember/cuda.h"

static struct {
    int devices;    /* what cuDeviceGetCount said, or 0 */
    char why[512];  /* why the driver gives no device ("" when it does) */
} drv;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void probe(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(drv.why, sizeof drv.why, "no NVIDIA driver: libcuda.so.1 could not be loaded (%s)",
                 err ? err : "not found");
        return;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int rc = init && count ? init(0) : -1;
    if (rc != 0) {
        snprintf(drv.why, sizeof drv.why, "the NVIDIA driver did not start (cuInit returned %d)", rc);
        return;
    }
    if (count(&drv.devices) != 0 || drv.devices <= 0) {
        drv.devices = 0;
        snprintf(drv.why, sizeof drv.why, "the NVIDIA driver reports no CUDA device");
    }
    /* (lib stays loaded: a driver is not unloaded once initialised) */
}

int em_cuda_driver_devices(char *why, size_t n) {
    pthread_once(&once, probe);
    if (why && n) snprintf(why, n, "%s", drv.why);
    return drv.devices;
}

bool em_cuda_available(char *why, size_t n) {
    char driver[512];
    int devices = em_cuda_driver_devices(driver, sizeof driver);
    if (why && n)
        snprintf(why, n, "%s%sember's CUDA tensors are not built yet (their kernels are generated and compiled to "
                         "PTX, not yet run)",
                 devices ? "" : driver, devices ? "" : "; and ");
    return false;
}
