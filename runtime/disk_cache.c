/*
 * disk_cache.c - what compiles produce, kept on disk between processes:
 * the LLVM backend's object code (".o") and the CUDA code generator's PTX
 * (".ptx"), one entry per key.
 *
 * Where: the folder "ember-cache-v1" that ember makes (mode 0700) inside
 * EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember;
 * EMBER_CACHE=0 turns it off. The cache reads, writes, evicts and clears
 * only inside that folder, so pointing EMBER_CACHE_DIR at a folder of the
 * user's own never touches its files.
 *
 * Trust: entries are object code that gets run, so the folder must be
 * this user's alone: a directory (not a link) owned by this user that no
 * one else can write. One that is not costs one warning, and compiles run
 * without the cache. Each entry carries an HMAC-SHA256, under a 32-byte
 * secret kept in the folder (mode 0600), of its header (the key it was
 * stored under, its kind, its size) and its payload: an entry planted,
 * relabelled or copied from elsewhere fails it, like a damaged one, and is
 * compiled again and replaced, after one warning.
 *
 * Files: "<32 hex digits>.<letters>" for entries, each "EMBRCODE", format
 * 2, key, kind, size, MAC, then the payload; "secret". Entries are opened
 * without following links and without blocking (a FIFO named like one is
 * not read), and only regular files count. A write goes to a temporary
 * file renamed into place (runtime/atomic_file.c), so a reader sees a
 * whole entry or none. At most EMBER_CACHE_MAX_MB (default 256) of
 * entries stay: after a store the least recently used go (a hit touches
 * its entry), all but the newest if need be. Eviction and clearing remove
 * only files that are named as entries and begin with the magic.
 *
 * Nothing the cache does can fail a compile: trouble costs one warning per
 * kind per process. The keys are the callers' (em_cache_key_*).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ember/atomic_file.h"
#include "ember/checksum.h"
#include "ember/disk_cache.h"

#define MAGIC "EMBRCODE"
#define FORMAT 2u
#define SUBDIR "ember-cache-v1"
#define SECRET "secret"
#define MAX_PAYLOAD ((uint64_t)1 << 32)

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
    char ext[EM_CACHE_EXT_MAX]; /* NUL-padded */
    uint64_t size;
    uint8_t mac[32];
} entry_header;

/* ---- warnings ---- */

static int said_dir, said_bad, said_write, said_kind, said_unusable;

/* One warning per process and kind of trouble. */
static void warn_once(int *said, const char *fmt, ...) {
    if (__atomic_exchange_n(said, 1, __ATOMIC_RELAXED)) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ember: compile cache: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* ---- the folder ---- */

static bool cache_enabled(void) {
    const char *v = getenv("EMBER_CACHE");
    return !(v && strcmp(v, "0") == 0);
}

/* The folder ember's folder goes in (made if missing, as mkdir -p with
 * mode 0700), or false with errno set. */
static bool base_dir(char *dir, size_t n) {
    const char *env = getenv("EMBER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    snprintf(dir, n, "(none: neither EMBER_CACHE_DIR, XDG_CACHE_HOME nor HOME is set)");
    int w = env && *env     ? snprintf(dir, n, "%s", env)
            : xdg && *xdg   ? snprintf(dir, n, "%s/ember", xdg)
            : home && *home ? snprintf(dir, n, "%s/.cache/ember", home)
                            : -1;
    if (w < 0 || (size_t)w >= n) {
        errno = w < 0 ? ENOENT : ENAMETOOLONG;
        return false;
    }
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0700);
        *p = '/';
    }
    return mkdir(dir, 0700) == 0 || errno == EEXIST;
}

/* A descriptor of ember's own folder, made if missing, once it is proven
 * this user's alone; else -1 after one warning. `where` gets its path. */
static int open_cache(char *where, size_t n) {
    char base[4000];
    if (!base_dir(base, sizeof base)) {
        warn_once(&said_dir, "cannot use the directory %s (%s); compiling without it", base, strerror(errno));
        return -1;
    }
    snprintf(where, n, "%s/%s", base, SUBDIR);
    int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0) {
        warn_once(&said_dir, "cannot use the directory %s (%s); compiling without it", base, strerror(errno));
        return -1;
    }
    mkdirat(bfd, SUBDIR, 0700);
    int fd = openat(bfd, SUBDIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(bfd);
    struct stat st;
    const char *why = NULL;
    if (fd < 0)
        why = errno == ELOOP || errno == ENOTDIR ? "it is not a directory (a symbolic link?)" : strerror(errno);
    else if (fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (st.st_uid != geteuid())
        why = "another user owns it";
    else if (st.st_mode & 022)
        why = "other users can write to it";
    if (why) {
        if (fd >= 0) close(fd);
        warn_once(&said_dir,
                  "not using %s: %s, and the compiled code kept there is run by this process (remove it, "
                  "or set EMBER_CACHE_DIR); compiling without the cache",
                  where, why);
        return -1;
    }
    return fd;
}

/* A regular file `name` in dfd, opened without following a link or
 * blocking on a FIFO; -1 otherwise (*not_regular: something else is there). */
static int open_regular(int dfd, const char *name, struct stat *st, bool *not_regular) {
    *not_regular = false;
    int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *not_regular = errno == ELOOP;
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        *not_regular = true;
        close(fd);
        return -1;
    }
    return fd;
}

static bool read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* The folder's secret (made if missing), or false. */
static bool load_secret(int dfd, const char *where, uint8_t secret[32]) {
    for (int attempt = 0; attempt < 2; attempt++) {
        struct stat st;
        bool odd;
        int fd = open_regular(dfd, SECRET, &st, &odd);
        if (fd >= 0) {
            bool ok = st.st_size == 32 && st.st_uid == geteuid() && !(st.st_mode & 077) && read_all(fd, secret, 32);
            close(fd);
            if (!ok) warn_once(&said_dir, "not using %s: its secret is damaged or readable by others; compiling "
                               "without the cache", where);
            return ok;
        }
        if (odd || errno != ENOENT) break;
        /* the first process to finish writing one links it into place */
        uint8_t fresh[32];
        em_atomic_file f;
        bool existed;
        if (getrandom(fresh, sizeof fresh, 0) != (ssize_t)sizeof fresh ||
            em_atomic_open_at(&f, dfd, where, SECRET, 0600) != EM_OK)
            break;
        if (em_atomic_write(&f, fresh, sizeof fresh) != EM_OK) {
            em_atomic_abort(&f);
            break;
        }
        if (em_atomic_commit_new(&f, &existed) != EM_OK) break;
    }
    warn_once(&said_dir, "not using %s: cannot make or read its secret (%s); compiling without the cache", where,
              strerror(errno));
    return false;
}

/* ---- entries ---- */

/* Is `name` an entry's file name: 32 hex digits, a dot, and a kind of
 * letters? */
static bool is_entry(const char *name) {
    size_t len = strlen(name);
    if (len < EM_CACHE_KEY_LEN + 2 || len > EM_CACHE_KEY_LEN + EM_CACHE_EXT_MAX || name[EM_CACHE_KEY_LEN] != '.')
        return false;
    for (int i = 0; i < EM_CACHE_KEY_LEN; i++)
        if (!isxdigit((unsigned char)name[i])) return false;
    for (const char *p = name + EM_CACHE_KEY_LEN + 1; *p; p++)
        if (!isalpha((unsigned char)*p)) return false;
    return true;
}

static bool valid_ext(const char *ext) {
    size_t n = strlen(ext);
    if (n == 0 || n >= EM_CACHE_EXT_MAX) return false;
    for (const char *p = ext; *p; p++)
        if (!isalpha((unsigned char)*p)) return false;
    return true;
}

/* HMAC-SHA256(secret, header with its MAC zeroed, payload) */
static void entry_mac(const uint8_t secret[32], const entry_header *h, const void *payload, size_t n, uint8_t out[32]) {
    uint8_t pad[64], inner[32];
    entry_header zeroed = *h;
    memset(zeroed.mac, 0, sizeof zeroed.mac);
    em_sha256 s;
    for (int i = 0; i < 64; i++) pad[i] = (uint8_t)((i < 32 ? secret[i] : 0) ^ 0x36);
    em_sha256_init(&s);
    em_sha256_update(&s, pad, 64);
    em_sha256_update(&s, &zeroed, sizeof zeroed);
    em_sha256_update(&s, payload, n);
    em_sha256_final(&s, inner);
    for (int i = 0; i < 64; i++) pad[i] = (uint8_t)((i < 32 ? secret[i] : 0) ^ 0x5c);
    em_sha256_init(&s);
    em_sha256_update(&s, pad, 64);
    em_sha256_update(&s, inner, 32);
    em_sha256_final(&s, out);
}

static void fill_header(entry_header *h, const char *key, const char *ext, size_t n) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    h->format = FORMAT;
    memcpy(h->key, key, EM_CACHE_KEY_LEN);
    memcpy(h->ext, ext, strlen(ext));
    h->size = n;
}

const void *em_disk_cache_payload(const void *file, size_t n, const char *key, const char *ext,
                                  const uint8_t secret[32], size_t *payload_n) {
    entry_header h, want;
    if (n < sizeof h || !valid_ext(ext)) return NULL;
    memcpy(&h, file, sizeof h);
    const unsigned char *payload = (const unsigned char *)file + sizeof h;
    if (h.size != (uint64_t)(n - sizeof h) || h.size == 0 || h.size >= MAX_PAYLOAD) return NULL;
    fill_header(&want, key, ext, (size_t)h.size);
    memcpy(want.mac, h.mac, sizeof h.mac);
    if (memcmp(&want, &h, sizeof h) != 0) return NULL; /* magic, format, key, kind, size */
    uint8_t mac[32], diff = 0;
    entry_mac(secret, &h, payload, (size_t)h.size, mac);
    for (int i = 0; i < 32; i++) diff |= (uint8_t)(mac[i] ^ h.mac[i]);
    if (diff) return NULL;
    *payload_n = (size_t)h.size;
    return payload;
}

void *em_disk_cache_get(const char *key, const char *ext, size_t *n) {
    char where[4100], name[EM_CACHE_KEY_LEN + EM_CACHE_EXT_MAX + 2];
    uint8_t secret[32];
    if (!cache_enabled() || !valid_ext(ext)) return NULL;
    int dfd = open_cache(where, sizeof where);
    if (dfd < 0) return NULL;
    snprintf(name, sizeof name, "%.32s.%s", key, ext);
    struct stat st;
    bool odd = false;
    unsigned char *data = NULL;
    const void *payload = NULL;
    size_t size = 0, got = 0;
    int fd = load_secret(dfd, where, secret) ? open_regular(dfd, name, &st, &odd) : -1;
    if (fd < 0) {
        if (odd) warn_once(&said_kind, "ignoring %s/%s: not a regular file", where, name);
        close(dfd);
        return NULL;
    }
    /* the file's own size bounds what is read (the header's is checked against it) */
    if (st.st_size > 0 && (uint64_t)st.st_size < MAX_PAYLOAD + sizeof(entry_header)) {
        size = (size_t)st.st_size;
        if ((data = malloc(size)) && read_all(fd, data, size))
            payload = em_disk_cache_payload(data, size, key, ext, secret, &got);
    }
    close(fd);
    if (payload) {
        memmove(data, payload, got);
        utimensat(dfd, name, NULL, AT_SYMLINK_NOFOLLOW); /* (used now: the last to go) */
        close(dfd);
        *n = got;
        return data;
    }
    free(data);
    warn_once(&said_bad, "ignoring the damaged or foreign entry %s/%s (it is compiled again and replaced)", where,
              name);
    close(dfd);
    return NULL;
}

void em_disk_cache_unusable(const char *key, const char *ext, const char *why) {
    warn_once(&said_unusable,
              "the entry %.32s.%s passed its checks but could not be loaded (%s); it is compiled again and replaced",
              key, ext, why);
}

/* Does the regular file `name` in dfd begin with the entries' magic? */
static bool begins_with_magic(int dfd, const char *name, struct stat *st) {
    bool odd;
    int fd = open_regular(dfd, name, st, &odd);
    if (fd < 0) return false;
    char m[8];
    bool ok = read_all(fd, m, 8) && memcmp(m, MAGIC, 8) == 0;
    close(fd);
    return ok;
}

typedef struct {
    char name[64];
    off_t size;
    struct timespec used;
} entry_info;

static int by_use(const void *a, const void *b) {
    const struct timespec *x = &((const entry_info *)a)->used, *y = &((const entry_info *)b)->used;
    return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                  : (x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec);
}

/* The entries in dfd (named as such and beginning with the magic). */
static entry_info *list_entries(int dfd, size_t *count, long long *total) {
    int dup_fd = dup(dfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    *count = 0;
    *total = 0;
    if (!d) {
        if (dup_fd >= 0) close(dup_fd);
        return NULL;
    }
    entry_info *all = NULL;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        if (!is_entry(e->d_name) || !begins_with_magic(dfd, e->d_name, &st)) continue;
        if (*count == cap) {
            entry_info *grown = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof *all);
            if (!grown) break;
            all = grown;
        }
        entry_info *i = &all[(*count)++];
        memcpy(i->name, e->d_name, strlen(e->d_name) + 1); /* (is_entry bounds it well within name) */
        i->size = st.st_size;
        i->used = st.st_mtim;
        *total += st.st_size;
    }
    closedir(d);
    return all;
}

/* Removes the least recently used entries beyond the size bound. */
static void evict(int dfd) {
    const char *v = getenv("EMBER_CACHE_MAX_MB");
    long long bound = (v && *v ? atoll(v) : 256) << 20, total;
    size_t n;
    entry_info *all = list_entries(dfd, &n, &total);
    if (total > bound && all) {
        qsort(all, n, sizeof *all, by_use);
        for (size_t i = 0; i + 1 < n && total > bound; i++) /* (the newest stays) */
            if (unlinkat(dfd, all[i].name, 0) == 0) total -= all[i].size;
    }
    free(all);
}

void em_disk_cache_put(const char *key, const char *ext, const void *data, size_t n) {
    char where[4100], name[EM_CACHE_KEY_LEN + EM_CACHE_EXT_MAX + 2];
    uint8_t secret[32];
    if (!cache_enabled() || !valid_ext(ext) || n == 0 || (uint64_t)n >= MAX_PAYLOAD) return;
    int dfd = open_cache(where, sizeof where);
    if (dfd < 0) return;
    if (!load_secret(dfd, where, secret)) {
        close(dfd);
        return;
    }
    snprintf(name, sizeof name, "%.32s.%s", key, ext);
    entry_header h;
    fill_header(&h, key, ext, n);
    entry_mac(secret, &h, data, n, h.mac);
    em_atomic_file f;
    em_status st = em_atomic_open_at(&f, dfd, where, name, 0600);
    if (st == EM_OK) st = em_atomic_write(&f, &h, sizeof h);
    if (st == EM_OK) st = em_atomic_write(&f, data, n);
    if (st == EM_OK) st = em_atomic_commit(&f);
    else if (f.tmp[0]) em_atomic_abort(&f);
    if (st != EM_OK)
        warn_once(&said_write, "%s; compiling without storing", em_last_error());
    else
        evict(dfd);
    close(dfd);
}

/* Is `name` a temporary file of an entry's write (atomic_file.c's naming)? */
static bool is_entry_temp(const char *name) {
    const char *mark = strstr(name, ".ember-tmp-");
    if (name[0] != '.' || !mark) return false;
    char entry[64];
    size_t len = (size_t)(mark - name - 1);
    if (len >= sizeof entry) return false;
    memcpy(entry, name + 1, len);
    entry[len] = 0;
    return is_entry(entry);
}

em_status em_disk_cache_clear(void) {
    char where[4100];
    if (!cache_enabled()) return EM_OK;
    int dfd = open_cache(where, sizeof where);
    if (dfd < 0) return EM_OK;
    size_t n;
    long long total;
    entry_info *all = list_entries(dfd, &n, &total);
    for (size_t i = 0; i < n; i++) unlinkat(dfd, all[i].name, 0);
    free(all);
    /* temporary files of writes that were killed, named as entries' */
    int dup_fd = dup(dfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d && dup_fd >= 0) close(dup_fd);
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (is_entry_temp(e->d_name) && fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            unlinkat(dfd, e->d_name, 0);
    }
    if (d) closedir(d);
    close(dfd);
    return EM_OK;
}
