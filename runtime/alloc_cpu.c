/*
 * alloc_cpu.c - the CPU caching allocator and the runtime's malloc.
 *
 * Blocks of 64 KiB and more are mmapped and, when freed, go to a cache (up to
 * a byte limit) instead of back to the kernel: a step that makes and frees
 * the same activations every call then touches no fresh page (before the
 * medium tier, the page faults of its 256 KiB activations cost a compiled
 * MLP training step 0.25-0.5 ms of 3). Sizes are rounded to classes, and a
 * request reuses only a block of its own class: free() recomputes the class
 * from the requested size, so both always agree on a block's length.
 *   medium, 64 KiB to 1 MiB: eight classes per power of two (at most 12.5%
 *     wasted), plain pages;
 *   large, 1 MiB and more: 2 MiB steps up to 32 MiB, then eight classes per
 *     power of two; aligned to 2 MiB, so that a kernel with transparent huge
 *     pages always on can back them so, and advised as huge pages only with
 *     EMBER_HUGE_PAGES=1 (as PyTorch's THP_MEM_ALLOC_ENABLE): under the
 *     kernel's default defrag policy an advised fault compacts memory
 *     synchronously, which measured 35-600 ms per fresh 256 MiB against a
 *     steady 140 ms for small pages (loading a checkpoint 3x slower than
 *     PyTorch), for a gain in the noise on streaming kernels and about 6%
 *     on gathers (bench/RESULTS.md, issue 38).
 * Small blocks come from aligned_alloc (malloc's own bins serve them well).
 * Thread-safe: tensors may be freed from any thread.
 *
 * Bytes in use count every block handed out (small ones at their aligned
 * size, cached classes at their class size), and the peak is the most in
 * use at once since em_cpu_reset_peak: how the compiled and eager runs of a
 * step compare in memory (both kept by atomics, off the lock).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ember/alloc.h"
#include "ember/status.h"

#define MEDIUM_MIN ((size_t)64 << 10)
#define LARGE_MIN ((size_t)1 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
#define SMALL_ALIGN 64

typedef struct block {
    void *ptr;
    size_t size;
} block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block *cache;
static size_t cache_len, cache_cap;
static em_cpu_alloc_stats stats;
static bool limit_set;
static bool huge_pages; /* EMBER_HUGE_PAGES=1, read with the cache limit */

/* Fault injection: countdown to the allocation that fails (-1: never). */
static int64_t fail_countdown = -1;
static int64_t attempts;

/* in_use += delta, raising the peak to it */
static void count_in_use(size_t size, bool add) {
    if (!add) {
        __atomic_sub_fetch(&stats.in_use, size, __ATOMIC_RELAXED);
        return;
    }
    size_t now = __atomic_add_fetch(&stats.in_use, size, __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&stats.peak, __ATOMIC_RELAXED);
    while (now > peak &&
           !__atomic_compare_exchange_n(&stats.peak, &peak, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void em_cpu_reset_peak(void) {
    __atomic_store_n(&stats.peak, __atomic_load_n(&stats.in_use, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

static bool should_fail(void) {
    int64_t c = __atomic_load_n(&fail_countdown, __ATOMIC_RELAXED);
    __atomic_fetch_add(&attempts, 1, __ATOMIC_RELAXED);
    if (c < 0) return false;
    if (c == 0) return true;
    __atomic_fetch_sub(&fail_countdown, 1, __ATOMIC_RELAXED);
    return false;
}

int64_t em_alloc_fail_after(int64_t n) {
    __atomic_store_n(&fail_countdown, n, __ATOMIC_RELAXED);
    return __atomic_exchange_n(&attempts, 0, __ATOMIC_RELAXED);
}

static void set_limit_locked(void) {
    if (limit_set) return;
    limit_set = true;
    const char *huge = getenv("EMBER_HUGE_PAGES");
    huge_pages = huge && strcmp(huge, "1") == 0;
    const char *env = getenv("EMBER_CPU_CACHE_MB");
    if (env && *env) {
        stats.cache_limit = (size_t)strtoull(env, NULL, 10) << 20;
        return;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t ram = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)4 << 30;
    stats.cache_limit = ram / 4;
}

static size_t size_class(size_t nbytes) {
    if (nbytes >= LARGE_MIN && nbytes <= ((size_t)32 << 20))
        return (nbytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    size_t p = (size_t)1 << (63 - __builtin_clzll((unsigned long long)nbytes));
    size_t step = p / 8;
    return (nbytes + step - 1) & ~(step - 1);
}

static void *map_block(size_t size) {
    if (size < LARGE_MIN) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    /* Over-map by one huge page and trim, so the block is 2 MiB aligned and
     * every page of it can be a huge page. */
    size_t span = size + HUGE_PAGE;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = start - (uintptr_t)raw, tail = span - head - size;
    if (head) munmap(raw, head);
    if (tail) munmap((char *)start + size, tail);
#ifdef MADV_HUGEPAGE
    if (huge_pages) madvise((void *)start, size, MADV_HUGEPAGE);
#endif
    return (void *)start;
}

static void unmap_all_locked(void) {
    for (size_t i = 0; i < cache_len; i++) munmap(cache[i].ptr, cache[i].size);
    stats.cached = 0;
    cache_len = 0;
}

void *em_cpu_alloc(size_t nbytes) {
    if (should_fail()) {
        em_error(EM_ERR_NOMEM, "out of memory allocating %zu bytes (injected failure)", nbytes);
        return NULL;
    }
    if (nbytes < MEDIUM_MIN) {
        size_t sz = nbytes ? (nbytes + SMALL_ALIGN - 1) & ~(size_t)(SMALL_ALIGN - 1) : SMALL_ALIGN;
        void *p = aligned_alloc(SMALL_ALIGN, sz);
        if (!p) em_error(EM_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
        else count_in_use(sz, true);
        return p;
    }
    size_t size = size_class(nbytes);
    pthread_mutex_lock(&lock);
    set_limit_locked();
    size_t found = cache_len;
    for (size_t i = cache_len; i-- > 0;) /* newest first: likeliest still in cache */
        if (cache[i].size == size) {
            found = i;
            break;
        }
    void *p = NULL;
    if (found < cache_len) {
        p = cache[found].ptr;
        cache[found] = cache[--cache_len];
        stats.cached -= size;
        stats.hits++;
    } else {
        p = map_block(size);
        if (!p) { /* give the cache back to the kernel and try once more */
            unmap_all_locked();
            p = map_block(size);
        }
        stats.misses++;
    }
    pthread_mutex_unlock(&lock);
    if (p) count_in_use(size, true);
    if (!p) em_error(EM_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    return p;
}

void em_cpu_free(void *ptr, size_t nbytes) {
    if (!ptr) return;
    if (nbytes < MEDIUM_MIN) {
        count_in_use(nbytes ? (nbytes + SMALL_ALIGN - 1) & ~(size_t)(SMALL_ALIGN - 1) : SMALL_ALIGN, false);
        free(ptr);
        return;
    }
    size_t size = size_class(nbytes);
    count_in_use(size, false);
    pthread_mutex_lock(&lock);
    set_limit_locked();
    bool cached = false;
    if (stats.cached + size <= stats.cache_limit) {
        if (cache_len == cache_cap) {
            size_t cap = cache_cap ? cache_cap * 2 : 64;
            block *nc = realloc(cache, cap * sizeof *nc);
            if (nc) {
                cache = nc;
                cache_cap = cap;
            }
        }
        if (cache_len < cache_cap) {
            cache[cache_len++] = (block){ptr, size};
            stats.cached += size;
            cached = true;
        }
    }
    if (!cached) munmap(ptr, size);
    pthread_mutex_unlock(&lock);
}

void em_cpu_empty_cache(void) {
    pthread_mutex_lock(&lock);
    unmap_all_locked();
    pthread_mutex_unlock(&lock);
}

void em_cpu_alloc_get_stats(em_cpu_alloc_stats *out) {
    pthread_mutex_lock(&lock);
    set_limit_locked();
    *out = stats;
    out->in_use = __atomic_load_n(&stats.in_use, __ATOMIC_RELAXED);
    out->peak = __atomic_load_n(&stats.peak, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

void *em_malloc(size_t nbytes) {
    void *p = should_fail() ? NULL : malloc(nbytes ? nbytes : 1);
    if (!p) em_error(EM_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    return p;
}

void *em_calloc(size_t n, size_t size) {
    void *p = should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p) em_error(EM_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void em_free(void *ptr) { free(ptr); }

/* ---- the per-thread object caches ---- */

typedef struct object_cache {
    int n[EM_OBJECT_KINDS];
    void *items[EM_OBJECT_KINDS][EM_OBJECT_CACHE];
} object_cache;

static _Thread_local object_cache *thread_cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_made;

/* A thread's cache goes back to malloc when the thread exits. */
static void drop_cache(void *p) {
    object_cache *c = p;
    for (int k = 0; k < EM_OBJECT_KINDS; k++)
        for (int i = 0; i < c->n[k]; i++) free(c->items[k][i]);
    free(c);
    thread_cache = NULL;
}

static void make_cache_key(void) { cache_key_made = pthread_key_create(&cache_key, drop_cache) == 0; }

/* This thread's cache, made on first use; NULL when it cannot be (then
 * objects go straight to malloc and free). */
static object_cache *my_cache(void) {
    if (thread_cache) return thread_cache;
    pthread_once(&cache_once, make_cache_key);
    object_cache *c;
    if (!cache_key_made || !(c = calloc(1, sizeof *c))) return NULL;
    if (pthread_setspecific(cache_key, c) != 0) {
        free(c);
        return NULL;
    }
    return thread_cache = c;
}

void *em_object_alloc(em_object_kind kind, size_t nbytes) {
    object_cache *c = thread_cache;
    if (c && c->n[kind] > 0 && !should_fail()) return c->items[kind][--c->n[kind]];
    return em_malloc(nbytes);
}

void em_object_free(em_object_kind kind, void *ptr) {
    if (!ptr) return;
    object_cache *c = my_cache();
    if (c && c->n[kind] < EM_OBJECT_CACHE) {
        c->items[kind][c->n[kind]++] = ptr;
        return;
    }
    free(ptr);
}
