/*
 * disk_cache.c - what compiles produce, kept on disk between processes:
 * the LLVM backend's object code (".o") and the CUDA code generator's PTX
 * (".ptx"), one entry per key.
 *
 * The directory: EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else
 * ~/.cache/ember; EMBER_CACHE=0 turns it off. One file per key and kind,
 * "<key>.<ext>": a header (magic, format version, key, payload length,
 * FNV-1a checksum of the payload) and the payload. An entry is written to
 * a temporary file in the directory and renamed into place, so a reader
 * sees a whole entry or none, and racing writers of one key write the same
 * bytes. A short, foreign or corrupted entry is ignored with one warning
 * and replaced. The directory holds at most EMBER_CACHE_MAX_MB (default
 * 256) of entries, of every kind: after a store the least recently used
 * go (a hit touches its entry), all but the newest if need be. Nothing the
 * cache does can fail a compile: an unusable directory costs one warning,
 * then compiles run as without it. The keys are the callers' (a 128-bit
 * hash of everything the payload depends on: em_cache_key_*).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ember/disk_cache.h"

#define MAGIC "EMBRCODE"
#define FORMAT 1u

uint64_t em_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001B3ull;
    return h;
}

void em_cache_key_init(em_cache_key *k) {
    k->a = 0xCBF29CE484222325ull;
    k->b = 0x84222325CBF29CE4ull;
}

void em_cache_key_mix(em_cache_key *k, const char *text) {
    size_t n = strlen(text) + 1; /* (its terminator separates it from the next part) */
    k->a = em_fnv1a(k->a, text, n);
    k->b = em_fnv1a(k->b ^ 0x9E3779B97F4A7C15ull, text, n);
}

void em_cache_key_hex(const em_cache_key *k, char out[EM_CACHE_KEY_LEN + 1]) {
    snprintf(out, EM_CACHE_KEY_LEN + 1, "%016llx%016llx", (unsigned long long)k->a, (unsigned long long)k->b);
}

typedef struct {
    char magic[8];
    uint32_t format, reserved;
    char key[EM_CACHE_KEY_LEN];
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

static void entry_path(const char *dir, const char *key, const char *ext, char *path, size_t n) {
    snprintf(path, n, "%s/%s.%s", dir, key, ext);
}

/* Is `name` an entry's file name: 32 hex digits, a dot and a short
 * extension of letters? */
static bool is_entry(const char *name) {
    size_t len = strlen(name);
    if (len < EM_CACHE_KEY_LEN + 2 || len > EM_CACHE_KEY_LEN + 9 || name[EM_CACHE_KEY_LEN] != '.') return false;
    for (int i = 0; i < EM_CACHE_KEY_LEN; i++)
        if (!isxdigit((unsigned char)name[i])) return false;
    for (const char *p = name + EM_CACHE_KEY_LEN + 1; *p; p++)
        if (!isalpha((unsigned char)*p)) return false;
    return true;
}

const void *em_disk_cache_payload(const void *file, size_t n, const char *key, size_t *payload_n) {
    entry_header h;
    if (n < sizeof h) return NULL;
    memcpy(&h, file, sizeof h);
    const unsigned char *payload = (const unsigned char *)file + sizeof h;
    bool ok = !memcmp(h.magic, MAGIC, 8) && h.format == FORMAT && !memcmp(h.key, key, EM_CACHE_KEY_LEN) &&
              h.size == (uint64_t)(n - sizeof h) && h.size > 0 && h.size < ((uint64_t)1 << 32) &&
              em_fnv1a(0xCBF29CE484222325ull, payload, (size_t)h.size) == h.checksum;
    if (!ok) return NULL;
    *payload_n = (size_t)h.size;
    return payload;
}

void *em_disk_cache_get(const char *key, const char *ext, size_t *n) {
    char dir[4096], path[4200];
    if (!cache_enabled() || !cache_dir(dir, sizeof dir)) return NULL;
    entry_path(dir, key, ext, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat s;
    unsigned char *data = NULL;
    const void *payload = NULL;
    size_t size = 0, got = 0;
    /* the file's own size bounds what is read (the header's is checked
     * against it), and an entry is under 4 GiB */
    if (fstat(fileno(f), &s) == 0 && s.st_size > 0 && (uint64_t)s.st_size < ((uint64_t)1 << 32) + sizeof(entry_header)) {
        size = (size_t)s.st_size;
        if ((data = malloc(size)) && fread(data, 1, size, f) == size) payload = em_disk_cache_payload(data, size, key, &got);
    }
    fclose(f);
    if (payload) {
        memmove(data, payload, got);
        utimensat(AT_FDCWD, path, NULL, 0); /* (used now: the last to go) */
        *n = got;
        return data;
    }
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
        if (!is_entry(e->d_name)) continue;
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

void em_disk_cache_put(const char *key, const char *ext, const void *data, size_t n) {
    char dir[4096], path[4200], tmp[4300];
    if (!cache_enabled()) return;
    if (!cache_dir(dir, sizeof dir)) {
        warn_once(&said_dir, "cannot use the directory %s (%s); compiling without it", dir, strerror(errno));
        return;
    }
    entry_path(dir, key, ext, path, sizeof path);
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
    memcpy(h.key, key, EM_CACHE_KEY_LEN);
    h.size = n;
    h.checksum = em_fnv1a(0xCBF29CE484222325ull, data, n);
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

em_status em_disk_cache_clear(void) {
    char dir[4096];
    if (!cache_dir(dir, sizeof dir)) return EM_OK;
    DIR *d = opendir(dir);
    if (!d) return EM_OK;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        bool entry = is_entry(e->d_name);
        bool temp = e->d_name[0] == '.' && len > EM_CACHE_KEY_LEN + 1 && e->d_name[1] != '.';
        if (!entry && !temp) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return EM_OK;
}

