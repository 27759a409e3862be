/*
 * memory.c - the device memory table (memory.h): the host's memory from
 * the caching allocator, copies by memmove, nothing to wait for.
 */
#include <string.h>

#include "ember/alloc.h"
#include "ember/status.h"
#include "memory.h"

static void *host_alloc(int index, size_t nbytes) {
    (void)index;
    return em_cpu_alloc(nbytes);
}

void em_host_release(void *ctx, void *data, size_t nbytes) {
    (void)ctx;
    em_cpu_free(data, nbytes);
}

static em_status host_memmove(int index, void *dst, const void *src, size_t nbytes) {
    (void)index;
    if (nbytes) memmove(dst, src, nbytes);
    return EM_OK;
}

static em_status host_synchronize(int index) {
    (void)index;
    return EM_OK;
}

const em_device_memory em_host_memory = {"cpu", host_alloc, em_host_release, host_memmove, host_memmove,
                                         host_memmove, host_synchronize};

/* The meta device holds no data: nothing to allocate, and every copy in or
 * out of it is refused by the callers that know what was asked (copy_,
 * .to(), .item()) before it comes here. */
static em_status no_data(int index, void *dst, const void *src, size_t nbytes) {
    (void)index;
    (void)dst;
    (void)src;
    (void)nbytes;
    return em_error(EM_ERR_NOT_IMPLEMENTED, "Cannot copy out of meta tensor; no data!");
}

const em_device_memory em_meta_memory = {"meta", NULL, NULL, no_data, no_data, no_data, host_synchronize};

/* An entry per device type this build has memory for. */
static const em_device_memory *memories[] = {[EM_DEVICE_CPU] = &em_host_memory, [EM_DEVICE_META] = &em_meta_memory,
                                             [EM_DEVICE_CUDA] = NULL};

void em_device_memory_register(em_device_type type, const em_device_memory *memory) {
    if ((unsigned)type < sizeof memories / sizeof *memories && type != EM_DEVICE_CPU && type != EM_DEVICE_META)
        __atomic_store_n(&memories[type], memory, __ATOMIC_RELEASE);
}

const em_device_memory *em_device_memory_of(em_device d) {
    return (unsigned)d.type < sizeof memories / sizeof *memories ? __atomic_load_n(&memories[d.type], __ATOMIC_ACQUIRE)
                                                                  : NULL;
}
