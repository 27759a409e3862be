/*
 * ptx_cache.c - generated CUDA C compiles once: its PTX is kept in this
 * process and on disk (runtime/disk_cache.c, entries "<key>.ptx"), keyed by
 * everything it depends on: the source, the headers it includes, the
 * compute capability and NVRTC's version. The first use of a kernel in a
 * process costs a lookup; in a new process, a read from disk; only new
 * code costs NVRTC (about a second for a dtype's ~70 elementwise ops).
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strndup */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/disk_cache.h"

/* ---- the headers every generated source may include, embedded at build
 * time (the cache key covers them) ---- */

extern const unsigned char em_cuda_ops_math_h[], em_cuda_trig_table_h[], em_cuda_ops_random_h[];
extern const size_t em_cuda_ops_math_h_size, em_cuda_trig_table_h_size, em_cuda_ops_random_h_size;
static char *header_text[3];
static const char *const header_names[3] = {"ember/ops_math.h", "ops_math_trig_table.h", "ember/ops_random.h"};
static pthread_once_t headers_once = PTHREAD_ONCE_INIT;

static void make_headers(void) {
    header_text[0] = strndup((const char *)em_cuda_ops_math_h, em_cuda_ops_math_h_size);
    header_text[1] = strndup((const char *)em_cuda_trig_table_h, em_cuda_trig_table_h_size);
    header_text[2] = strndup((const char *)em_cuda_ops_random_h, em_cuda_ops_random_h_size);
}

int em_cuda_headers(const char *const **texts, const char *const **names) {
    pthread_once(&headers_once, make_headers);
    if (!header_text[0] || !header_text[1] || !header_text[2]) return -1;
    *texts = (const char *const *)header_text;
    *names = header_names;
    return 3;
}

typedef struct cached {
    char key[EM_CACHE_KEY_LEN + 1];
    char *ptx;
    struct cached *next;
} cached;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local long compiled_here; /* (NVRTC compiles on this thread: em_cuda_ptx_compiles) */

long em_cuda_ptx_compiles(void) { return compiled_here; }
static cached *kept;

/* The PTX kept under key in this process (a copy), or NULL. */
static char *find(const char *key) {
    char *ptx = NULL;
    pthread_mutex_lock(&lock);
    for (cached *c = kept; c && !ptx; c = c->next)
        if (!strcmp(c->key, key)) ptx = strdup(c->ptx);
    pthread_mutex_unlock(&lock);
    return ptx;
}

static void keep(const char *key, const char *ptx) {
    cached *c = calloc(1, sizeof *c);
    if (!c || !(c->ptx = strdup(ptx))) { /* (out of memory: it is compiled again next time) */
        free(c);
        return;
    }
    snprintf(c->key, sizeof c->key, "%s", key);
    pthread_mutex_lock(&lock);
    c->next = kept;
    kept = c;
    pthread_mutex_unlock(&lock);
}

void em_cuda_ptx_forget(void) {
    pthread_mutex_lock(&lock);
    while (kept) {
        cached *c = kept;
        kept = c->next;
        free(c->ptx);
        free(c);
    }
    pthread_mutex_unlock(&lock);
}

em_status em_cuda_ptx(const char *source, const char *name, int sm, char **ptx, em_cuda_ptx_source *from) {
    *ptx = NULL;
    const char *const *texts, *const *names;
    int n_headers = em_cuda_headers(&texts, &names);
    int major = 0, minor = 0;
    if (n_headers < 0) return em_error(EM_ERR_NOMEM, "out of memory");
    em_status st = em_nvrtc_version(&major, &minor);
    if (st != EM_OK) return st;
    em_cache_key k;
    em_cache_key_init(&k);
    char what[64];
    snprintf(what, sizeof what, "ptx sm_%d nvrtc %d.%d", sm, major, minor);
    em_cache_key_mix(&k, what);
    for (int i = 0; i < n_headers; i++) {
        em_cache_key_mix(&k, names[i]);
        em_cache_key_mix(&k, texts[i]);
    }
    em_cache_key_mix(&k, source);
    char key[EM_CACHE_KEY_LEN + 1];
    em_cache_key_hex(&k, key);
    if ((*ptx = find(key))) {
        if (from) *from = EM_PTX_FROM_MEMORY;
        return EM_OK;
    }
    size_t n = 0;
    char *stored = em_disk_cache_get(key, "ptx", &n);
    if (stored && memchr(stored, '\0', n) == NULL) { /* (PTX is text: a payload with a NUL is not one) */
        *ptx = strndup(stored, n);
        free(stored);
        if (!*ptx) return em_error(EM_ERR_NOMEM, "out of memory");
        keep(key, *ptx);
        if (from) *from = EM_PTX_FROM_DISK;
        return EM_OK;
    }
    free(stored);
    if ((st = em_nvrtc_compile(source, name, n_headers, texts, names, sm, ptx, NULL)) != EM_OK) return st;
    compiled_here++;
    keep(key, *ptx);
    em_disk_cache_put(key, "ptx", *ptx, strlen(*ptx));
    if (from) *from = EM_PTX_COMPILED;
    return EM_OK;
}
