/*
 * program.c - running a compiled graph (program.h): the runtime functions
 * its code calls, kernel launches, the per-run arena, and the table of
 * addresses the code reads. No LLVM here: a shared object made ahead of
 * time links this file, as the JIT backend does.
 *
 * The arena: each program keeps one frame (an arena and a tensor per
 * planned buffer) that a run borrows; a run that finds it taken (another
 * thread is running the same graph) makes its own. A frame whose tensors
 * someone kept after a run is let go (the plan says that cannot happen;
 * this keeps memory safe if it did) and a new one made.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/alloc.h"
#include "ember/parallel.h"
#include "program.h"

const em_ir_node *em_llvm_gemm_of(const em_ir_node *node) {
    for (const em_ir_node *n = node->region ? node->region->first : NULL; n; n = n->next)
        if (n->op == EM_OP_MATMUL) return n;
    return NULL;
}

/* ---- what the generated code calls ---- */

static int32_t rt_op(const em_ir_node *n, em_tensor *const *in, em_tensor **out) {
    em_type types[64];
    if (n->n_out > 64) return em_error(EM_ERR_INTERNAL, "%s: too many results", em_op_name(n->op));
    for (int i = 0; i < n->n_out; i++) types[i] = n->out[i]->type;
    em_status st = em_op_run_planned(n->op, in, n->n_in, EM_IR_ATTRS(n), types, out, n->n_out);
    return st == EM_OK ? EM_OK : em_ir_node_error(n);
}

/* A write into a view of a graph input (as_strided_scatter, whose kernel
 * keeps what it is given as its result's memory when that is its input's)
 * done in the input's own memory, as the eager write was, when no other
 * input shares that memory this run (else into new memory). */
static int32_t rt_op_donating(const em_ir_node *n, em_tensor *const *in, em_tensor **out, const em_llvm_run *run,
                              int32_t donation) {
    if (run->allowed >> donation & 1) out[0] = in[0]; /* (borrowed, as planned memory is) */
    return rt_op(n, in, out);
}

static int32_t rt_region(const em_ir_node *n, em_tensor *const *in, em_tensor **out) {
    em_status st = em_interp_run_region(n, in, out);
    return st == EM_OK ? EM_OK : em_ir_node_error(n);
}

static int32_t rt_check(em_tensor *got, em_tensor *want, const em_ir_graph *g, int32_t r) {
    if (em_equal_bits(got, want)) return EM_OK;
    return em_error(EM_ERR_GUARD, "@%s: result %d differs from the value the trace saw", g->name, r);
}

static void rt_retain(em_tensor *t) { em_tensor_retain(t); }
static void rt_release(em_tensor *t) { em_tensor_release(t); }

static void rt_release_all(em_tensor **slots, int32_t n) {
    for (int32_t i = 0; i < n; i++) em_tensor_release(slots[i]);
}

static int32_t rt_effects(const em_effect *effects, int32_t n, em_tensor *const *in, em_tensor *const *values) {
    return em_effects_apply(effects, n, in, values);
}

#define FN(f) ((const void *)(uintptr_t)(f))
static const void *const callees[EM_N_CALLEES] = {/* ORDER CALLEE */
                                                  FN(rt_op),      FN(rt_region),      FN(rt_check),
                                                  FN(rt_retain),  FN(rt_release),     FN(rt_release_all),
                                                  FN(rt_effects), FN(em_llvm_launch), FN(rt_op_donating)};

/* ---- kernel launches ---- */

static bool same_layout(const em_tensor *t, const int64_t *want) {
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1 && t->strides[d] != want[d]) return false;
    return true;
}

typedef struct {
    em_llvm_kernel_fn fn;
    char **ptrs;
} launch;

static void run_range(void *arg, int64_t begin, int64_t end) {
    const launch *l = arg;
    l->fn(begin, end, l->ptrs);
}

int32_t em_llvm_launch(void *kernel, em_tensor *const *in, em_tensor **out, const em_llvm_run *run) {
    em_llvm_kernel *k = kernel;
    const em_ir_node *node = k->node;
    for (int i = 0; i < node->n_in; i++)
        if (!same_layout(in[i], k->in_strides[i])) {
            __atomic_fetch_add(&k->eager_runs, 1, __ATOMIC_RELAXED);
            em_status st = em_interp_run_region(node, in, out);
            return st == EM_OK ? EM_OK : em_ir_node_error(node);
        }
    char *ptrs[81]; /* the operands, then the size table */
    for (int i = 0; i < node->n_in; i++) ptrs[node->n_out + i] = em_tensor_data(in[i]);
    ptrs[node->n_out + node->n_in] = (char *)k->sizes;
    for (int i = 0; i < node->n_out; i++) {
        int j = k->shares[i];
        if (j >= 0 && (k->donation[i] < 0 || (run->allowed >> k->donation[i] & 1))) {
            out[i] = in[j]; /* the input is the result: a dying intermediate, or a donated graph input */
        } else if (!out[i]) {
            const em_type *t = &node->out[i]->type;
            /* (a donation not allowed this call: the kernel still works in place, on a copy) */
            out[i] = j >= 0 ? em_clone(in[j]) : em_tensor_empty(t->shape, t->ndim, t->dtype, t->device);
            if (!out[i]) {
                for (int m = 0; m < i; m++) em_tensor_release(out[m]);
                return em_ir_node_error(node);
            }
            ptrs[i] = em_tensor_data(out[i]);
            if (j >= 0) ptrs[node->n_out + j] = ptrs[i];
            continue;
        }
        em_tensor_retain(out[i]);
        ptrs[i] = em_tensor_data(out[i]);
    }
    launch l = {k->fn, ptrs};
    const em_ir_node *mm = em_llvm_gemm_of(node);
    if (!mm) {
        em_parallel_for(k->split.units, k->split.grain, run_range, &l);
        return EM_OK;
    }
    /* a GEMM epilogue: the kernel runs on each block of the product, which
     * BLAS writes into result 0 (its operands are region parameters) */
    em_tensor *operand[2];
    for (int i = 0; i < 2; i++)
        for (int p = 0; p < node->n_in; p++)
            if (node->region->params[p] == mm->in[i]) operand[i] = in[p];
    if (em_matmul_epilogue(operand[0], operand[1], EM_IR_ATTRS(mm)->alpha, out[0], run_range, &l) != EM_OK) {
        for (int i = 0; i < node->n_out; i++) {
            em_tensor_release(out[i]);
            out[i] = NULL;
        }
        return em_ir_node_error(node);
    }
    return EM_OK;
}

/* ---- frames ---- */

struct em_llvm_frame {
    em_storage *arena;
    em_tensor **tensors;
    int n;
};

static void frame_free(em_llvm_frame *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) em_tensor_release(f->tensors[i]);
    free(f->tensors);
    em_storage_release(f->arena);
    free(f);
}

/* A frame for plan p: its arena and one tensor per buffer. */
static em_llvm_frame *frame_new(const em_llvm_plan *p) {
    em_llvm_frame *f = calloc(1, sizeof *f);
    if (!f || !(f->tensors = calloc((size_t)p->n_buffers, sizeof *f->tensors)) ||
        !(f->arena = em_storage_new(em_cpu(), (size_t)(p->arena_bytes ? p->arena_bytes : 64)))) {
        frame_free(f);
        em_error(EM_ERR_NOMEM, "out of memory for a compiled run's buffers (%lld bytes)", (long long)p->arena_bytes);
        return NULL;
    }
    for (int i = 0; i < p->n_buffers; i++, f->n++) {
        const em_type *t = p->buffers[i].type;
        int64_t strides[EM_MAX_DIMS];
        em_ir_value_strides(p->buffers[i].def, strides);
        int64_t offset = p->buffers[i].offset / (int64_t)em_dtype_size(t->dtype);
        if (!(f->tensors[i] = em_tensor_from_storage(f->arena, t->dtype, offset, t->shape, strides, t->ndim))) {
            frame_free(f);
            return NULL;
        }
    }
    return f;
}

/* After a run: does the frame hold the only reference to each tensor? */
static bool frame_intact(const em_llvm_frame *f) {
    for (int i = 0; i < f->n; i++)
        if (__atomic_load_n(&f->tensors[i]->refcount, __ATOMIC_ACQUIRE) != 1) return false;
    return true;
}

/* ---- programs ---- */

em_status em_llvm_program_copy_spec(em_llvm_program *p, const em_run_spec *spec) {
    int nr = p->g->body->n_results;
    p->spec = spec ? *spec : (em_run_spec){nr, NULL, NULL, 0};
    if (spec && spec->expected) {
        if (!(p->expected = calloc((size_t)(nr ? nr : 1), sizeof *p->expected))) return EM_ERR_NOMEM;
        for (int r = 0; r < nr; r++)
            if ((p->expected[r] = spec->expected[r])) em_tensor_retain(p->expected[r]);
        p->spec.expected = p->expected;
    }
    if (spec && spec->n_effects) {
        if (!(p->effects = malloc((size_t)spec->n_effects * sizeof *p->effects))) return EM_ERR_NOMEM;
        memcpy(p->effects, spec->effects, (size_t)spec->n_effects * sizeof *p->effects);
        em_effects_mark_copies(p->effects, spec->n_effects, p->g->body, spec->n_outputs);
        p->spec.effects = p->effects;
    }
    return EM_OK;
}

/* The address ref stands for in p, or NULL when it names nothing there. */
static const void *resolve(const em_llvm_program *p, em_llvm_ref ref) {
    const em_ir_graph *g = p->g;
    switch ((em_llvm_ref_kind)ref.kind) {
    case EM_REF_CALLEE:
        return ref.index >= 0 && ref.index < EM_N_CALLEES ? callees[ref.index] : NULL;
    case EM_REF_GRAPH:
        return g;
    case EM_REF_NODE:
        for (const em_ir_node *n = g->body->first; n; n = n->next)
            if (n->id == ref.index) return n;
        return NULL;
    case EM_REF_KERNEL:
        return ref.index >= 0 && ref.index < p->n_kernels ? &p->kernels[ref.index] : NULL;
    case EM_REF_EXPECTED:
        return p->spec.expected && ref.index >= 0 && ref.index < g->body->n_results ? p->spec.expected[ref.index]
                                                                                     : NULL;
    case EM_REF_EFFECTS:
        return p->spec.effects;
    }
    return NULL;
}

em_status em_llvm_program_resolve(em_llvm_program *p) {
    free(p->refs);
    if (!(p->refs = malloc((size_t)(p->n_refs ? p->n_refs : 1) * sizeof *p->refs)))
        return em_error(EM_ERR_NOMEM, "out of memory loading @%s", p->g->name);
    for (int i = 0; i < p->n_refs; i++)
        if (!(p->refs[i] = resolve(p, p->ref_kinds[i])))
            return em_error(EM_ERR_VALUE, "@%s: entry %d of the code's table (kind %d, index %d) names nothing",
                            p->g->name, i, p->ref_kinds[i].kind, p->ref_kinds[i].index);
    return EM_OK;
}

uint64_t em_llvm_program_allowed(const em_llvm_program *p, em_tensor *const *in, int n_in) {
    /* A donation writes its input only when no other input shares that
     * memory (the same tensor passed twice, a view of it, a flat buffer). */
    uint64_t allowed = 0;
    for (int d = 0; d < p->n_donations; d++) {
        int i = p->donated_input[d];
        bool alone = true;
        for (int j = 0; j < n_in && alone; j++) alone = j == i || in[j]->storage != in[i]->storage;
        if (alone) allowed |= (uint64_t)1 << d;
    }
    return allowed;
}

em_status em_llvm_program_run(em_llvm_program *p, em_tensor *const *in, em_tensor **out) {
    em_llvm_run run = {em_llvm_program_allowed(p, in, p->g->body->n_params), NULL, p->refs};
    em_llvm_frame *f = NULL;
    if (p->plan.n_buffers) {
        f = __atomic_exchange_n(&p->frame, NULL, __ATOMIC_ACQ_REL);
        if (!f && !(f = frame_new(&p->plan))) return em_last_status();
        run.planned = f->tensors;
    }
    em_status st = (em_status)p->fn(in, out, &run);
    if (f) {
        em_llvm_frame *none = NULL;
        if (!frame_intact(f) ||
            !__atomic_compare_exchange_n(&p->frame, &none, f, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            frame_free(f);
    }
    return st;
}

void em_llvm_program_clear(em_llvm_program *p) {
    for (int i = 0; i < p->n_kernels; i++) {
        free(p->kernels[i].in_strides);
        free(p->kernels[i].sizes);
        free(p->kernels[i].shares);
        free(p->kernels[i].donation);
    }
    free(p->kernels);
    em_llvm_plan_free(&p->plan);
    for (int r = 0; p->expected && r < p->g->body->n_results; r++) em_tensor_release(p->expected[r]);
    free(p->expected);
    free(p->effects);
    free(p->ref_kinds);
    free(p->refs);
    frame_free(p->frame);
    memset(p, 0, sizeof *p);
}
