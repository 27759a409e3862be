/*
 * memory.h - each device's memory (issue 41, item 1): where a storage's
 * bytes come from and go back to, and copies between the device and the
 * host. The ground floor of the device table (device.h): tensor.c
 * allocates through it and it depends only on the allocator, so making a
 * tensor never reaches the kernels or dispatch. Not a public header.
 */
#ifndef EMBER_RUNTIME_MEMORY_H
#define EMBER_RUNTIME_MEMORY_H

#include "ember/tensor.h"

typedef struct em_device_memory {
    const char *name;
    /* nbytes of uninitialised memory on device `index`; NULL with the
     * error set. NULL itself for a device without data (meta): its
     * storages have no memory, and nothing reads or writes them. */
    void *(*alloc)(int index, size_t nbytes);
    /* Gives back what alloc gave (ctx NULL): a storage's release. */
    em_release_fn release;
    /* Copies between the device's memory and the host's, and within it. */
    em_status (*to_host)(int index, void *dst, const void *src, size_t nbytes);
    em_status (*from_host)(int index, void *dst, const void *src, size_t nbytes);
    em_status (*copy)(int index, void *dst, const void *src, size_t nbytes);
    /* Waits for the device's queued work. */
    em_status (*synchronize)(int index);
} em_device_memory;

/* The memory of d's type; NULL where this build has none (CUDA without its
 * device layer: issue 43). */
const em_device_memory *em_device_memory_of(em_device d);
/* Gives a device type built outside the runtime (CUDA: it needs the CUDA
 * code generator, a layer above) its memory; device.h's em_device_register
 * calls it. */
void em_device_memory_register(em_device_type type, const em_device_memory *memory);

/* The host's memory (the caching allocator), and its release: what tells
 * ember's own memory, which it may grow or swap, from memory it wraps. */
extern const em_device_memory em_host_memory;
/* The meta device's: no memory at all (em_tensor_has_data is false). */
extern const em_device_memory em_meta_memory;
void em_host_release(void *ctx, void *data, size_t nbytes);

#endif
