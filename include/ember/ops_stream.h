/*
 * ops_stream.h - stores that bypass the cache, for kernels whose output is too
 * big to stay in it.
 *
 * A plain store to a line not in cache first reads the line from memory
 * (read-for-ownership), so a kernel that reads n bytes and writes n moves
 * 3n over the memory bus; a non-temporal store writes the line whole and
 * moves 2n. It also leaves the store buffer at once: plain stores missing
 * the cache sit there, and when an output row lies 4096 bytes (a page)
 * from its input row, as big blocks from the allocator do, the next row's
 * loads look like they depend on them (4K aliasing) and wait. Measured on
 * a layer norm over 8192x1024 float32 (one thread): 2.73 ms with plain
 * stores, 2.14 ms streaming, 2.17 ms for a one-pass C loop with plain
 * stores (bench/RESULTS.md).
 *
 * Streaming pays only when the consumer would not have found the output in
 * cache anyway: outputs of at least EM_STREAM_MIN_BYTES. Callers store
 * whole blocks of EM_STREAM_F32 floats at 64-byte-aligned addresses (the
 * first em_stream_head elements of a row go through plain stores) and call
 * em_stream_fence once their stores are done, before another thread or the
 * caller may read them.
 */
#ifndef EMBER_OPS_STREAM_H
#define EMBER_OPS_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#define EM_STREAM_MIN_BYTES ((size_t)16 << 20)
#define EM_STREAM_F32 16 /* floats per block: one 64-byte line */

static inline bool em_stream_pays(size_t out_bytes) { return out_bytes >= EM_STREAM_MIN_BYTES; }

/* How many of the floats from p on come before its first 64-byte boundary. */
static inline int64_t em_stream_head(const float *p, int64_t n) {
    int64_t head = (int64_t)(((64 - ((uintptr_t)p & 63)) & 63) / sizeof(float));
    if ((uintptr_t)p % sizeof(float) != 0) return n; /* (misaligned floats: no streaming) */
    return head < n ? head : n;
}

/* p[0..16) = v[0..16), p 64-byte aligned. */
static inline void em_stream_block_f32(float *p, const float *v) {
#if defined(__AVX512F__)
    _mm512_stream_ps(p, _mm512_loadu_ps(v));
#elif defined(__AVX__)
    _mm256_stream_ps(p, _mm256_loadu_ps(v));
    _mm256_stream_ps(p + 8, _mm256_loadu_ps(v + 8));
#elif defined(__SSE2__)
    for (int k = 0; k < 16; k += 4) _mm_stream_ps(p + k, _mm_loadu_ps(v + k));
#else
    memcpy(p, v, 16 * sizeof(float));
#endif
}

/* Orders the streamed stores before any later store (and so before the
 * thread pool's completion signal). */
static inline void em_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

#endif
