/*
 * disk_cache.h - compiled code kept on disk between processes, by key
 * (runtime/disk_cache.c): the LLVM backend's object code and the CUDA code
 * generator's PTX share one directory, one size bound and one format.
 * Where it lives and why its entries are trusted: runtime/disk_cache.c.
 */
#ifndef EMBER_DISK_CACHE_H
#define EMBER_DISK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "ember/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_CACHE_KEY_LEN 32 /* hex digits */

/* A 128-bit key, hashed (FNV-1a, two ways) from texts in order. */
typedef struct em_cache_key {
    uint64_t a, b;
} em_cache_key;
void em_cache_key_init(em_cache_key *k);
void em_cache_key_mix(em_cache_key *k, const char *text);
void em_cache_key_hex(const em_cache_key *k, char out[EM_CACHE_KEY_LEN + 1]);
/* FNV-1a of p[0..n) continuing from h. */
uint64_t em_fnv1a(uint64_t h, const void *p, size_t n);

#define EM_CACHE_EXT_MAX 8 /* a kind's letters, with room for its NUL */

/* The payload stored under key (EM_CACHE_KEY_LEN hex digits) with kind
 * ext ("o", "ptx"; letters only): malloc'd, *n bytes; NULL when there is
 * none, the cache is off (EMBER_CACHE=0) or unusable, or the entry fails
 * its checks (one warning; the caller compiles and stores it again). */
void *em_disk_cache_get(const char *key, const char *ext, size_t *n);
/* An entry file's bytes (file, n) checked as em_disk_cache_get checks them
 * (the magic, the format, the key, the kind, the size against n, the HMAC
 * under the folder's 32-byte secret): its payload within file and
 * *payload_n, or NULL. Entries are untrusted input up to this check. */
const void *em_disk_cache_payload(const void *file, size_t n, const char *key, const char *ext,
                                  const uint8_t secret[32], size_t *payload_n);
/* Stores a payload under key and ext, replacing what is there (never fails
 * a caller: trouble costs one warning), then keeps ember's folder under
 * EMBER_CACHE_MAX_MB. */
void em_disk_cache_put(const char *key, const char *ext, const void *data, size_t n);
/* Says (once per process) that an entry which passed its checks could not
 * be used; the caller then compiles it again and puts it, replacing it. */
void em_disk_cache_unusable(const char *key, const char *ext, const char *why);
/* Removes every entry, of every kind, and the temporary files of writes
 * that were killed: only files in ember's own folder named and marked as
 * its entries. */
em_status em_disk_cache_clear(void);

#ifdef __cplusplus
}
#endif
#endif
