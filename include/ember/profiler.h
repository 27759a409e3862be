/*
 * profiler.h - the eager profiler (ember.profiler, as torch.profiler): a
 * layer of dispatch's interceptor stack (ops.h) that, while started,
 * times every op the user runs (ops at nesting depth 0: an op's time
 * includes its autograd recording, as in PyTorch, and the ops a backward
 * runs are ops too) on every thread, and keeps one event per op.
 */
#ifndef EMBER_PROFILER_H
#define EMBER_PROFILER_H

#include <stdbool.h>
#include <stdint.h>

#include "ember/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_profile_event {
    char name[32];     /* the op ("add"), "add_" when in place */
    int64_t start_ns;  /* since em_profiler_start */
    int64_t dur_ns;
    int64_t thread;    /* 1, 2, ...: in the order threads first ran an op */
    char shapes[96];   /* the operands' shapes ("[2, 3], [3]") with record_shapes, else "" */
} em_profile_event;

/* Starts recording (EM_ERR_RUNTIME when already started). */
em_status em_profiler_start(bool record_shapes);
/* Stops; *events (free with em_free) and *n receive what was recorded,
 * *dropped how many events did not fit (at most EM_PROFILE_MAX_EVENTS
 * are kept). */
#define EM_PROFILE_MAX_EVENTS (1 << 20)
em_status em_profiler_stop(em_profile_event **events, int64_t *n, int64_t *dropped);
bool em_profiler_active(void);
/* Nanoseconds since the start, on the profiler's clock (CLOCK_MONOTONIC),
 * for ranges timed outside (record_function). */
int64_t em_profiler_now_ns(void);
/* The calling thread's number in events (given now if it has none). */
int64_t em_profiler_thread(void);

#ifdef __cplusplus
}
#endif
#endif
