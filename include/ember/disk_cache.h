/*
 * disk_cache.h - compiled code kept on disk between processes, by key
 * (runtime/disk_cache.c): the LLVM backend's object code and the CUDA code
 * generator's PTX share one directory, one size bound and one format.
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

/* The payload stored under key (EM_CACHE_KEY_LEN hex digits) with
 * extension ext ("o", "ptx"; letters only): malloc'd, *n bytes; NULL when
 * there is none, the cache is off (EMBER_CACHE=0), or the entry is damaged
 * (one warning). */
void *em_disk_cache_get(const char *key, const char *ext, size_t *n);
/* An entry file's bytes (file, n) checked as em_disk_cache_get checks them
 * (the magic, the format, the key, the size against n, the checksum): its
 * payload within file and *payload_n, or NULL. Entries are untrusted
 * input up to this check; a payload that passes it is what this user's
 * ember wrote (object code is loaded and run: the cache directory is the
 * user's, like their shell's startup files). */
const void *em_disk_cache_payload(const void *file, size_t n, const char *key, size_t *payload_n);
/* Stores a payload under key and ext (never fails a caller: trouble costs
 * one warning), then keeps the directory under EMBER_CACHE_MAX_MB. */
void em_disk_cache_put(const char *key, const char *ext, const void *data, size_t n);
/* Removes every entry, of every kind, and leftover temporary files. */
em_status em_disk_cache_clear(void);

#ifdef __cplusplus
}
#endif
#endif
