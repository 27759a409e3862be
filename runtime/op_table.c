/*
 * op_table.c - ops.def expanded into the op table, and em_op_run(), the
 * single entry point of eager execution.
 *
 * Each row's kind picks its inference and CPU kernel: elementwise kinds share
 * infer_elementwise/cpu_elementwise; other kinds have their own. The trace
 * hook sees every op that user code ran (nesting depth 0), after it ran.
 */
#include <string.h>

#include "kernels.h"

#define INFER_UNARY infer_elementwise
#define INFER_BINARY infer_elementwise
#define INFER_TERNARY infer_elementwise
#define INFER_CAST infer_cast
#define INFER_REDUCE infer_reduce
#define INFER_SCAN infer_scan
#define INFER_MATMUL infer_matmul
#define INFER_VIEW infer_view
#define INFER_COPY infer_same
#define INFER_FACTORY infer_factory
#define INFER_RANDOM infer_factory
#define INFER_FUSED infer_fused

#define CPU_UNARY cpu_elementwise
#define CPU_BINARY cpu_elementwise
#define CPU_TERNARY cpu_elementwise
#define CPU_CAST cpu_cast
#define CPU_REDUCE cpu_reduce
#define CPU_SCAN cpu_scan
#define CPU_MATMUL cpu_matmul
#define CPU_VIEW cpu_view
#define CPU_COPY cpu_contiguous
#define CPU_FACTORY_full cpu_full
#define CPU_FACTORY_arange cpu_arange
#define CPU_RANDOM cpu_random
#define CPU_FUSED cpu_fused

/* Factories differ per op; everything else per kind. */
#define CPU_FOR(kind, name) CPU_FOR_##kind(name)
#define CPU_FOR_UNARY(n) CPU_UNARY
#define CPU_FOR_BINARY(n) CPU_BINARY
#define CPU_FOR_TERNARY(n) CPU_TERNARY
#define CPU_FOR_CAST(n) CPU_CAST
#define CPU_FOR_REDUCE(n) CPU_REDUCE
#define CPU_FOR_SCAN(n) CPU_SCAN
#define CPU_FOR_MATMUL(n) CPU_MATMUL
#define CPU_FOR_VIEW(n) CPU_VIEW
#define CPU_FOR_COPY(n) CPU_COPY
#define CPU_FOR_FACTORY(n) CPU_FACTORY_##n
#define CPU_FOR_RANDOM(n) CPU_RANDOM
#define CPU_FOR_FUSED(n) CPU_FUSED

#define DTYPE_BIT(unused, S, T, sfx) | (1u << EM_DTYPE_##S)
static const em_op_info op_table[EM_OP_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at)                                                 \
    [EM_OP_##E] = {#n,                                                                             \
                   EM_KIND_##kind,                                                                 \
                   ni,                                                                             \
                   no,                                                                             \
                   EM_PROMOTE_##pr,                                                                \
                   fl,                                                                             \
                   at,                                                                             \
                   0u EM_FOR_DTYPES_##dts(DTYPE_BIT, _),                                           \
                   INFER_##kind,                                                                   \
                   CPU_FOR(kind, n)},
#include "ember/ops.def"
#undef EM_OP
};

const em_op_info *em_op_get(em_op op) { return &op_table[op]; }

bool em_op_from_name(const char *name, size_t len, em_op *out) {
    for (int i = 0; i < EM_OP_COUNT; i++)
        if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, name, len) == 0) {
            *out = (em_op)i;
            return true;
        }
    return false;
}

const char *em_attr_name(int bit) {
    static const char *const names[EM_A_COUNT] = {
#define X(E, n) #n,
        EM_ATTR_LIST(X)
#undef X
    };
    return bit >= 0 && bit < EM_A_COUNT ? names[bit] : "?";
}

/* ---- trace hook ---- */

static _Thread_local const em_trace_hook *trace_hook;
static _Thread_local int op_depth;

const em_trace_hook *em_set_trace_hook(const em_trace_hook *hook) {
    const em_trace_hook *old = trace_hook;
    trace_hook = hook;
    return old;
}

const em_trace_hook *em_get_trace_hook(void) { return trace_hook; }

void em_note_host_sync(const char *what, const em_tensor *t) {
    if (trace_hook && trace_hook->on_host_sync) trace_hook->on_host_sync(trace_hook->ctx, what, t);
}

/* ---- dispatch ---- */

#define MAX_IO 8

em_status em_op_infer(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                      int n_out) {
    if ((unsigned)op >= EM_OP_COUNT) return em_error(EM_ERR_INTERNAL, "unknown op %d", (int)op);
    const em_op_info *info = &op_table[op];
    if ((info->n_in >= 0 && n_in != info->n_in) || (info->n_out >= 0 && n_out != info->n_out))
        return em_error(EM_ERR_VALUE, "%s: expected %d inputs and %d results, got %d and %d",
                        info->name, info->n_in, info->n_out, n_in, n_out);
    return info->infer(op, in, n_in, attrs, out, n_out);
}

em_status em_op_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                    em_tensor **out, int n_out) {
    if (n_in > MAX_IO || n_out > MAX_IO)
        return em_error(EM_ERR_INTERNAL, "em_op_run: too many operands");
    em_type in_types[MAX_IO], out_types[MAX_IO];
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return em_error(EM_ERR_VALUE, "%s: input %d is missing", em_op_name(op), i);
        in_types[i] = em_tensor_type(in[i]);
    }
    em_status st = em_op_infer(op, in_types, n_in, attrs, out_types, n_out);
    if (st != EM_OK) return st;

    const em_op_info *info = &op_table[op];
    em_tensor *res[MAX_IO] = {NULL};
    bool self_alloc = (info->flags & EM_F_VIEW) || info->kind == EM_KIND_COPY;
    if (!self_alloc) {
        for (int i = 0; i < n_out; i++) {
            res[i] = em_tensor_empty(out_types[i].shape, out_types[i].ndim, out_types[i].dtype,
                                     out_types[i].device);
            if (!res[i]) goto fail;
        }
    }
    op_depth++;
    st = info->cpu(op, in, attrs, res);
    op_depth--;
    if (st != EM_OK) goto fail;

    if (op_depth == 0 && trace_hook && trace_hook->on_op)
        trace_hook->on_op(trace_hook->ctx, op, in, n_in, attrs, res, n_out);
    memcpy(out, res, (size_t)n_out * sizeof *out);
    return EM_OK;
fail:
    st = em_last_status();
    for (int i = 0; i < n_out; i++) em_tensor_release(res[i]);
    return st != EM_OK ? st : EM_ERR_INTERNAL;
}
