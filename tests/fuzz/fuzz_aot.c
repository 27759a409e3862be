/*
 * fuzz_aot.c - the C ABI of a model compiled ahead of time (ember/aot.h):
 * ember_model_run and ember_model_run_alloc with fuzzed DLTensors (dtype,
 * ndim, shape, strides, byte offset, device, data). Every call either runs
 * or returns an error; it never touches memory outside the buffers the
 * call describes.
 *
 * The model is the shared object $EMBER_FUZZ_AOT_MODEL, which
 * tests/fuzz/make_aot_model.py writes (tools/fuzz.sh does). Its runtime is
 * its own, not instrumented, so the buffers handed to it are what catches
 * a stray access: each lies flush against an inaccessible page (and one
 * before it), so a read or write past either end faults. A claim no
 * buffer could back (a huge shape or stride) is handed an inaccessible
 * page: touching it faults, as it must not be touched.
 *
 * The input, byte by byte (missing bytes read as 0, so all zeros is a
 * correct call): per input, then per output, a flags byte; then, for each
 * flag set, the bytes of its change: a dtype (code, bits, lanes), an ndim,
 * shape changes, explicit strides, a byte offset, a device, no data. The
 * first byte's top bit picks run_alloc. Strides are small (a byte each) or
 * beyond any buffer, so that every claim the model may accept is backed by
 * a small buffer.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ember/aot_dlopen.h"

#define MAX_IO 16
#define MAX_SPAN (4u << 20)

static ember_aot_api api;
static ember_model *model;
static int n_in, n_out;
static ember_tensor_info info[2 * MAX_IO];

typedef struct {
    const uint8_t *p, *end;
} cursor;

static uint8_t next(cursor *c) { return c->p < c->end ? *c->p++ : 0; }

/* ---- buffers with inaccessible pages on both sides ---- */

typedef struct {
    char *map;
    size_t len; /* the body's pages and the two guards */
} guarded;

#define KEEP_PAGES 16 /* mappings of up to this many body pages are kept for reuse */
#define KEEP_EACH 16  /* ... this many of each size */

static guarded live[8 * MAX_IO], spare[KEEP_PAGES + 1][KEEP_EACH];
static int n_live, n_spare[KEEP_PAGES + 1];

/* n bytes (0 allowed) whose end touches an inaccessible page, and whose
 * start follows one; NULL when out of slots or memory. Mappings are kept
 * for reuse, by size (mapping and protecting pages is most of a run's
 * time otherwise). */
static void *guarded_alloc(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (n + page - 1) / page, body = pages * page;
    size_t len = body + 2 * page;
    if (n_live == (int)(sizeof live / sizeof *live)) return NULL;
    char *m = NULL;
    if (pages <= KEEP_PAGES && n_spare[pages]) m = spare[pages][--n_spare[pages]].map;
    if (!m) {
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        mprotect(m, page, PROT_NONE);
        mprotect(m + page + body, page, PROT_NONE);
    }
    live[n_live++] = (guarded){m, len};
    return m + page + body - n;
}

/* A page no access may touch. */
static void *forbidden(void) {
    static void *page;
    if (!page) {
        page = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) page = NULL;
    }
    return page;
}

static void release_all(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < n_live; i++) {
        size_t pages = live[i].len / page - 2;
        if (pages <= KEEP_PAGES && n_spare[pages] < KEEP_EACH)
            spare[pages][n_spare[pages]++] = live[i];
        else
            munmap(live[i].map, live[i].len);
    }
    n_live = 0;
}

/* ---- one fuzzed DLTensor ---- */

/* The byte range [lo, hi) a tensor's elements cover relative to data +
 * byte_offset, or false when no buffer of MAX_SPAN backs it. */
static bool span(const DLTensor *t, int64_t *lo, int64_t *hi) {
    if (t->ndim < 0 || t->ndim > 8 || t->dtype.bits == 0 || t->dtype.bits % 8 || t->dtype.lanes != 1) return false;
    int64_t item = t->dtype.bits / 8, a = 0, b = item;
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        if (n < 0 || n > MAX_SPAN) return false;
        if (n == 0) {
            *lo = *hi = 0;
            return true;
        }
        int64_t s = t->strides ? t->strides[d] : stride;
        if (s > MAX_SPAN || s < -(int64_t)MAX_SPAN) return false;
        int64_t reach = (n - 1) * s * item;
        if (reach > 0) b += reach; else a += reach;
        if (b - a > MAX_SPAN) return false;
        stride *= n;
    }
    *lo = a, *hi = b;
    return true;
}

static void fuzz_tensor(cursor *c, const ember_tensor_info *want, DLTensor *t) {
    uint8_t flags = next(c);
    t->dtype = want->dtype;
    t->ndim = want->ndim;
    t->device = (DLDevice){kDLCPU, 0};
    t->byte_offset = 0;
    if (flags & 1) t->dtype = (DLDataType){next(c), next(c), (uint16_t)(next(c) | next(c) << 8)};
    if (flags & 2) t->ndim = (int8_t)next(c);
    /* the caller's arrays hold exactly ndim entries (none when ndim <= 0) */
    int n = t->ndim > 0 ? (t->ndim < 64 ? t->ndim : 64) : 0;
    int64_t *shape = guarded_alloc((size_t)n * sizeof *shape);
    if (!shape) {
        t->shape = forbidden();
        return;
    }
    for (int d = 0; d < n; d++) {
        shape[d] = d < want->ndim ? want->shape[d] : 1;
        if (flags & 4) {
            int8_t k = (int8_t)next(c);
            shape[d] = k == -128 ? INT64_MAX : k == 127 ? INT64_MIN : shape[d] + k / 16;
        }
    }
    t->shape = shape;
    t->strides = NULL;
    if (flags & 8) {
        int64_t *strides = guarded_alloc((size_t)n * sizeof *strides);
        /* small strides (any sign, zero), or one of two no buffer backs:
         * the buffers stay small, so runs stay fast */
        for (int d = 0; strides && d < n; d++) {
            int8_t s = (int8_t)next(c);
            strides[d] = s == INT8_MIN ? INT64_MIN : s == INT8_MAX ? INT64_MAX / 2 : s;
        }
        t->strides = strides;
    }
    if (flags & 16) {
        uint8_t k = next(c);
        t->byte_offset = k == 0xff ? UINT64_MAX - 7 : (uint64_t)k * 4;
    }
    if (flags & 32) t->device = (DLDevice){(DLDeviceType)next(c), (int32_t)(int8_t)next(c)};
    int64_t lo, hi;
    if (flags & 64) {
        t->data = NULL;
    } else if (n == t->ndim && span(t, &lo, &hi) && t->byte_offset < MAX_SPAN) {
        char *buf = guarded_alloc((size_t)(hi - lo));
        if (buf) memset(buf, next(c), (size_t)(hi - lo));
        /* data + byte_offset + lo is the buffer's first byte */
        t->data = buf ? (void *)((uintptr_t)buf - (uintptr_t)lo - (uintptr_t)t->byte_offset) : forbidden();
    } else {
        t->data = forbidden();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *path = getenv("EMBER_FUZZ_AOT_MODEL");
    if (!path || !*path) {
        fprintf(stderr, "fuzz_aot: set EMBER_FUZZ_AOT_MODEL to a model's shared object "
                        "(tests/fuzz/make_aot_model.py writes one)\n");
        exit(2);
    }
    if (!ember_aot_open(path, &api) || api.create(NULL, &model) != EMBER_OK) {
        fprintf(stderr, "fuzz_aot: cannot load %s: %s\n", path, api.handle ? api.last_error() : dlerror());
        exit(2);
    }
    n_in = api.num_inputs(model), n_out = api.num_outputs(model);
    if (n_in < 0 || n_out < 0 || n_in > MAX_IO || n_out > MAX_IO) {
        fprintf(stderr, "fuzz_aot: the model has %d inputs and %d outputs (at most %d each here)\n", n_in, n_out,
                MAX_IO);
        exit(2);
    }
    for (int i = 0; i < n_in; i++) api.input(model, i, &info[i]);
    for (int i = 0; i < n_out; i++) api.output(model, i, &info[n_in + i]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model) LLVMFuzzerInitialize(NULL, NULL);
    cursor c = {data, data + size};
    bool alloc = size && (data[0] & 0x80);
    DLTensor in[MAX_IO], out[MAX_IO];
    /* the count of tensors handed over may be wrong too */
    int give_in = n_in, give_out = n_out;
    uint8_t counts = next(&c) & 0x7f;
    if (counts & 0x40) give_in = counts & 0x0f, give_out = (counts >> 4) & 0x03;
    if (give_in > MAX_IO) give_in = MAX_IO;
    for (int i = 0; i < give_in; i++) fuzz_tensor(&c, &info[i < n_in ? i : 0], &in[i]);
    for (int i = 0; i < give_out; i++) fuzz_tensor(&c, &info[n_in + (i < n_out ? i : 0)], &out[i]);
    if (getenv("EMBER_FUZZ_VERBOSE"))
        for (int i = 0; i < give_in + give_out; i++) {
            const DLTensor *t = i < give_in ? &in[i] : &out[i - give_in];
            fprintf(stderr, "%s %d: dtype (%d,%d,%d) ndim %d device (%d,%d) offset %llu data %p shape", i < give_in ? "input" : "output",
                    i < give_in ? i : i - give_in, t->dtype.code, t->dtype.bits, t->dtype.lanes, t->ndim,
                    (int)t->device.device_type, t->device.device_id, (unsigned long long)t->byte_offset, t->data);
            for (int d = 0; d < t->ndim && d < 8; d++) fprintf(stderr, " %lld", (long long)t->shape[d]);
            if (t->strides) {
                fprintf(stderr, " strides");
                for (int d = 0; d < t->ndim && d < 8; d++) fprintf(stderr, " %lld", (long long)t->strides[d]);
            }
            fputc('\n', stderr);
        }
    if (alloc) {
        DLManagedTensor *res[MAX_IO] = {NULL};
        if (api.run_alloc(model, in, give_in, res, give_out) == EMBER_OK)
            for (int i = 0; i < give_out; i++)
                if (res[i] && res[i]->deleter) res[i]->deleter(res[i]);
    } else {
        api.run(model, in, give_in, out, give_out);
    }
    release_all();
    return 0;
}
