/*
 * safetensors.c - safetensors files in C (safetensors.h).
 *
 * The header is a JSON object; the reader here takes exactly the JSON that
 * format allows (objects, strings, non-negative integers in arrays, and
 * the __metadata__ object of strings), nested at most three deep, and
 * refuses anything else with the file name and the byte offset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/atomic_file.h"
#include "ember/ops.h"
#include "ember/strbuf.h"
#include "safetensors.h"

#define MAX_HEADER (100u * 1000u * 1000u) /* the reference reader's limit */
#define ALIGN 8

/* ORDER DTYPE */
static const char *const codes[EM_DTYPE_COUNT] = {
    [EM_DTYPE_F32] = "F32", [EM_DTYPE_F64] = "F64", [EM_DTYPE_F16] = "F16", [EM_DTYPE_BF16] = "BF16",
    [EM_DTYPE_I64] = "I64", [EM_DTYPE_I32] = "I32", [EM_DTYPE_I16] = "I16", [EM_DTYPE_I8] = "I8",
    [EM_DTYPE_U8] = "U8",   [EM_DTYPE_BOOL] = "BOOL",
};

/* ---- writing ---- */

static void put_string(em_strbuf *b, const char *s) {
    em_strbuf_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            em_strbuf_printf(b, "\\%c", c);
        else if (c < 0x20)
            em_strbuf_printf(b, "\\u%04x", c);
        else
            em_strbuf_add(b, s, 1);
    }
    em_strbuf_puts(b, "\"");
}

em_status em_st_write(const char *path, const em_st_tensor *tensors, int n) {
    em_strbuf h;
    em_strbuf_init(&h);
    em_strbuf_puts(&h, "{");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const em_st_tensor *t = &tensors[i];
        if (i) em_strbuf_puts(&h, ",");
        put_string(&h, t->name);
        em_strbuf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", codes[t->dtype]);
        for (int d = 0; d < t->ndim; d++) em_strbuf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        em_strbuf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", at, at + t->nbytes);
        at += t->nbytes;
    }
    em_strbuf_puts(&h, "}");
    while (!h.failed && h.len % ALIGN) em_strbuf_puts(&h, " ");
    size_t hlen = h.len;
    char *header = em_strbuf_take(&h);
    if (!header) return em_error(EM_ERR_NOMEM, "%s: out of memory writing", path);
    /* replaced atomically: a failed or killed write leaves the old file */
    em_atomic_file f;
    em_status st = em_atomic_open(&f, path, 0666);
    if (st == EM_OK) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
        st = em_atomic_write(&f, len8, 8);
        if (st == EM_OK) st = em_atomic_write(&f, header, hlen);
        for (int i = 0; st == EM_OK && i < n; i++)
            if (tensors[i].nbytes) st = em_atomic_write(&f, tensors[i].data, tensors[i].nbytes);
        if (st == EM_OK) st = em_atomic_commit(&f);
        else em_atomic_abort(&f);
    }
    free(header);
    return st;
}

em_status em_st_write_tensors(const char *path, em_tensor *const *tensors, const char *const *names, int n) {
    em_st_tensor *e = calloc((size_t)n + 1, sizeof *e);
    em_tensor **held = calloc((size_t)n + 1, sizeof *held);
    em_status st = e && held ? EM_OK : em_error(EM_ERR_NOMEM, "out of memory writing %s", path);
    int k = 0;
    for (; st == EM_OK && k < n; k++) {
        em_tensor *t = tensors[k];
        if (!(held[k] = em_contiguous(t))) {
            st = em_last_status();
            break;
        }
        e[k] = (em_st_tensor){names[k], t->dtype, t->ndim, {0}, em_tensor_data(held[k]),
                              (size_t)em_shape_numel(t->shape, t->ndim) * em_dtype_size(t->dtype)};
        memcpy(e[k].shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    }
    if (st == EM_OK) st = em_st_write(path, e, n);
    for (int i = 0; held && i < k; i++) em_tensor_release(held[i]);
    free(e);
    free(held);
    return st;
}

/* ---- reading the header's JSON ---- */

typedef struct {
    const char *file;
    const unsigned char *p, *end, *start;
    bool failed;
} json;

static void jfail(json *j, const char *what) {
    if (j->failed) return;
    j->failed = true;
    em_error(EM_ERR_VALUE, "%s: malformed safetensors header at byte %lld: %s", j->file,
             (long long)(8 + (j->p - j->start)), what);
}

static void skip_ws(json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')) j->p++;
}

static bool take(json *j, char c) {
    skip_ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    return false;
}

static void expect(json *j, char c) {
    if (!take(j, c)) {
        char what[32];
        snprintf(what, sizeof what, "expected '%c'", c);
        jfail(j, what);
    }
}

/* A string into b (UTF-8, escapes decoded; \u0000 refused). */
static void string(json *j, em_strbuf *b) {
    expect(j, '"');
    while (!j->failed) {
        if (j->p >= j->end) return jfail(j, "unterminated string");
        unsigned char c = *j->p++;
        if (c == '"') return;
        if (c < 0x20) return jfail(j, "control character in a string");
        if (c != '\\') {
            em_strbuf_add(b, (const char *)&c, 1);
            continue;
        }
        if (j->p >= j->end) return jfail(j, "unterminated escape");
        c = *j->p++;
        const char *simple = strchr("\"\\/bfnrt", c);
        if (simple && c) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            em_strbuf_add(b, &out[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        if (c != 'u' || j->end - j->p < 4) return jfail(j, "bad escape");
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
            unsigned char h = *j->p++;
            v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
            if (v > 0xFFFF) return jfail(j, "bad \\u escape");
        }
        if (v == 0 || (v >= 0xD800 && v <= 0xDFFF)) return jfail(j, "unsupported \\u escape");
        char u[3];
        if (v < 0x80) {
            u[0] = (char)v;
            em_strbuf_add(b, u, 1);
        } else if (v < 0x800) {
            u[0] = (char)(0xC0 | v >> 6), u[1] = (char)(0x80 | (v & 0x3F));
            em_strbuf_add(b, u, 2);
        } else {
            u[0] = (char)(0xE0 | v >> 12), u[1] = (char)(0x80 | (v >> 6 & 0x3F)), u[2] = (char)(0x80 | (v & 0x3F));
            em_strbuf_add(b, u, 3);
        }
    }
}

static uint64_t integer(json *j) {
    skip_ws(j);
    uint64_t v = 0;
    const unsigned char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) {
            jfail(j, "integer too large");
            return 0;
        }
        v = v * 10 + (uint64_t)(*j->p++ - '0');
    }
    if (j->p == s) jfail(j, "expected a non-negative integer");
    return v;
}

/* [int, ...] into v (at most cap); returns the count. */
static int int_array(json *j, uint64_t *v, int cap) {
    expect(j, '[');
    int n = 0;
    if (take(j, ']')) return 0;
    do {
        uint64_t x = integer(j);
        if (n == cap) {
            jfail(j, "array too long");
            return n;
        }
        v[n++] = x;
    } while (!j->failed && take(j, ','));
    expect(j, ']');
    return n;
}

/* One tensor's entry {"dtype": ..., "shape": [...], "data_offsets": [a, b]}. */
static void entry(json *j, em_st_tensor *t, uint64_t *range, size_t data_size) {
    bool seen[3] = {false, false, false};
    expect(j, '{');
    do {
        em_strbuf key;
        em_strbuf_init(&key);
        string(j, &key);
        char *k = em_strbuf_take(&key);
        if (!k) return jfail(j, "out of memory");
        expect(j, ':');
        if (strcmp(k, "dtype") == 0) {
            em_strbuf v;
            em_strbuf_init(&v);
            string(j, &v);
            char *code = em_strbuf_take(&v);
            int d = 0;
            while (d < EM_DTYPE_COUNT && (!code || strcmp(code, codes[d]) != 0)) d++;
            if (d == EM_DTYPE_COUNT && !j->failed) jfail(j, "a dtype ember does not have");
            t->dtype = (em_dtype)d;
            seen[0] = true;
            free(code);
        } else if (strcmp(k, "shape") == 0) {
            uint64_t s[EM_MAX_DIMS];
            t->ndim = int_array(j, s, EM_MAX_DIMS);
            for (int d = 0; d < t->ndim; d++) {
                if (s[d] > (uint64_t)INT64_MAX) jfail(j, "dimension too large");
                t->shape[d] = (int64_t)s[d];
            }
            seen[1] = true;
        } else if (strcmp(k, "data_offsets") == 0) {
            if (int_array(j, range, 2) != 2) jfail(j, "data_offsets needs two numbers");
            seen[2] = true;
        } else {
            jfail(j, "unknown key in a tensor's entry");
        }
        free(k);
    } while (!j->failed && take(j, ','));
    expect(j, '}');
    if (j->failed) return;
    if (!seen[0] || !seen[1] || !seen[2]) return jfail(j, "a tensor needs dtype, shape and data_offsets");
    if (range[0] > range[1] || range[1] > data_size) return jfail(j, "data_offsets outside the data");
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] && numel > UINT64_MAX / (uint64_t)t->shape[d] / 8)
            return jfail(j, "shape too large");
        else
            numel *= (uint64_t)t->shape[d];
    if (numel * em_dtype_size(t->dtype) != range[1] - range[0])
        return jfail(j, "data_offsets do not hold the shape");
    t->nbytes = (size_t)(range[1] - range[0]);
}

/* The __metadata__ object: strings only, skipped. */
static void metadata(json *j) {
    expect(j, '{');
    if (take(j, '}')) return;
    do {
        em_strbuf s;
        em_strbuf_init(&s);
        string(j, &s);
        expect(j, ':');
        string(j, &s);
        em_strbuf_free(&s);
    } while (!j->failed && take(j, ','));
    expect(j, '}');
}

static em_status parse_header(em_st_file *f, const char *path, size_t hlen) {
    json j = {path, f->bytes + 8, f->bytes + 8 + hlen, f->bytes + 8, false};
    const unsigned char *data = f->bytes + 8 + hlen;
    size_t data_size = f->size - 8 - hlen;
    em_strbuf names;
    em_strbuf_init(&names);
    int cap = 0;
    size_t *name_at = NULL;
    expect(&j, '{');
    if (!take(&j, '}')) do {
            em_strbuf key;
            em_strbuf_init(&key);
            string(&j, &key);
            char *k = em_strbuf_take(&key);
            if (!k) {
                jfail(&j, "out of memory");
                break;
            }
            expect(&j, ':');
            if (strcmp(k, "__metadata__") == 0) {
                metadata(&j);
            } else {
                if (f->n == cap) {
                    cap = cap ? 2 * cap : 16;
                    em_st_tensor *nt = realloc(f->tensors, (size_t)cap * sizeof *nt);
                    size_t *na = realloc(name_at, (size_t)cap * sizeof *na);
                    if (nt) f->tensors = nt;
                    if (na) name_at = na;
                    if (!nt || !na) {
                        free(k);
                        jfail(&j, "out of memory");
                        break;
                    }
                }
                em_st_tensor *t = &f->tensors[f->n];
                memset(t, 0, sizeof *t);
                uint64_t range[2] = {0, 0};
                entry(&j, t, range, data_size);
                t->data = j.failed ? NULL : data + range[0]; /* (range is checked only when entry succeeds) */
                name_at[f->n++] = names.len;
                em_strbuf_add(&names, k, strlen(k) + 1);
            }
            free(k);
        } while (!j.failed && take(&j, ','));
    if (!j.failed) expect(&j, '}');
    skip_ws(&j);
    if (!j.failed && j.p != j.end) jfail(&j, "text after the header's object");
    f->names = names.failed ? NULL : names.data;
    if (!j.failed && names.failed) jfail(&j, "out of memory");
    for (int i = 0; !j.failed && i < f->n; i++) f->tensors[i].name = f->names + name_at[i];
    free(name_at);
    return j.failed ? em_last_status() : EM_OK;
}

em_status em_st_parse(unsigned char *bytes, size_t size, const char *name, em_st_file *f) {
    memset(f, 0, sizeof *f);
    f->bytes = bytes;
    f->size = size;
    em_status st;
    uint64_t hlen = 0;
    if (size < 8) {
        st = em_error(EM_ERR_VALUE, "%s: not a safetensors file (%zu bytes, the header alone takes 8)", name, size);
    } else {
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | bytes[i];
        if (hlen > MAX_HEADER || hlen > size - 8)
            st = em_error(EM_ERR_VALUE, "%s: at byte 0: the header claims %llu bytes, the file has %zu after it", name,
                          (unsigned long long)hlen, size - 8);
        else
            st = parse_header(f, name, (size_t)hlen);
    }
    if (st != EM_OK) em_st_close(f);
    return st;
}

em_status em_st_read(const char *path, em_st_file *f) {
    memset(f, 0, sizeof *f);
    /* (without blocking: a FIFO in the path's place is refused, not waited on) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return em_error(EM_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    unsigned char *bytes = NULL;
    em_status st = EM_OK;
    size_t size = 0;
    if (fstat(fd, &sb) != 0) {
        st = em_error(EM_ERR_RUNTIME, "%s: cannot read: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = em_error(EM_ERR_VALUE, "%s: not a safetensors file: %s", path,
                      S_ISDIR(sb.st_mode) ? "it is a directory" : "it is not a regular file");
    } else if (sb.st_size < 8) {
        st = em_error(EM_ERR_VALUE, "%s: not a safetensors file (%lld bytes, the header alone takes 8)", path,
                      (long long)sb.st_size);
    } else if (!(bytes = malloc(size = (size_t)sb.st_size))) {
        st = em_error(EM_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, size);
    } else {
        for (size_t done = 0; done < size && st == EM_OK;) {
            ssize_t r = read(fd, bytes + done, size - done);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) st = em_error(EM_ERR_RUNTIME, "%s: read failed: %s", path, r ? strerror(errno) : "it shrank");
            else done += (size_t)r;
        }
    }
    close(fd);
    if (st != EM_OK) {
        free(bytes);
        return st;
    }
    return em_st_parse(bytes, size, path, f);
}

const em_st_tensor *em_st_find(const em_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

void em_st_close(em_st_file *f) {
    free(f->bytes);
    free(f->tensors);
    free(f->names);
    memset(f, 0, sizeof *f);
}
