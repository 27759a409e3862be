/*
 * status.h - error reporting shared by every ember module.
 *
 * Public functions that can fail return an em_status (or NULL for
 * constructors) and leave a human-readable message in a thread-local buffer
 * through em_error(); em_last_error() reads it back. The library never
 * aborts or exits on bad input: assertions guard ember's own invariants only.
 * Messages name the op and the shapes/dtypes involved, e.g.
 *   "add: cannot broadcast f32[2,3] with f32[4]".
 */
#ifndef EMBER_STATUS_H
#define EMBER_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Python layer maps each status to the exception PyTorch raises for the
 * same mistake; the mapping lives in python/csrc/errors.c. ORDER STATUS */
typedef enum em_status {
    EM_OK = 0,
    EM_ERR_VALUE,           /* bad argument value (ValueError)               */
    EM_ERR_TYPE,            /* wrong kind of argument (TypeError)            */
    EM_ERR_INDEX,           /* dimension or index out of range (IndexError)  */
    EM_ERR_SHAPE,           /* shapes do not fit together (RuntimeError)     */
    EM_ERR_DTYPE,           /* dtype not supported or mismatched (RuntimeError) */
    EM_ERR_DEVICE,          /* device mismatch or unavailable (RuntimeError) */
    EM_ERR_NOMEM,           /* allocation failed (MemoryError)               */
    EM_ERR_NOT_IMPLEMENTED, /* a feature ember does not have yet             */
    EM_ERR_PARSE,           /* malformed IR text                             */
    EM_ERR_RUNTIME,         /* anything else the user can cause              */
    EM_ERR_INTERNAL,        /* an ember bug: please report                   */
    EM_ERR_GUARD,           /* a compiled run stopped: a value guard failed  */
    EM_ERR_HOST,            /* a host callback failed; the host's own error
                               (a Python exception) is pending             */
    EM_ERR_DEVICE_NOMEM,    /* device memory exhausted (ember.cuda.OutOfMemoryError,
                               a RuntimeError)                              */
    EM_ERR_DISTRIBUTED,     /* a collective failed between processes: a timeout,
                               ranks that disagree, MPI's own error
                               (ember.distributed.DistBackendError, a
                               RuntimeError)                                */
    EM_STATUS_COUNT
} em_status;

/* Records `fmt` as this thread's last error message and returns `status`,
 * so that failing paths read `return em_error(EM_ERR_SHAPE, "...", ...);`. */
em_status em_error(em_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
em_status em_verror(em_status status, const char *fmt, va_list ap);

/* Prefixes the current message with "<prefix>: " (used when a callee's error
 * needs the caller's context). Returns the status it was given. */
em_status em_error_prefix(em_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* This thread's last error message; "" if none. Borrowed, valid until the
 * next em_error on this thread. */
const char *em_last_error(void);
/* The status recorded together with the last message. */
em_status em_last_status(void);
void em_clear_error(void);

/* Short name of a status ("shape error", ...). Static storage. */
const char *em_status_name(em_status status);

#ifdef __cplusplus
}
#endif
#endif
