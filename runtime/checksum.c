/*
 * checksum.c - CRC-32 (ZIP's) and SHA-256 (see checksum.h).
 *
 * CRC-32 folds 64 bytes at a time with carry-less multiplication (the
 * method of Intel's "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ"): four 128-bit accumulators, each multiplied by x^(512) mod P
 * and added to the next 64 bytes, then folded into one, whose CRC, and that
 * of the bytes left over, a byte table finishes. The fold keeps the CRC
 * register unchanged: the accumulator, read as 16 bytes of message from a
 * zero register, has the CRC of everything folded into it. CPUs without
 * the instruction, and inputs under 64 bytes, use the table alone.
 *
 * Depends on nothing of ember's.
 */
#include "ember/checksum.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_CLMUL_PATH 1
#endif

/* ---- CRC-32 ---- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_clmul_ok;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
#ifdef HAVE_CLMUL_PATH
    unsigned a, b, c, d;
    crc_clmul_ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_PCLMUL) && (c & bit_SSE4_1);
#endif
}

/* The register (not inverted) after p[0..n) from register r. */
static uint32_t crc_bytes(uint32_t r, const uint8_t *p, size_t n) {
    while (n--) r = crc_table[(r ^ *p++) & 0xFF] ^ (r >> 8);
    return r;
}

#ifdef HAVE_CLMUL_PATH
/* a.lo * k.lo + a.hi * k.hi + next: a folded over 128 bits (k: the
 * distance's two constants), added to the next 16 bytes. */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i a, __m128i k, __m128i next) {
    __m128i lo = _mm_clmulepi64_si128(a, k, 0x00), hi = _mm_clmulepi64_si128(a, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* The register after p[0..n) from register r; n >= 64. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t r, const uint8_t *p, size_t n) {
    /* x^(4*128+32) and x^(4*128-32) mod P, bit-reflected and shifted: fold
     * by 64 bytes; x^(128+32) and x^(128-32): fold by 16 bytes. */
    const __m128i by64 = _mm_set_epi64x(0x1C6E41596ll, 0x154442BD4ll);
    const __m128i by16 = _mm_set_epi64x(0x0CCAA009Ell, 0x1751997D0ll);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p), x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32)), x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)r));
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x0 = fold(x0, by64, _mm_loadu_si128((const __m128i *)p));
        x1 = fold(x1, by64, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = fold(x2, by64, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = fold(x3, by64, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x0 = fold(fold(fold(x0, by16, x1), by16, x2), by16, x3);
    for (; n >= 16; p += 16, n -= 16) x0 = fold(x0, by16, _mm_loadu_si128((const __m128i *)p));
    uint8_t acc[16];
    _mm_storeu_si128((__m128i *)acc, x0);
    return crc_bytes(crc_bytes(0, acc, 16), p, n);
}
#endif

uint32_t em_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    uint32_t r = ~crc;
#ifdef HAVE_CLMUL_PATH
    if (crc_clmul_ok && n >= 64) return ~crc_clmul(r, p, n);
#endif
    return ~crc_bytes(r, p, n);
}

/* ---- SHA-256 ---- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(uint32_t s[8], const uint8_t *b) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s[0], bb = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = bb;
        bb = a;
        a = t1 + t2;
    }
    s[0] += a;
    s[1] += bb;
    s[2] += c;
    s[3] += d;
    s[4] += e;
    s[5] += f;
    s[6] += g;
    s[7] += h;
}

void em_sha256_init(em_sha256 *h) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, iv, sizeof iv);
    h->length = 0;
    h->used = 0;
}

void em_sha256_update(em_sha256 *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->length += n;
    if (h->used) {
        size_t take = 64 - h->used < n ? 64 - h->used : n;
        memcpy(h->block + h->used, p, take);
        h->used += take;
        p += take;
        n -= take;
        if (h->used < 64) return;
        sha_block(h->state, h->block);
        h->used = 0;
    }
    for (; n >= 64; p += 64, n -= 64) sha_block(h->state, p);
    memcpy(h->block, p, n);
    h->used = n;
}

void em_sha256_final(em_sha256 *h, uint8_t digest[32]) {
    uint64_t bits = h->length * 8;
    h->block[h->used++] = 0x80;
    if (h->used > 56) {
        memset(h->block + h->used, 0, 64 - h->used);
        sha_block(h->state, h->block);
        h->used = 0;
    }
    memset(h->block + h->used, 0, 56 - h->used);
    for (int i = 0; i < 8; i++) h->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_block(h->state, h->block);
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++) digest[4 * i + k] = (uint8_t)(h->state[i] >> (24 - 8 * k));
}
