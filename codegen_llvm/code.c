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
 * The disk cache: EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else
 * ~/.cache/ember; EMBER_CACHE=0 turns it off. One file per key,
 * "<key>.o": a header (magic, format version, key, payload length, FNV-1a
 * checksum of the payload) and the object code. An entry is written to a
 * temporary file in the directory and renamed into place, so a reader sees
 * a whole entry or none, and racing writers of one key write the same
 * bytes. A short, foreign or corrupted entry is ignored with one warning
 * and replaced. The directory holds at most EMBER_CACHE_MAX_MB (default
 * 256) of entries: after a store the least recently used go (a hit touches
 * its entry), all but the newest if need be. Nothing the cache does can fail a compile: an unusable
 * directory costs one warning, then compiles run as without it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm/Config/llvm-config.h>

#include "llvm_internal.h"

#define MAGIC "EMBRCODE"
#define FORMAT 1u

/* ---- the key ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001B3ull;
    return h;
}

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

/* Hashes text into the key's two halves (its terminator separating it
 * from the next part). */
static void mix(uint64_t *a, uint64_t *b, const char *text) {
    size_t n = strlen(text) + 1;
    *a = fnv(*a, text, n);
    *b = fnv(*b ^ 0x9E3779B97F4A7C15ull, text, n);
}

em_status em_llvm_code_key(LLVMModuleRef mod, char key[EM_LLVM_KEY_LEN + 1]) {
    pthread_once(&build_once, find_build);
    uint64_t a = 0xCBF29CE484222325ull, b = 0x84222325CBF29CE4ull;
    const char *parts[] = {em_llvm_host_triple(), em_llvm_host_cpu(), em_llvm_host_features(), LLVM_VERSION_STRING,
                           build_id};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) mix(&a, &b, parts[i]);
    /* The module's own code: its globals and the functions it defines that
     * are not the scalar library's (private: the build fixes those), in
     * order. Printing the whole module, library included, took 9 ms of a
     * cached GELU's 21. */
    for (LLVMValueRef v = LLVMGetFirstGlobal(mod); v; v = LLVMGetNextGlobal(v)) {
        char *t = LLVMPrintValueToString(v);
        mix(&a, &b, t);
        LLVMDisposeMessage(t);
    }
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f) || LLVMGetLinkage(f) == LLVMPrivateLinkage) continue;
        char *t = LLVMPrintValueToString(f);
        mix(&a, &b, t);
        LLVMDisposeMessage(t);
    }
    snprintf(key, EM_LLVM_KEY_LEN + 1, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
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

/* ---- the disk cache ---- */

typedef struct {
    char magic[8];
    uint32_t format, reserved;
    char key[EM_LLVM_KEY_LEN];
    uint64_t size, checksum;
} entry_header;

static bool cache_enabled(void) {
    const char *v = getenv("EMBER_CACHE");
    return !(v && strcmp(v, "0") == 0);
}

/* The cache directory (made if missing), or false. */
static bool cache_dir(char *dir, size_t n) {
    const char *env = getenv("EMBER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    snprintf(dir, n, "(none: neither EMBER_CACHE_DIR, XDG_CACHE_HOME nor HOME is set)");
    int w = env && *env   ? snprintf(dir, n, "%s", env)
            : xdg && *xdg ? snprintf(dir, n, "%s/ember", xdg)
            : home && *home ? snprintf(dir, n, "%s/.cache/ember", home)
                            : -1;
    if (w < 0 || (size_t)w >= n) {
        errno = w < 0 ? ENOENT : ENAMETOOLONG;
        return false;
    }
    /* make it and its parents (mkdir -p) */
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

/* One warning per process and kind of trouble. */
static void warn_once(int *said, const char *fmt, const char *a, const char *b) {
    if (__atomic_exchange_n(said, 1, __ATOMIC_RELAXED)) return;
    fprintf(stderr, "ember: compile cache: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
}

static int said_dir, said_bad, said_write;

static void entry_path(const char *dir, const char *key, char *path, size_t n) {
    snprintf(path, n, "%s/%s.o", dir, key);
}

/* The object code stored under key (malloc'd, *n bytes), or NULL. */
static void *cache_get(const char *key, size_t *n) {
    char dir[4096], path[4200];
    if (!cache_enabled() || !cache_dir(dir, sizeof dir)) return NULL;
    entry_path(dir, key, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    entry_header h;
    void *data = NULL;
    struct stat s;
    bool ok = fstat(fileno(f), &s) == 0 && fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, MAGIC, 8) &&
              h.format == FORMAT && !memcmp(h.key, key, EM_LLVM_KEY_LEN) &&
              h.size == (uint64_t)s.st_size - sizeof h && h.size > 0 && h.size < ((uint64_t)1 << 32);
    if (ok && (data = malloc(h.size)) && fread(data, 1, h.size, f) == h.size &&
        fnv(0xCBF29CE484222325ull, data, h.size) == h.checksum) {
        fclose(f);
        utimensat(AT_FDCWD, path, NULL, 0); /* (used now: the last to go) */
        *n = h.size;
        return data;
    }
    fclose(f);
    free(data);
    warn_once(&said_bad, "ignoring the damaged entry %s (it is compiled again)%s", path, "");
    return NULL;
}

typedef struct {
    char name[300];
    off_t size;
    struct timespec used;
} entry_info;

static int by_use(const void *a, const void *b) {
    const struct timespec *x = &((const entry_info *)a)->used, *y = &((const entry_info *)b)->used;
    return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                  : (x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec);
}

/* Removes the least recently used entries beyond the size bound. */
static void evict(const char *dir) {
    const char *v = getenv("EMBER_CACHE_MAX_MB");
    long long bound = (v && *v ? atoll(v) : 256) << 20;
    DIR *d = opendir(dir);
    if (!d) return;
    entry_info *all = NULL;
    size_t n = 0, cap = 0;
    long long total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len != EM_LLVM_KEY_LEN + 2 || strcmp(e->d_name + EM_LLVM_KEY_LEN, ".o") != 0) continue;
        char path[4400];
        struct stat s;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &s) != 0) continue;
        if (n == cap) {
            entry_info *grown = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof *all);
            if (!grown) break;
            all = grown;
        }
        snprintf(all[n].name, sizeof all[n].name, "%s", e->d_name);
        all[n].size = s.st_size;
        all[n].used = s.st_mtim;
        total += s.st_size;
        n++;
    }
    closedir(d);
    if (total > bound && all) {
        qsort(all, n, sizeof *all, by_use);
        for (size_t i = 0; i + 1 < n && total > bound; i++) { /* (the newest stays) */
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir, all[i].name);
            if (unlink(path) == 0) total -= all[i].size;
        }
    }
    free(all);
}

/* Stores object code under key: a temporary file renamed into place. */
static void cache_put(const char *key, const void *data, size_t n) {
    char dir[4096], path[4200], tmp[4300];
    if (!cache_enabled()) return;
    if (!cache_dir(dir, sizeof dir)) {
        warn_once(&said_dir, "cannot use the directory %s (%s); compiling without it", dir, strerror(errno));
        return;
    }
    entry_path(dir, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, key);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        warn_once(&said_write, "cannot write to %s (%s); compiling without storing", dir, strerror(errno));
        return;
    }
    entry_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.format = FORMAT;
    memcpy(h.key, key, EM_LLVM_KEY_LEN);
    h.size = n;
    h.checksum = fnv(0xCBF29CE484222325ull, data, n);
    FILE *f = fdopen(fd, "wb");
    bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    else close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        warn_once(&said_write, "cannot write to %s (%s); compiling without storing", dir, strerror(errno));
        return;
    }
    evict(dir);
}

em_status em_llvm_cache_clear(void) {
    char dir[4096];
    if (!cache_dir(dir, sizeof dir)) return EM_OK;
    DIR *d = opendir(dir);
    if (!d) return EM_OK;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        bool entry = len == EM_LLVM_KEY_LEN + 2 && strcmp(e->d_name + EM_LLVM_KEY_LEN, ".o") == 0;
        bool temp = e->d_name[0] == '.' && len > EM_LLVM_KEY_LEN + 1 && e->d_name[1] != '.';
        if (!entry && !temp) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return EM_OK;
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

em_status em_llvm_code_get(const char *key, LLVMOrcThreadSafeContextRef tsctx, LLVMModuleRef mod, bool use_cache,
                           bool optimized, em_llvm_code **out, em_llvm_code_source *source) {
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
    size_t n = 0;
    void *obj = st == EM_OK && use_cache ? cache_get(key, &n) : NULL;
    if (obj) {
        *source = EM_CODE_FROM_DISK;
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsctx);
    } else if (st == EM_OK) {
        *source = EM_CODE_COMPILED;
        if (!optimized) st = em_llvm_optimize(mod);
        if (st == EM_OK) st = em_llvm_emit_object(mod, &obj, &n);
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsctx);
        if (st == EM_OK && use_cache) cache_put(key, obj, n);
    } else {
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsctx);
    }
    if (st == EM_OK) st = em_llvm_add_object(obj, n, key, &c->rt);
    free(obj);
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
