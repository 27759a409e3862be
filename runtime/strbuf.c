/*
 * strbuf.c - growable strings and round-trip number formatting.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/status.h"
#include "ember/strbuf.h"

void em_strbuf_init(em_strbuf *b) { memset(b, 0, sizeof *b); }

static bool reserve(em_strbuf *b, size_t extra) {
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void em_strbuf_add(em_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void em_strbuf_puts(em_strbuf *b, const char *s) { em_strbuf_add(b, s, strlen(s)); }

void em_strbuf_printf(em_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *em_strbuf_take(em_strbuf *b) {
    char *s = NULL;
    if (b->failed)
        free(b->data);
    else
        s = b->data ? b->data : calloc(1, 1);
    if (!s) em_error(EM_ERR_NOMEM, "out of memory building a string");
    em_strbuf_init(b);
    return s;
}

void em_strbuf_free(em_strbuf *b) {
    free(b->data);
    em_strbuf_init(b);
}

static const char *format_shortest(double v, bool as_float, char *buf) {
    char tmp[32];
    if (isnan(v))
        strcpy(tmp, "nan");
    else if (isinf(v))
        strcpy(tmp, v > 0 ? "inf" : "-inf");
    else
        for (int p = 1; p <= 17; p++) {
            snprintf(tmp, sizeof tmp, "%.*g", p, v);
            double back = strtod(tmp, NULL);
            if (as_float ? (float)back == (float)v : back == v) break;
        }
    memcpy(buf, tmp, strlen(tmp) + 1);
    return buf;
}

const char *em_format_double(double v, char *buf) { return format_shortest(v, false, buf); }
const char *em_format_float(float v, char *buf) { return format_shortest(v, true, buf); }
