/*
 * fuzz_cache_entry.c - a compile-cache entry's bytes as the disk cache
 * checks them (runtime/disk_cache.c) before LLVM or NVRTC's caller sees the
 * payload: any bytes are either refused or give a payload inside them
 * whose size and checksum the header states.
 */
#include <stdint.h>
#include <string.h>

#include "ember/disk_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the key the seed entries were written under (tests/fuzz/corpus) */
    static const char key[] = "0123456789abcdef0123456789abcdef";
    size_t n = 0;
    const unsigned char *p = em_disk_cache_payload(data, size, key, &n);
    if (!p) return 0;
    if (p < data || p + n > data + size || n == 0) __builtin_trap();
    volatile unsigned char sum = 0;
    for (size_t k = 0; k < n; k++) sum ^= p[k];
    return 0;
}
