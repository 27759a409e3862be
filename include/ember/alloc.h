/*
 * alloc.h - memory for tensors and runtime objects.
 *
 * em_cpu_alloc serves tensor data. Blocks of 64 KiB and more are mapped in
 * size classes and kept in a cache when freed, so a later tensor of a similar
 * size reuses memory that is already mapped (a fresh 64 MB block costs ~15 ms
 * of page faults here; a reused one nothing). Blocks of 1 MiB and more are
 * rounded up to 2 MiB and backed by transparent huge pages. Small blocks come
 * from malloc. Both return 64-byte aligned memory or NULL
 * with em_last_error() set (EM_ERR_NOMEM).
 *
 * em_malloc/em_free serve the runtime's own structs. Every allocation in the
 * runtime goes through one of these, so tests can make the n-th fail.
 */
#ifndef EMBER_ALLOC_H
#define EMBER_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void *em_cpu_alloc(size_t nbytes);
void em_cpu_free(void *ptr, size_t nbytes);
/* Unmaps every cached block. */
void em_cpu_empty_cache(void);

typedef struct em_cpu_alloc_stats {
    size_t in_use;      /* bytes handed out and not yet freed            */
    size_t peak;        /* most bytes in use at once since the last reset */
    size_t cached;      /* bytes held in the cache for reuse             */
    size_t cache_limit; /* most bytes the cache keeps (EMBER_CPU_CACHE_MB) */
    int64_t hits;       /* cached-size allocations served from the cache */
    int64_t misses;     /* cached-size allocations that mapped memory    */
} em_cpu_alloc_stats;
void em_cpu_alloc_get_stats(em_cpu_alloc_stats *out);
/* Starts a new peak: from the bytes in use now. */
void em_cpu_reset_peak(void);

/* malloc/calloc/free for runtime structs; NULL + EM_ERR_NOMEM on failure. */
void *em_malloc(size_t nbytes);
void *em_calloc(size_t n, size_t size);
void em_free(void *ptr);

/* The runtime's two most allocated structs, em_tensor and em_storage, come
 * from a per-thread cache of freed ones of their kind (up to
 * EM_OBJECT_CACHE each; the rest go back to malloc, and a thread's cache
 * when it exits): on the smallest ops malloc and free were a tenth of the
 * time. em_object_alloc fails (NULL + EM_ERR_NOMEM) as em_malloc does,
 * fault injection included; its memory is uninitialised. */
typedef enum em_object_kind { EM_OBJECT_TENSOR, EM_OBJECT_STORAGE, EM_OBJECT_KINDS } em_object_kind;
#define EM_OBJECT_CACHE 64
void *em_object_alloc(em_object_kind kind, size_t nbytes);
void em_object_free(em_object_kind kind, void *ptr);

/* Testing: make the allocation after the next `n` fail (n >= 0); -1 turns
 * fault injection off. Returns how many allocations were attempted since the
 * last call (lets a test know when an operation stopped allocating). */
int64_t em_alloc_fail_after(int64_t n);

#ifdef __cplusplus
}
#endif
#endif
