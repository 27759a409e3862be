/*
 * caching_allocator.c - device memory for tensors, kept and reused instead
 * of going back to the driver (cuMemAlloc synchronises the device and
 * costs tens of microseconds; an eager op allocates its result every
 * time). PyTorch's design, in its essentials:
 *
 *   - a request is rounded up to 512 bytes;
 *   - requests up to 1 MiB come from 2 MiB segments, larger ones from a
 *     segment of their own size rounded up to 2 MiB (the "small" and
 *     "large" pools, so that small blocks do not fragment large segments);
 *   - a freed block goes back to its pool's free list, merged with free
 *     neighbours in its segment; a request takes the smallest free block
 *     that fits (best fit) and splits off the rest when the rest is worth
 *     keeping (512 bytes in the small pool, more than 1 MiB in the large);
 *   - when the source is out of memory, segments with nothing in use go
 *     back to it and the request is tried once more; then the error says
 *     what was asked for and what is held, and the allocator stays usable.
 *
 * Where the memory comes from is an em_cuda_memory_source: the driver's
 * cuMemAlloc/cuMemFree on a GPU, host memory with a limit in the tests.
 * One stream per device (the default stream: ops run in order), so a freed
 * block is reusable at once; per-stream pools come with more streams.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/cuda.h"

#define ROUND 512
#define SMALL_REQUEST (1u << 20)  /* up to this: the small pool */
#define SMALL_SEGMENT (2u << 20)  /* the small pool's segments */
#define LARGE_ROUND (2u << 20)    /* large segments are multiples of this */
#define LARGE_SPLIT (1u << 20)    /* the large pool splits off more than this */

typedef struct block {
    uint64_t ptr;
    size_t size;
    bool used, small;
    struct block *prev, *next; /* neighbours in the segment, by address */
} block;

typedef struct {
    block **b; /* free blocks by (size, ptr) */
    size_t n, cap;
} pool;

struct em_cuda_allocator {
    em_cuda_memory_source src;
    pthread_mutex_t lock;
    pool small, large;
    block **segments; /* each segment's first block (it stays first) */
    size_t n_segments, segments_cap;
    block **live; /* blocks in use, an open-addressing table by ptr */
    size_t live_cap, live_n;
    em_cuda_memory_stats st;
};

/* ---- free lists: sorted arrays, best fit by binary search ---- */

static bool before(const block *a, size_t size, uint64_t ptr) {
    return a->size < size || (a->size == size && a->ptr < ptr);
}

static size_t lower_bound(const pool *p, size_t size, uint64_t ptr) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (before(p->b[mid], size, ptr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool pool_insert(pool *p, block *b) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        block **nb = realloc(p->b, cap * sizeof *nb);
        if (!nb) return false;
        p->b = nb;
        p->cap = cap;
    }
    size_t at = lower_bound(p, b->size, b->ptr);
    memmove(p->b + at + 1, p->b + at, (p->n - at) * sizeof *p->b);
    p->b[at] = b;
    p->n++;
    return true;
}

static void pool_remove(pool *p, block *b) {
    size_t at = lower_bound(p, b->size, b->ptr);
    if (at < p->n && p->b[at] == b) {
        memmove(p->b + at, p->b + at + 1, (p->n - at - 1) * sizeof *p->b);
        p->n--;
    }
}

/* ---- blocks in use, by pointer ---- */

static size_t slot(uint64_t ptr, size_t cap) { return (size_t)((ptr >> 9) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static bool live_grow(em_cuda_allocator *a) {
    size_t cap = a->live_cap ? 2 * a->live_cap : 256;
    block **t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < a->live_cap; i++) {
        block *b = a->live[i];
        if (!b) continue;
        size_t s = slot(b->ptr, cap);
        while (t[s]) s = (s + 1) & (cap - 1);
        t[s] = b;
    }
    free(a->live);
    a->live = t;
    a->live_cap = cap;
    return true;
}

static bool live_add(em_cuda_allocator *a, block *b) {
    if (2 * (a->live_n + 1) > a->live_cap && !live_grow(a)) return false;
    size_t s = slot(b->ptr, a->live_cap);
    while (a->live[s]) s = (s + 1) & (a->live_cap - 1);
    a->live[s] = b;
    a->live_n++;
    return true;
}

/* Takes the block at ptr out of the table (NULL: not ours, or not in use). */
static block *live_take(em_cuda_allocator *a, uint64_t ptr) {
    if (!a->live_cap) return NULL;
    size_t s = slot(ptr, a->live_cap);
    while (a->live[s] && a->live[s]->ptr != ptr) s = (s + 1) & (a->live_cap - 1);
    block *b = a->live[s];
    if (!b) return NULL;
    a->live[s] = NULL;
    a->live_n--;
    /* re-seat the run after the hole (linear probing's deletion) */
    for (size_t t = (s + 1) & (a->live_cap - 1); a->live[t]; t = (t + 1) & (a->live_cap - 1)) {
        block *m = a->live[t];
        a->live[t] = NULL;
        size_t u = slot(m->ptr, a->live_cap);
        while (a->live[u]) u = (u + 1) & (a->live_cap - 1);
        a->live[u] = m;
    }
    return b;
}

/* ---- the allocator ---- */

em_cuda_allocator *em_cuda_allocator_new(em_cuda_memory_source src) {
    em_cuda_allocator *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->src = src;
    pthread_mutex_init(&a->lock, NULL);
    return a;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Segments whose one block is free go back to the source. */
static void release_free_segments(em_cuda_allocator *a) {
    size_t kept = 0;
    for (size_t i = 0; i < a->n_segments; i++) {
        block *b = a->segments[i];
        if (!b->used && !b->next) {
            pool_remove(b->small ? &a->small : &a->large, b);
            a->src.free(a->src.ctx, b->ptr);
            a->st.reserved -= b->size;
            a->st.segments--;
            a->st.segment_frees++;
            free(b);
        } else {
            a->segments[kept++] = b;
        }
    }
    a->n_segments = kept;
}

void em_cuda_empty_cache(em_cuda_allocator *a) {
    pthread_mutex_lock(&a->lock);
    release_free_segments(a);
    pthread_mutex_unlock(&a->lock);
}

static em_status out_of_memory(em_cuda_allocator *a, size_t asked) {
    size_t free_cached = 0;
    for (size_t i = 0; i < a->small.n; i++) free_cached += a->small.b[i]->size;
    for (size_t i = 0; i < a->large.n; i++) free_cached += a->large.b[i]->size;
    a->st.ooms++;
    return em_error(EM_ERR_DEVICE_NOMEM,
                    "%s out of memory: tried to allocate %.2f MiB; %.2f MiB is allocated by tensors and %.2f MiB "
                    "reserved in all (%.2f MiB of it cached and free, in pieces too small or too scattered to "
                    "use). Free tensors you no longer need (del, or let them go out of scope) or use smaller "
                    "batches",
                    a->src.name ? a->src.name : "CUDA", asked / 1048576.0, a->st.allocated / 1048576.0,
                    a->st.reserved / 1048576.0, free_cached / 1048576.0);
}

/* A new segment of `size` bytes from the source: freeing what the cache
 * holds and trying once more when the source is out of memory. */
static block *new_segment(em_cuda_allocator *a, size_t size, bool small) {
    if (a->n_segments == a->segments_cap) {
        size_t cap = a->segments_cap ? 2 * a->segments_cap : 64;
        block **t = realloc(a->segments, cap * sizeof *t);
        if (!t) return NULL;
        a->segments = t;
        a->segments_cap = cap;
    }
    uint64_t ptr = 0;
    if (a->src.alloc(a->src.ctx, size, &ptr) != 0) {
        release_free_segments(a);
        if (a->src.alloc(a->src.ctx, size, &ptr) != 0) return NULL;
    }
    block *b = calloc(1, sizeof *b);
    if (!b) {
        a->src.free(a->src.ctx, ptr);
        return NULL;
    }
    a->segments[a->n_segments++] = b;
    *b = (block){.ptr = ptr, .size = size, .small = small};
    a->st.reserved += size;
    a->st.segments++;
    a->st.segment_allocs++;
    if (a->st.reserved > a->st.max_reserved) a->st.max_reserved = a->st.reserved;
    return b;
}

em_status em_cuda_alloc(em_cuda_allocator *a, size_t bytes, uint64_t *ptr) {
    *ptr = 0;
    size_t size = round_up(bytes ? bytes : 1, ROUND);
    if (size < bytes) return em_error(EM_ERR_VALUE, "CUDA allocation of %zu bytes: too large", bytes);
    bool small = size <= SMALL_REQUEST;
    pthread_mutex_lock(&a->lock);
    pool *p = small ? &a->small : &a->large;
    size_t at = lower_bound(p, size, 0);
    block *b = NULL;
    if (at < p->n) {
        b = p->b[at];
        pool_remove(p, b);
        a->st.cache_hits++;
    } else {
        size_t seg = small ? SMALL_SEGMENT : round_up(size, LARGE_ROUND);
        b = seg >= size ? new_segment(a, seg, small) : NULL;
        if (!b) {
            em_status st = out_of_memory(a, size);
            pthread_mutex_unlock(&a->lock);
            return st;
        }
    }
    /* split off the rest when it is worth keeping */
    size_t rest = b->size - size;
    if (small ? rest >= ROUND : rest > LARGE_SPLIT) {
        block *r = calloc(1, sizeof *r);
        if (r) {
            *r = (block){.ptr = b->ptr + size, .size = rest, .small = small, .prev = b, .next = b->next};
            if (b->next) b->next->prev = r;
            b->next = r;
            b->size = size;
            if (!pool_insert(p, r)) { /* (out of host memory: keep the rest in the block) */
                b->next = r->next;
                if (r->next) r->next->prev = b;
                b->size += rest;
                free(r);
            }
        }
    }
    b->used = true;
    if (!live_add(a, b)) {
        b->used = false;
        pool_insert(p, b);
        pthread_mutex_unlock(&a->lock);
        return em_error(EM_ERR_NOMEM, "out of host memory for the CUDA allocator's tables");
    }
    a->st.allocated += b->size;
    a->st.allocations++;
    if (a->st.allocated > a->st.max_allocated) a->st.max_allocated = a->st.allocated;
    *ptr = b->ptr;
    pthread_mutex_unlock(&a->lock);
    return EM_OK;
}

/* Merges free block n into b (n follows b in their segment). */
static void merge(pool *p, block *b, block *n) {
    pool_remove(p, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
}

em_status em_cuda_release(em_cuda_allocator *a, uint64_t ptr) {
    if (!ptr) return EM_OK;
    pthread_mutex_lock(&a->lock);
    block *b = live_take(a, ptr);
    if (!b) {
        pthread_mutex_unlock(&a->lock);
        return em_error(EM_ERR_INTERNAL, "CUDA free of 0x%llx, which the caching allocator did not hand out (or "
                                         "which was freed already)", (unsigned long long)ptr);
    }
    pool *p = b->small ? &a->small : &a->large;
    a->st.allocated -= b->size;
    a->st.frees++;
    b->used = false;
    if (b->next && !b->next->used) merge(p, b, b->next);
    if (b->prev && !b->prev->used) {
        block *prev = b->prev;
        pool_remove(p, prev);
        merge(p, prev, b); /* (b is not in the pool: its removal finds nothing) */
        b = prev;
    }
    if (!pool_insert(p, b)) {
        /* out of host memory: a block that cannot be listed is lost to reuse
         * until empty_cache; never handed out twice */
    }
    pthread_mutex_unlock(&a->lock);
    return EM_OK;
}

void em_cuda_allocator_stats(em_cuda_allocator *a, em_cuda_memory_stats *out) {
    pthread_mutex_lock(&a->lock);
    *out = a->st;
    pthread_mutex_unlock(&a->lock);
}

void em_cuda_allocator_reset_peaks(em_cuda_allocator *a) {
    pthread_mutex_lock(&a->lock);
    a->st.max_allocated = a->st.allocated;
    a->st.max_reserved = a->st.reserved;
    pthread_mutex_unlock(&a->lock);
}

void em_cuda_allocator_free(em_cuda_allocator *a) {
    if (!a) return;
    /* every segment goes back, with its blocks, in use or not */
    for (size_t i = 0; i < a->n_segments; i++) {
        block *b = a->segments[i];
        a->src.free(a->src.ctx, b->ptr);
        while (b) {
            block *next = b->next;
            free(b);
            b = next;
        }
    }
    free(a->segments);
    free(a->small.b);
    free(a->large.b);
    free(a->live);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
