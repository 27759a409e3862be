/*
 * test_cuda_allocator.c - the CUDA caching allocator on host memory with a
 * limit (no GPU needed: the allocator only asks its source for segments):
 * rounding and pools, reuse, splitting and merging, running out of memory
 * (the cache freed, one retry, then an error that names the sizes, and the
 * allocator still usable), bad frees, the statistics, and a random
 * sequence in which no two live blocks ever overlap.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ember/cuda.h"


#define MiB ((size_t)1 << 20)

/* Host memory standing in for a device's: at most `limit` bytes held. */
typedef struct {
    size_t limit, held;
    int allocs, frees, refusals;
} host_source;

typedef struct {
    uint64_t ptr;
    size_t size;
} seg;
static seg segs[4096];
static int n_segs;

static int host_alloc(void *ctx, size_t bytes, uint64_t *ptr) {
    host_source *h = ctx;
    if (h->held + bytes > h->limit || n_segs == 4096) {
        h->refusals++;
        return 1;
    }
    void *p = aligned_alloc(512, bytes);
    if (!p) return 1;
    h->held += bytes;
    h->allocs++;
    *ptr = (uint64_t)(uintptr_t)p;
    segs[n_segs++] = (seg){*ptr, bytes};
    return 0;
}

static void host_free(void *ctx, uint64_t ptr) {
    host_source *h = ctx;
    for (int i = 0; i < n_segs; i++)
        if (segs[i].ptr == ptr) {
            h->held -= segs[i].size;
            segs[i] = segs[--n_segs];
            break;
        }
    h->frees++;
    free((void *)(uintptr_t)ptr);
}

static em_cuda_allocator *make(host_source *h, size_t limit) {
    memset(h, 0, sizeof *h);
    h->limit = limit;
    return em_cuda_allocator_new((em_cuda_memory_source){h, host_alloc, host_free, "test device"});
}

static em_cuda_memory_stats stats(em_cuda_allocator *a) {
    em_cuda_memory_stats s;
    em_cuda_allocator_stats(a, &s);
    return s;
}

static void small_requests_share_segments(void) {
    host_source h;
    em_cuda_allocator *a = make(&h, 64 * MiB);
    uint64_t p[3];
    CHECK_MSG(em_cuda_alloc(a, 1, &p[0]) == EM_OK, "%s", em_last_error());
    CHECK_MSG(em_cuda_alloc(a, 700, &p[1]) == EM_OK, "%s", em_last_error());
    CHECK_MSG(em_cuda_alloc(a, 4000, &p[2]) == EM_OK, "%s", em_last_error());
    CHECK_MSG(h.allocs == 1, "three small requests took %d segments", h.allocs);
    CHECK_MSG(p[1] == p[0] + 512 && p[2] == p[1] + 1024, "not split in order: %llx %llx %llx",
          (unsigned long long)p[0], (unsigned long long)p[1], (unsigned long long)p[2]);
    em_cuda_memory_stats s = stats(a);
    CHECK_MSG(s.allocated == 512 + 1024 + 4096, "allocated %zu (rounded to 512)", s.allocated);
    CHECK_MSG(s.reserved == 2 * MiB && s.segments == 1, "reserved %zu in %lld", s.reserved, s.segments);
    /* a freed block is reused at once, by a request of its size or less */
    CHECK_MSG(em_cuda_release(a, p[1]) == EM_OK, "%s", em_last_error());
    uint64_t q;
    CHECK_MSG(em_cuda_alloc(a, 600, &q) == EM_OK && q == p[1], "the freed block was not reused");
    CHECK_MSG(stats(a).cache_hits >= 2, "cache hits %lld", stats(a).cache_hits);
    /* freeing all merges the segment back into one block: a request of
     * nearly its whole size fits without a new segment */
    em_cuda_release(a, p[0]);
    em_cuda_release(a, q);
    em_cuda_release(a, p[2]);
    CHECK_MSG(stats(a).allocated == 0, "allocated %zu after freeing all", stats(a).allocated);
    uint64_t big;
    CHECK_MSG(em_cuda_alloc(a, MiB, &big) == EM_OK && big == p[0] && h.allocs == 1,
          "the merged segment was not reused (allocs %d)", h.allocs);
    em_cuda_release(a, big);
    em_cuda_empty_cache(a);
    CHECK_MSG(h.held == 0 && stats(a).reserved == 0 && stats(a).segments == 0, "empty_cache kept %zu", h.held);
    em_cuda_allocator_free(a);
}

static void large_requests(void) {
    host_source h;
    em_cuda_allocator *a = make(&h, 256 * MiB);
    uint64_t p, q, r;
    CHECK_MSG(em_cuda_alloc(a, 3 * MiB + 5, &p) == EM_OK, "%s", em_last_error());
    CHECK_MSG(stats(a).reserved == 4 * MiB, "a 3 MiB request reserved %zu (2 MiB multiples)", stats(a).reserved);
    em_cuda_release(a, p);
    /* a smaller large request reuses it; the rest (<= 1 MiB) is not split */
    CHECK_MSG(em_cuda_alloc(a, 3 * MiB, &q) == EM_OK && q == p && h.allocs == 1, "not reused");
    CHECK_MSG(stats(a).allocated == 4 * MiB, "allocated %zu: the 1 MiB rest should stay in the block",
          stats(a).allocated);
    em_cuda_release(a, q);
    /* a much smaller one splits it (the rest is over 1 MiB) */
    CHECK_MSG(em_cuda_alloc(a, 1536 * 1024, &r) == EM_OK && r == p, "not reused");
    CHECK_MSG(stats(a).allocated == 1536 * 1024, "allocated %zu after a split", stats(a).allocated);
    /* small requests never take from the large pool */
    uint64_t s;
    CHECK_MSG(em_cuda_alloc(a, 100, &s) == EM_OK && h.allocs == 2, "a small request used the large pool");
    em_cuda_release(a, r);
    em_cuda_release(a, s);
    em_cuda_allocator_free(a);
    CHECK_MSG(h.held == 0, "the allocator kept %zu bytes after it was freed", h.held);
}

static void out_of_memory(void) {
    host_source h;
    em_cuda_allocator *a = make(&h, 16 * MiB);
    uint64_t p[8];
    for (int i = 0; i < 6; i++) CHECK_MSG(em_cuda_alloc(a, 2 * MiB, &p[i]) == EM_OK, "%s", em_last_error());
    for (int i = 0; i < 6; i++) em_cuda_release(a, p[i]); /* cached: 12 MiB held, none used */
    /* 8 MiB does not fit beside the cache: the cache goes back, the retry succeeds */
    uint64_t big;
    CHECK_MSG(em_cuda_alloc(a, 8 * MiB, &big) == EM_OK, "the cache was not freed for a retry: %s", em_last_error());
    CHECK_MSG(h.refusals == 1 && stats(a).reserved == 8 * MiB, "refusals %d reserved %zu", h.refusals,
          stats(a).reserved);
    /* now truly out: an error naming the sizes, nothing leaked, still usable */
    uint64_t huge = 99;
    em_status st = em_cuda_alloc(a, 10 * MiB, &huge);
    CHECK_MSG(st == EM_ERR_DEVICE_NOMEM && huge == 0, "status %d ptr %llx", (int)st, (unsigned long long)huge);
    const char *msg = em_last_error();
    CHECK_MSG(strstr(msg, "test device out of memory: tried to allocate 10.00 MiB") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "8.00 MiB is allocated by tensors and 8.00 MiB reserved") != NULL, "%s", msg);
    CHECK_MSG(stats(a).ooms == 1, "ooms %lld", stats(a).ooms);
    uint64_t ok;
    CHECK_MSG(em_cuda_alloc(a, 4 * MiB, &ok) == EM_OK, "unusable after an OOM: %s", em_last_error());
    em_cuda_release(a, ok);
    em_cuda_release(a, big);
    /* a request past size_t's range is an error, not a wrap-around */
    CHECK_MSG(em_cuda_alloc(a, (size_t)-100, &huge) != EM_OK, "a request of 2^64 - 100 bytes succeeded");
    em_cuda_allocator_free(a);
    CHECK_MSG(h.held == 0, "held %zu", h.held);
}

static void bad_frees_are_errors(void) {
    host_source h;
    em_cuda_allocator *a = make(&h, 16 * MiB);
    uint64_t p;
    em_cuda_alloc(a, 1000, &p);
    CHECK_MSG(em_cuda_release(a, p + 512) != EM_OK, "a pointer inside a block was freed");
    CHECK_MSG(strstr(em_last_error(), "did not hand out") != NULL, "%s", em_last_error());
    CHECK_MSG(em_cuda_release(a, p) == EM_OK, "%s", em_last_error());
    CHECK_MSG(em_cuda_release(a, p) != EM_OK, "a double free was accepted");
    CHECK_MSG(em_cuda_release(a, 0) == EM_OK, "freeing 0 is an error");
    CHECK_MSG(stats(a).allocated == 0 && stats(a).frees == 1, "allocated %zu frees %lld", stats(a).allocated,
          stats(a).frees);
    em_cuda_allocator_free(a);
}

static void peaks(void) {
    host_source h;
    em_cuda_allocator *a = make(&h, 64 * MiB);
    uint64_t p, q;
    em_cuda_alloc(a, 4 * MiB, &p);
    em_cuda_alloc(a, 4 * MiB, &q);
    em_cuda_release(a, q);
    CHECK_MSG(stats(a).max_allocated == 8 * MiB && stats(a).allocated == 4 * MiB, "max %zu now %zu",
          stats(a).max_allocated, stats(a).allocated);
    em_cuda_allocator_reset_peaks(a);
    CHECK_MSG(stats(a).max_allocated == 4 * MiB && stats(a).max_reserved == 8 * MiB, "after reset: %zu %zu",
          stats(a).max_allocated, stats(a).max_reserved);
    em_cuda_release(a, p);
    em_cuda_allocator_free(a);
}

/* Random sizes, random frees: every live block is filled with its own byte
 * and checked before it is freed, so an overlap or a block handed out twice
 * shows; the books balance at the end. */
static void random_sequence(void) {
    host_source h;
    em_cuda_allocator *a = make(&h, 96 * MiB);
    enum { LIVE = 200 };
    uint64_t ptr[LIVE] = {0};
    size_t size[LIVE] = {0};
    unsigned rng = 12345;
    size_t live_bytes = 0;
    for (int step = 0; step < 20000; step++) {
        rng = rng * 1103515245u + 12345u;
        int i = (int)((rng >> 8) % LIVE);
        if (ptr[i]) {
            unsigned char *m = (unsigned char *)(uintptr_t)ptr[i];
            bool intact = true;
            for (size_t k = 0; k < size[i]; k += 97) intact &= m[k] == (unsigned char)i;
            intact &= m[size[i] - 1] == (unsigned char)i;
            CHECK_MSG(intact, "block %d (%zu bytes) was overwritten", i, size[i]);
            CHECK_MSG(em_cuda_release(a, ptr[i]) == EM_OK, "%s", em_last_error());
            live_bytes -= (size[i] + 511) / 512 * 512;
            ptr[i] = 0;
            continue;
        }
        rng = rng * 1103515245u + 12345u;
        unsigned r = rng >> 8;
        size_t n = r % 4 == 0 ? 1 + r % (3 * MiB) : 1 + r % 20000;
        if (em_cuda_alloc(a, n, &ptr[i]) != EM_OK) {
            CHECK_MSG(em_last_status() == EM_ERR_DEVICE_NOMEM, "%s", em_last_error());
            ptr[i] = 0;
            continue;
        }
        size[i] = n;
        live_bytes += (n + 511) / 512 * 512;
        memset((void *)(uintptr_t)ptr[i], i, n);
        if (step % 5000 == 0) em_cuda_empty_cache(a);
    }
    em_cuda_memory_stats s = stats(a);
    CHECK_MSG(s.allocated <= live_bytes + (size_t)LIVE * MiB && s.allocated >= live_bytes,
          "allocated %zu for %zu live bytes", s.allocated, live_bytes);
    CHECK_MSG(s.reserved == h.held, "reserved %zu, the source holds %zu", s.reserved, h.held);
    for (int i = 0; i < LIVE; i++)
        if (ptr[i]) em_cuda_release(a, ptr[i]);
    CHECK_MSG(stats(a).allocated == 0, "allocated %zu after freeing all", stats(a).allocated);
    em_cuda_empty_cache(a);
    CHECK_MSG(h.held == 0, "empty_cache kept %zu bytes with nothing in use", h.held);
    printf("random sequence: %lld allocations, %lld from the cache, %lld segments asked for\n", s.allocations,
           s.cache_hits, s.segment_allocs);
    em_cuda_allocator_free(a);
}

int main(void) {
    small_requests_share_segments();
    large_requests();
    out_of_memory();
    bad_frees_are_errors();
    peaks();
    random_sequence();
    return check_report();
}
