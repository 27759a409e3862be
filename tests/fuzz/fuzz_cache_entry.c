/*
 * fuzz_cache_entry.c - a compile-cache entry's bytes as the disk cache
 * checks them (runtime/disk_cache.c) before LLVM or NVRTC's caller sees the
 * payload: any bytes are either refused or give a payload inside them
 * whose size, key, kind and HMAC the header states.
 */
#include <stdint.h>
#include <string.h>

#include "ember/disk_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the key and secret the seed entries were written under
     * (tests/fuzz/corpus/cache_entry, made by make_cache_entries.py) */
    static const char key[] = "0123456789abcdef0123456789abcdef";
    uint8_t secret[32];
    for (int i = 0; i < 32; i++) secret[i] = (uint8_t)i;
    static const char *const kinds[] = {"o", "ptx"};
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        const unsigned char *p = em_disk_cache_payload(data, size, key, kinds[k], secret, &n);
        if (!p) continue;
        if (p < data || p + n > data + size || n == 0) __builtin_trap();
        volatile unsigned char sum = 0;
        for (size_t i = 0; i < n; i++) sum ^= p[i];
    }
    return 0;
}
