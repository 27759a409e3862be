/*
 * trace_hook.c - the per-thread hook through which a tracer sees every op
 * and event (ops.h), and the tracer's mark on tensors. Depends only on
 * tensors, so kernels can report to it without reaching the dispatcher.
 */
#include "ember/ops.h"

#include <stdio.h>

static _Thread_local const em_trace_hook *trace_hook;

static em_status after_op(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *const *out,
                          int n_out) {
    if (trace_hook && trace_hook->on_op) trace_hook->on_op(trace_hook->ctx, op, in, n_in, attrs, out, n_out);
    return EM_OK;
}

static void after_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                          void *state) {
    (void)state;
    if (!trace_hook) return;
    if (trace_hook->on_inplace) {
        trace_hook->on_inplace(trace_hook->ctx, op, in, n_in, attrs, target);
        return;
    }
    char what[64]; /* a hook that does not follow writes sees them as mutations */
    snprintf(what, sizeof what, "%s_", em_op_get(op)->kind == EM_KIND_CAST ? "copy" : em_op_name(op));
    em_note_event(EM_EVENT_MUTATION, what, target);
}

/* The tracer's place in dispatch's stack (ops.h), installed with the first
 * hook: until then no thread traces. */
static const em_interceptor interceptor = {
    .name = "trace",
    .after_op = after_op,
    .after_inplace = after_inplace,
};

const em_trace_hook *em_set_trace_hook(const em_trace_hook *hook) {
    static bool installed;
    if (hook && !__atomic_load_n(&installed, __ATOMIC_ACQUIRE)) {
        em_interceptor_install(EM_INTERCEPT_TRACE, &interceptor);
        __atomic_store_n(&installed, true, __ATOMIC_RELEASE);
    }
    const em_trace_hook *old = trace_hook;
    trace_hook = hook;
    return old;
}

const em_trace_hook *em_get_trace_hook(void) { return trace_hook; }

static void release_mark(em_tensor *t, uintptr_t state) {
    (void)state;
    if (trace_hook && trace_hook->on_free) trace_hook->on_free(trace_hook->ctx, t);
}

uint32_t em_trace_gen(const em_tensor *t) { return (uint32_t)((uint64_t)t->layer_state[EM_LAYER_TRACE] >> 32); }
uint32_t em_trace_value(const em_tensor *t) { return (uint32_t)t->layer_state[EM_LAYER_TRACE]; }

void em_trace_mark(em_tensor *t, uint32_t gen, uint32_t value) {
    _Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "a trace mark is 64 bits");
    static bool registered;
    if (!__atomic_load_n(&registered, __ATOMIC_ACQUIRE)) {
        em_tensor_layer_register(EM_LAYER_TRACE, release_mark);
        __atomic_store_n(&registered, true, __ATOMIC_RELEASE);
    }
    t->layer_state[EM_LAYER_TRACE] = (uintptr_t)((uint64_t)gen << 32 | value);
}

void em_note_event(em_trace_event ev, const char *what, const em_tensor *t) {
    if (trace_hook && trace_hook->on_event) trace_hook->on_event(trace_hook->ctx, ev, what, t);
}

