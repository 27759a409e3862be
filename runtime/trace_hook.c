/*
 * trace_hook.c - the per-thread hook through which a tracer sees every op
 * and event (ops.h). Depends on nothing, so tensors and kernels can report
 * to it without reaching the dispatcher.
 */
#include "ember/ops.h"

static _Thread_local const em_trace_hook *trace_hook;

const em_trace_hook *em_set_trace_hook(const em_trace_hook *hook) {
    const em_trace_hook *old = trace_hook;
    trace_hook = hook;
    return old;
}

const em_trace_hook *em_get_trace_hook(void) { return trace_hook; }

void em_note_event(em_trace_event ev, const char *what, const em_tensor *t) {
    if (trace_hook && trace_hook->on_event) trace_hook->on_event(trace_hook->ctx, ev, what, t);
}

