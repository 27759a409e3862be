/*
 * cuda.h - the CUDA device as the runtime sees it (runtime/cuda/).
 *
 * The driver (libcuda.so.1) is loaded at run time, so one build of ember
 * runs with and without one. Tensors on "cuda" live in the CUDA device
 * (cuda/device.c, library ember_cuda): the caching allocator over
 * cuMemAlloc, and the code generator's kernels (codegen_cuda.h) launched
 * on a stream per device. A program registers that device once
 * (em_cuda_device_register; ember's Python module does); the driver starts
 * at the first tensor made there.
 */
#ifndef EMBER_CUDA_H
#define EMBER_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many CUDA devices the driver reports: 0 without a driver, and then
 * `why` (if not NULL) says why, e.g. "no NVIDIA driver: libcuda.so.1 could
 * not be loaded (...)". */
int em_cuda_driver_devices(char *why, size_t why_size);
/* Can tensors live on a CUDA device? A driver with a device, NVRTC, and
 * the CUDA device registered; otherwise false, and `why` says what is
 * missing. (ember_cuda) */
bool em_cuda_available(char *why, size_t why_size);
/* Installs the CUDA device in the device table (ember_cuda). Cheap: no
 * driver call until a tensor is made on "cuda". With
 * EMBER_CUDA_HOST_STAND_IN=1 in the environment it installs a stand-in
 * instead, for tests on machines without a GPU: "cuda" tensors in host
 * memory, run by the CPU's kernels (cuda/stand_in.c). */
void em_cuda_device_register(void);
/* The CUDA devices tensors can live on: 0 where em_cuda_available is
 * false. */
int em_cuda_device_count(void);
/* What torch.cuda.get_device_properties says of a device. */
typedef struct em_cuda_properties {
    char name[128];
    int major, minor;    /* compute capability */
    size_t total_memory; /* bytes */
    int multiprocessors;
} em_cuda_properties;
/* Device `index`'s properties (it starts the device; the host stand-in's
 * name says so, capability 0.0, no memory, one multiprocessor). */
em_status em_cuda_device_properties(int index, em_cuda_properties *out);
/* May float32 matmuls use TF32 (cuBLAS's TF32 math mode)? Off by
 * default, as torch.backends.cuda.matmul.allow_tf32. */
void em_cuda_set_allow_tf32(bool on);
bool em_cuda_allow_tf32(void);
/* An event of device `index` (torch.cuda.Event): a point in the device's
 * stream (ember queues a device's work on one stream). timing: it keeps
 * the time it was reached, for em_cuda_event_elapsed_ms. Under the host
 * stand-in, work is done when queued and the times are the host's. */
typedef struct em_cuda_event em_cuda_event;
em_cuda_event *em_cuda_event_new(int index, bool timing);
em_status em_cuda_event_record(em_cuda_event *e);
em_status em_cuda_event_synchronize(em_cuda_event *e);
/* 1: reached (or never recorded), 0: not yet, -1: an error (set). */
int em_cuda_event_query(em_cuda_event *e);
/* Milliseconds from start to end, both recorded with timing. */
em_status em_cuda_event_elapsed_ms(em_cuda_event *start, em_cuda_event *end, double *ms);
void em_cuda_event_free(em_cuda_event *e);
/* Waits for everything queued on device `index`. */
em_status em_cuda_synchronize(int index);
/* The stream device `index` runs its work on, as an integer (the CUDA array
 * interface's "stream"); 0 under the host stand-in, which has none. */
em_status em_cuda_stream_handle(int index, uint64_t *stream);
/* Waits for another library's stream (an integer CUstream) to finish what
 * it queued: before reading memory it hands over. */
em_status em_cuda_wait_stream(uint64_t stream);
/* The CUDA device that allocated `ptr` (device memory), or an error. */
em_status em_cuda_pointer_device(uint64_t ptr, int *index);

/* ---- the caching allocator (runtime/cuda/caching_allocator.c) ---- */

/* Where the allocator's segments come from: the driver's cuMemAlloc and
 * cuMemFree on a GPU; host memory with a limit in the tests. alloc returns
 * 0 and the address, or nonzero when out of memory (the allocator then
 * frees what it caches and asks once more). name says which in errors
 * ("CUDA" when NULL). */
typedef struct em_cuda_memory_source {
    void *ctx;
    int (*alloc)(void *ctx, size_t bytes, uint64_t *ptr);
    void (*free)(void *ctx, uint64_t ptr);
    const char *name;
} em_cuda_memory_source;

/* In bytes, and counts since the allocator was made (peaks: since the last
 * reset). PyTorch's memory_stats names: allocated_bytes, reserved_bytes. */
typedef struct em_cuda_memory_stats {
    size_t allocated, max_allocated; /* handed out to tensors (rounded sizes) */
    size_t reserved, max_reserved;   /* held from the source: segments */
    long long segments;              /* held now */
    long long allocations, frees, cache_hits, segment_allocs, segment_frees, ooms;
} em_cuda_memory_stats;

typedef struct em_cuda_allocator em_cuda_allocator;

em_cuda_allocator *em_cuda_allocator_new(em_cuda_memory_source src);
/* Returns every segment to the source (blocks still in use included). */
void em_cuda_allocator_free(em_cuda_allocator *a);
/* At least `bytes` (512-byte aligned within a segment) at *ptr; out of
 * memory after freeing the cache: EM_ERR_DEVICE_NOMEM, naming the size
 * asked for and what is held. */
em_status em_cuda_alloc(em_cuda_allocator *a, size_t bytes, uint64_t *ptr);
/* Back to the cache (0: nothing); an address it did not hand out: an
 * error, nothing freed. */
em_status em_cuda_release(em_cuda_allocator *a, uint64_t ptr);
/* Segments with nothing in use go back to the source. */
void em_cuda_empty_cache(em_cuda_allocator *a);
void em_cuda_allocator_stats(em_cuda_allocator *a, em_cuda_memory_stats *out);
void em_cuda_allocator_reset_peaks(em_cuda_allocator *a);

/* The CUDA device's allocator for device `index` (ember_cuda): its
 * figures (zeros for a device not started), its cache emptied, its peaks
 * reset. */
em_status em_cuda_memory_stats_of(int index, em_cuda_memory_stats *out);
void em_cuda_empty_cache_of(int index);
void em_cuda_reset_peak_memory_stats(int index);

#ifdef __cplusplus
}
#endif
#endif
