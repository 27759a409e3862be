/*
 * code.c - the machine code of compiled graphs: named by what it is,
 * shared within the process, and kept on disk between processes.
 *
 * A graph's module is emitted with placeholder names (EM_LLVM_PLACEHOLDER,
 * graph.c's code holds no address: see there). Its key is a 128-bit hash
 * of the module's text, the host's triple, CPU and features, the LLVM
 * version and the ember build (the file holding this code, its size and
 * time: a rebuilt ember never loads code made for another). The module's
 * functions are then renamed em_<key>_..., so the machine code is a
 * function of the key alone:
 *   - graphs of one key in a process share one loaded copy (counted);
 *   - an object file stored under the key serves any later process, which
 *     then pays for tracing and building the module, not for O3 and code
 *     generation (most of a compile).
 *
 * The disk cache is runtime/disk_cache.c's (entries "<key>.o").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm/Config/llvm-config.h>

#include "ember/disk_cache.h"
#include "llvm_internal.h"


/* ---- the key ---- */


/* What identifies the ember build this code runs in (computed once). */
static char build_id[512];
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

static void find_build(void) {
    Dl_info info;
    struct stat s;
    if (dladdr((void *)(uintptr_t)find_build, &info) && info.dli_fname && stat(info.dli_fname, &s) == 0)
        snprintf(build_id, sizeof build_id, "%s %lld %lld.%09ld", info.dli_fname, (long long)s.st_size,
                 (long long)s.st_mtim.tv_sec, s.st_mtim.tv_nsec);
    else
        snprintf(build_id, sizeof build_id, "unknown build %s %s", __DATE__, __TIME__);
}


em_status em_llvm_code_key(LLVMModuleRef mod, char key[EM_LLVM_KEY_LEN + 1]) {
    pthread_once(&build_once, find_build);
    em_cache_key k;
    em_cache_key_init(&k);
    const char *parts[] = {em_llvm_host_triple(), em_llvm_host_cpu(), em_llvm_host_features(), LLVM_VERSION_STRING,
                           build_id};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) em_cache_key_mix(&k, parts[i]);
    /* The module's own code: its globals and the functions it defines that
     * are not the scalar library's (private: the build fixes those), in
     * order. Printing the whole module, library included, took 9 ms of a
     * cached GELU's 21. */
    for (LLVMValueRef v = LLVMGetFirstGlobal(mod); v; v = LLVMGetNextGlobal(v)) {
        char *t = LLVMPrintValueToString(v);
        em_cache_key_mix(&k, t);
        LLVMDisposeMessage(t);
    }
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f) || LLVMGetLinkage(f) == LLVMPrivateLinkage) continue;
        char *t = LLVMPrintValueToString(f);
        em_cache_key_mix(&k, t);
        LLVMDisposeMessage(t);
    }
    em_cache_key_hex(&k, key);
    /* the placeholder names become the key's */
    size_t ph = strlen(EM_LLVM_PLACEHOLDER);
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t len;
        const char *name = LLVMGetValueName2(f, &len);
        if (len < ph || strncmp(name, EM_LLVM_PLACEHOLDER, ph) != 0) continue;
        char renamed[256];
        int n = snprintf(renamed, sizeof renamed, "em_%s_%.*s", key, (int)(len - ph), name + ph);
        if (n > 0 && (size_t)n < sizeof renamed) LLVMSetValueName2(f, renamed, (size_t)n);
    }
    return EM_OK;
}

void em_llvm_code_name(const char *key, const char *placeholder_name, char *out, size_t n) {
    size_t ph = strlen(EM_LLVM_PLACEHOLDER);
    const char *rest = strncmp(placeholder_name, EM_LLVM_PLACEHOLDER, ph) == 0 ? placeholder_name + ph
                                                                               : placeholder_name;
    snprintf(out, n, "em_%s_%s", key, rest);
}

/* ---- loaded code, shared by key ---- */

struct em_llvm_code {
    char key[EM_LLVM_KEY_LEN + 1];
    LLVMOrcResourceTrackerRef rt;
    int refs; /* under `lock` */
    em_llvm_code *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static em_llvm_code *loaded;

/* The object stored under key, added to the JIT with its symbols resolved,
 * into *rt; false (nothing added) when there is none or it is unusable: an
 * entry that passed the cache's checks yet lacks a symbol or fails to link
 * is said once and then compiled again and replaced by the caller. */
static bool load_stored(const char *key, const char *const *symbols, int n_symbols, LLVMOrcResourceTrackerRef *rt) {
    size_t n = 0;
    void *obj = em_disk_cache_get(key, "o", &n);
    if (!obj) return false;
    em_status st = em_llvm_add_object(obj, n, key, rt);
    free(obj);
    void *addr;
    for (int i = 0; st == EM_OK && i < n_symbols; i++) st = em_llvm_lookup(symbols[i], &addr);
    if (st == EM_OK) return true;
    em_disk_cache_unusable(key, "o", em_last_error());
    if (*rt) em_llvm_remove(*rt);
    *rt = NULL;
    return false;
}

em_status em_llvm_code_get(const char *key, LLVMOrcThreadSafeContextRef tsctx, LLVMModuleRef mod, bool use_cache,
                           bool optimized, const char *const *symbols, int n_symbols, em_llvm_code **out,
                           em_llvm_code_source *source) {
    pthread_mutex_lock(&lock);
    for (em_llvm_code *c = loaded; c; c = c->next)
        if (!strcmp(c->key, key)) {
            c->refs++;
            pthread_mutex_unlock(&lock);
            LLVMDisposeModule(mod);
            LLVMOrcDisposeThreadSafeContext(tsctx);
            *out = c;
            *source = EM_CODE_SHARED;
            return EM_OK;
        }
    em_llvm_code *c = calloc(1, sizeof *c);
    em_status st = c ? EM_OK : em_error(EM_ERR_NOMEM, "out of memory loading compiled code");
    if (st == EM_OK && use_cache && load_stored(key, symbols, n_symbols, &c->rt)) {
        *source = EM_CODE_FROM_DISK;
    } else if (st == EM_OK) {
        *source = EM_CODE_COMPILED;
        void *obj = NULL;
        size_t n = 0;
        if (!optimized) st = em_llvm_optimize(mod);
        if (st == EM_OK) st = em_llvm_emit_object(mod, &obj, &n);
        if (st == EM_OK && use_cache) em_disk_cache_put(key, "o", obj, n);
        if (st == EM_OK) st = em_llvm_add_object(obj, n, key, &c->rt);
        free(obj);
    }
    LLVMDisposeModule(mod);
    LLVMOrcDisposeThreadSafeContext(tsctx);
    if (st != EM_OK) {
        pthread_mutex_unlock(&lock);
        free(c);
        return st;
    }
    snprintf(c->key, sizeof c->key, "%s", key);
    c->refs = 1;
    c->next = loaded;
    loaded = c;
    pthread_mutex_unlock(&lock);
    *out = c;
    return EM_OK;
}

void em_llvm_code_release(em_llvm_code *c) {
    if (!c) return;
    pthread_mutex_lock(&lock);
    bool last = --c->refs == 0;
    if (last)
        for (em_llvm_code **p = &loaded; *p; p = &(*p)->next)
            if (*p == c) {
                *p = c->next;
                break;
            }
    pthread_mutex_unlock(&lock);
    if (!last) return;
    em_llvm_remove(c->rt);
    free(c);
}
