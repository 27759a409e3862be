/*
 * status.c - the thread-local last-error message behind em_error().
 *
 * One buffer per thread; em_error() overwrites it and returns the status so
 * failing paths stay one line. Nothing here allocates, so reporting an
 * out-of-memory error cannot itself fail.
 */
#include <stdio.h>
#include <string.h>

#include "ember/status.h"

#define MSG_SIZE 1024

static _Thread_local char last_msg[MSG_SIZE];
static _Thread_local em_status last_status;

em_status em_verror(em_status status, const char *fmt, va_list ap) {
    char msg[MSG_SIZE]; /* (an argument may be the last message itself: em_last_error()) */
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(last_msg, msg, sizeof msg);
    last_status = status;
    return status;
}

em_status em_error(em_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

em_status em_error_prefix(em_status status, const char *fmt, ...) {
    char old[MSG_SIZE];
    memcpy(old, last_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    /* Append ": <old message>", truncating quietly if it does not fit. */
    size_t len = n < 0 ? 0 : (size_t)n < sizeof last_msg ? (size_t)n : sizeof last_msg - 1;
    size_t room = sizeof last_msg - 1 - len;
    size_t add = strlen(old) + 2 < room ? strlen(old) + 2 : room;
    char sep_old[MSG_SIZE + 2] = ": ";
    memcpy(sep_old + 2, old, strlen(old) + 1);
    memcpy(last_msg + len, sep_old, add);
    last_msg[len + add] = '\0';
    last_status = status;
    return status;
}

const char *em_last_error(void) { return last_msg; }
em_status em_last_status(void) { return last_status; }

void em_clear_error(void) {
    last_msg[0] = '\0';
    last_status = EM_OK;
}

const char *em_status_name(em_status status) {
    static const char *const names[EM_STATUS_COUNT] = {
        /* ORDER STATUS */
        "ok",           "value error",  "type error",   "index error",
        "shape error",  "dtype error",  "device error", "out of memory",
        "not implemented", "parse error", "runtime error", "internal error", "value guard failed",
        "host error", "device out of memory", "distributed error",
    };
    return (unsigned)status < EM_STATUS_COUNT ? names[status] : "unknown status";
}
