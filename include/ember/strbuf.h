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

#include "ember/status.h"

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

/* ---- reading words back: the descriptions a shared object holds ----
 *
 * A cursor over whitespace-separated words, for the small text formats
 * ember writes with em_strbuf and reads back from files it did not write
 * itself (a model's description): every read is bounded by the text's
 * end and checked against a range; the first failure sticks, with a
 * message naming `what` (the format) and the word's offset. */
typedef struct em_words {
    const char *text, *at, *end;
    const char *what;
    bool failed;
} em_words;

void em_words_init(em_words *s, const char *text, size_t n, const char *what);
/* The next word as an integer in [lo, hi]; on failure 0 (and s->failed). */
long long em_words_int(em_words *s, long long lo, long long hi);
/* The next word (at most cap - 1 bytes copied into buf, NUL-terminated). */
void em_words_word(em_words *s, char *buf, size_t cap);
/* Reads the next word and fails unless it is `word`. */
void em_words_expect(em_words *s, const char *word);
/* The rest of the text after the current word's following newline:
 * *n receives its length. */
const char *em_words_rest(em_words *s, size_t *n);
/* EM_OK, or the first failure as an error (EM_ERR_PARSE). */
em_status em_words_status(const em_words *s);

#ifdef __cplusplus
}
#endif
#endif
