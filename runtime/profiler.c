/*
 * profiler.c - the eager profiler (profiler.h): its place in dispatch's
 * interceptor stack, installed when it first starts, and the events it
 * keeps. Off, it costs an op one load of a flag.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ember/alloc.h"
#include "ember/ops.h"
#include "ember/profiler.h"

static bool active;       /* atomic */
static bool record_shapes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static em_profile_event *events;
static int64_t n_events, cap_events, dropped_events, t0;
static int64_t next_thread = 1; /* atomic */
static _Thread_local int64_t op_start, thread_id;

static int64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool em_profiler_active(void) { return __atomic_load_n(&active, __ATOMIC_ACQUIRE); }
int64_t em_profiler_now_ns(void) { return clock_ns() - t0; }

static void shapes_of(em_tensor *const *in, int n_in, char *out, size_t size) {
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < n_in && in[i] && at + 1 < size; i++) {
        char s[64];
        em_shape_str(in[i]->shape, in[i]->ndim, s, sizeof s);
        int k = snprintf(out + at, size - at, "%s%s", i ? ", " : "", s);
        if (k < 0 || (size_t)k >= size - at) { /* cut short, marked as such */
            if (size >= 4) memcpy(out + size - 4, "...", 4);
            return;
        }
        at += (size_t)k;
    }
}

int64_t em_profiler_thread(void) {
    if (!thread_id) thread_id = __atomic_fetch_add(&next_thread, 1, __ATOMIC_RELAXED);
    return thread_id;
}

static void record(em_op op, bool inplace, int64_t start, em_tensor *const *in, int n_in) {
    int64_t end = clock_ns();
    em_profile_event e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s%s", em_op_get(op)->kind == EM_KIND_CAST && inplace ? "copy" : em_op_name(op),
             inplace ? "_" : "");
    e.start_ns = start - t0;
    e.dur_ns = end - start;
    e.thread = em_profiler_thread();
    if (record_shapes) shapes_of(in, n_in, e.shapes, sizeof e.shapes);
    pthread_mutex_lock(&lock);
    if (!__atomic_load_n(&active, __ATOMIC_RELAXED)) { /* (stopped meanwhile) */
    } else if (n_events == cap_events && cap_events < EM_PROFILE_MAX_EVENTS) {
        int64_t cap = cap_events ? 2 * cap_events : 4096;
        em_profile_event *more = em_malloc((size_t)cap * sizeof *more);
        if (more) {
            if (n_events) memcpy(more, events, (size_t)n_events * sizeof *more);
            em_free(events);
            events = more;
            cap_events = cap;
            events[n_events++] = e;
        } else {
            dropped_events++;
        }
    } else if (n_events < cap_events) {
        events[n_events++] = e;
    } else {
        dropped_events++;
    }
    pthread_mutex_unlock(&lock);
}

static void before_op(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs) {
    (void)op, (void)in, (void)n_in, (void)attrs;
    op_start = em_profiler_active() ? clock_ns() : 0;
}

static em_status after_op(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *const *out,
                          int n_out) {
    (void)attrs, (void)out, (void)n_out;
    if (op_start && em_profiler_active()) record(op, false, op_start, in, n_in);
    op_start = 0;
    return EM_OK;
}

static em_status before_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                                void **state) {
    (void)op, (void)in, (void)n_in, (void)attrs, (void)target;
    *state = em_profiler_active() ? (void *)(uintptr_t)clock_ns() : NULL;
    return EM_OK;
}

static void after_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                          void *state) {
    (void)attrs, (void)target;
    if (state && em_profiler_active()) record(op, true, (int64_t)(uintptr_t)state, in, n_in);
}

static const em_interceptor interceptor = {
    .name = "profile",
    .before_op = before_op,
    .after_op = after_op,
    .before_inplace = before_inplace,
    .after_inplace = after_inplace,
};

em_status em_profiler_start(bool shapes) {
    pthread_mutex_lock(&lock);
    if (__atomic_load_n(&active, __ATOMIC_RELAXED)) {
        pthread_mutex_unlock(&lock);
        return em_error(EM_ERR_RUNTIME, "profiler: already started (one profile at a time, as PyTorch's)");
    }
    em_free(events);
    events = NULL;
    n_events = cap_events = dropped_events = 0;
    record_shapes = shapes;
    t0 = clock_ns();
    em_interceptor_install(EM_INTERCEPT_PROFILE, &interceptor);
    __atomic_store_n(&active, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    return EM_OK;
}

em_status em_profiler_stop(em_profile_event **out, int64_t *n, int64_t *dropped) {
    pthread_mutex_lock(&lock);
    if (!__atomic_load_n(&active, __ATOMIC_RELAXED)) {
        pthread_mutex_unlock(&lock);
        return em_error(EM_ERR_RUNTIME, "profiler: not started");
    }
    __atomic_store_n(&active, false, __ATOMIC_RELEASE);
    *out = events;
    *n = n_events;
    *dropped = dropped_events;
    events = NULL;
    n_events = cap_events = dropped_events = 0;
    pthread_mutex_unlock(&lock);
    return EM_OK;
}
