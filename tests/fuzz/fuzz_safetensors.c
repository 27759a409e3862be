/*
 * fuzz_safetensors.c - the safetensors reader (io/safetensors.c), as
 * ember.load, an AOT model's weights and the checkpoint reader use it:
 * any bytes either read as tensors that lie inside the file, with shapes
 * that fit their byte ranges, or give an error naming the file and the
 * offset.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *bytes = malloc(size ? size : 1);
    if (!bytes) return 0;
    memcpy(bytes, data, size);
    em_st_file f;
    if (em_st_parse(bytes, size, "fuzz.safetensors", &f) != EM_OK) {
        if (!strstr(em_last_error(), "fuzz.safetensors")) __builtin_trap(); /* errors name the file */
        return 0;
    }
    for (int i = 0; i < f.n; i++) {
        const em_st_tensor *t = &f.tensors[i];
        const unsigned char *p = t->data;
        if (p < f.bytes || p + t->nbytes > f.bytes + f.size) __builtin_trap();
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        if (numel * em_dtype_size(t->dtype) != t->nbytes) __builtin_trap();
        volatile unsigned char sum = 0; /* every byte readable (ASan checks) */
        for (size_t k = 0; k < t->nbytes; k++) sum ^= p[k];
        if (em_st_find(&f, t->name) == NULL) __builtin_trap();
    }
    em_st_close(&f);
    return 0;
}
