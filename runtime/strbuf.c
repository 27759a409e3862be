/*
 * strbuf.c - growable strings and round-trip number formatting.
 */
#include <errno.h>
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

/* ---- em_words ---- */

void em_words_init(em_words *s, const char *text, size_t n, const char *what) {
    s->text = s->at = text;
    s->end = text + n;
    s->what = what;
    s->failed = false;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* The next word: [*begin, return value), or NULL at the end. */
static const char *next_word(em_words *s, const char **begin) {
    while (s->at < s->end && is_space(*s->at)) s->at++;
    *begin = s->at;
    while (s->at < s->end && !is_space(*s->at) && *s->at) s->at++;
    return s->at > *begin ? s->at : NULL;
}

static void scan_fail(em_words *s, const char *at, const char *fmt, const char *word, size_t n) {
    if (s->failed) return;
    s->failed = true;
    em_error(EM_ERR_PARSE, "%s: at byte %lld: %s '%.*s'", s->what, (long long)(at - s->text), fmt,
             (int)(n > 40 ? 40 : n), word);
}

long long em_words_int(em_words *s, long long lo, long long hi) {
    if (s->failed) return 0;
    const char *b, *e = next_word(s, &b);
    if (!e) {
        scan_fail(s, b, "expected a number, found the end", "", 0);
        return 0;
    }
    char buf[32];
    size_t n = (size_t)(e - b);
    if (n >= sizeof buf) {
        scan_fail(s, b, "number too long:", b, n);
        return 0;
    }
    memcpy(buf, b, n);
    buf[n] = 0;
    char *stop;
    errno = 0;
    long long v = strtoll(buf, &stop, 10);
    if (*stop || errno || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "expected an integer in [%lld, %lld], found", lo, hi);
        scan_fail(s, b, why, b, n);
        return 0;
    }
    return v;
}

void em_words_word(em_words *s, char *buf, size_t cap) {
    buf[0] = 0;
    if (s->failed) return;
    const char *b, *e = next_word(s, &b);
    if (!e) {
        scan_fail(s, b, "expected a word, found the end", "", 0);
        return;
    }
    size_t n = (size_t)(e - b);
    if (n >= cap) {
        scan_fail(s, b, "word too long:", b, n);
        return;
    }
    memcpy(buf, b, n);
    buf[n] = 0;
}

void em_words_expect(em_words *s, const char *word) {
    char buf[64];
    const char *at = s->at;
    em_words_word(s, buf, sizeof buf);
    if (!s->failed && strcmp(buf, word) != 0) {
        char why[96];
        snprintf(why, sizeof why, "expected '%s', found", word);
        scan_fail(s, at, why, buf, strlen(buf));
    }
}

const char *em_words_rest(em_words *s, size_t *n) {
    while (s->at < s->end && *s->at != '\n') s->at++;
    if (s->at < s->end) s->at++;
    *n = (size_t)(s->end - s->at);
    return s->at;
}

em_status em_words_status(const em_words *s) { return s->failed ? EM_ERR_PARSE : EM_OK; }
