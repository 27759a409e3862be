/*
 * strbuf.h - a growable string for printers and dumps.
 *
 * Appends never fail loudly: on allocation failure the buffer is marked
 * failed and em_strbuf_take() returns NULL (with EM_ERR_NOMEM set), so
 * callers check once at the end.
 */
#ifndef EMBER_STRBUF_H
#define EMBER_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_strbuf {
    char *data;
    size_t len, cap;
    bool failed;
} em_strbuf;

void em_strbuf_init(em_strbuf *b);
void em_strbuf_add(em_strbuf *b, const char *s, size_t n);
void em_strbuf_puts(em_strbuf *b, const char *s);
void em_strbuf_printf(em_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The NUL-terminated string (malloc'd, caller frees), or NULL if any append
 * failed; the buffer is reset either way. */
char *em_strbuf_take(em_strbuf *b);
void em_strbuf_free(em_strbuf *b);

/* Shortest decimal text that reads back as exactly `v` ("inf", "-inf" and
 * "nan" for the special values). buf needs 32 bytes. */
const char *em_format_double(double v, char *buf);
/* Same for a value that is a float32 (shortest text that reads back as the
 * same float32: 0.044715 rather than 0.044714998453855515). */
const char *em_format_float(float v, char *buf);

#ifdef __cplusplus
}
#endif
#endif
