/*
 * checksum.h - checksums of bytes (runtime/checksum.c): the ZIP format's
 * CRC-32, to check PyTorch checkpoints as fast as they are read, and
 * SHA-256, to bind a compile-cache entry to its key and contents.
 *
 * Pure functions of their input; no allocation, no errors, thread-safe.
 */
#ifndef EMBER_CHECKSUM_H
#define EMBER_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CRC-32 of ZIP, gzip and zlib (reflected polynomial 0xEDB88320) of
 * p[0..n), continuing from `crc` (0 to start): em_crc32(em_crc32(0, a, n),
 * b, m) is the CRC of a followed by b, as zlib's crc32(). Uses carry-less
 * multiplication where the CPU has it (about 10x a table's speed). */
uint32_t em_crc32(uint32_t crc, const void *p, size_t n);

/* SHA-256 (FIPS 180-4), incrementally: init, update any number of times,
 * final writes the 32-byte digest. */
typedef struct em_sha256 {
    uint32_t state[8];
    uint64_t length; /* bytes so far */
    uint8_t block[64];
    size_t used; /* bytes of block filled */
} em_sha256;
void em_sha256_init(em_sha256 *h);
void em_sha256_update(em_sha256 *h, const void *p, size_t n);
void em_sha256_final(em_sha256 *h, uint8_t digest[32]);

#ifdef __cplusplus
}
#endif
#endif
