/*
 * backend.c - the LLVM backend: every fused node of a graph becomes a
 * JIT-compiled kernel; everything else runs its eager kernel.
 *
 * The executable is the IR interpreter with the compiled kernels installed
 * for the fused nodes (one executor for every backend). Kernels are
 * specialised on the strides their inputs will have, found by propagating
 * the example inputs' strides through the graph: compute ops produce
 * contiguous results, views follow em_view_geometry (the rule the eager
 * views use). Before each launch the actual strides are checked against the
 * compiled ones; a mismatch runs the region on the eager kernels instead,
 * so a wrong layout guess costs speed, never correctness.
 *
 * Fused nodes over fewer than EMBER_JIT_MIN_ELEMENTS elements (default
 * 2048: a bias update, a loss, a 0-d step counter) are not compiled: LLVM
 * takes ~9 ms per kernel here, while running such a region op by op on the
 * eager kernels costs microseconds per call. Compile time then follows the
 * kernels that matter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

#include "ember/backend.h"
#include "ember/parallel.h"
#include "ember/strbuf.h"
#include "llvm_internal.h"

typedef struct {
    const em_ir_node *node;
    em_llvm_kernel_fn fn;
    char name[64];
    int64_t (*in_strides)[EM_MAX_DIMS]; /* compiled-for strides, per input */
    int64_t eager_runs;                 /* launches that fell back (strides differed) */
} kernel;

typedef struct {
    const em_ir_graph *g;
    em_interp *interp;
    LLVMOrcResourceTrackerRef rt;
    int n_kernels;
    kernel *kernels;
    char note[256];
} executable;

static int64_t module_counter;

static int64_t jit_min_elements(void) {
    const char *v = getenv("EMBER_JIT_MIN_ELEMENTS");
    return v && *v ? strtoll(v, NULL, 10) : 2048;
}

/* Is this fused node worth a compiled kernel? */
static bool worth_compiling(const em_ir_node *n, int64_t min_elements) {
    const em_type *t = &n->out[0]->type;
    return n->region && em_shape_numel(t->shape, t->ndim) >= min_elements;
}

/* Strides of each value, from the examples through the graph. */
static void propagate_layouts(const em_ir_graph *g, em_tensor *const *examples, int n_examples,
                              int64_t (*strides)[EM_MAX_DIMS]) {
    const em_ir_block *b = g->body;
    for (int i = 0; i < b->n_params && i < n_examples; i++)
        memcpy(strides[b->params[i]->id], examples[i]->strides, sizeof strides[0]);
    for (const em_ir_node *n = b->first; n; n = n->next) {
        const em_op_info *info = em_op_get(n->op);
        for (int k = 0; k < n->n_out; k++) {
            const em_type *t = &n->out[k]->type;
            em_contiguous_strides(t->shape, t->ndim, strides[n->out[k]->id]);
        }
        if (n->n_in == 0) continue;
        const em_type *in = &n->in[0]->type;
        const int64_t *is = strides[n->in[0]->id];
        if (info->flags & EM_F_VIEW) {
            int64_t shape[EM_MAX_DIMS], st[EM_MAX_DIMS], off;
            int nd;
            if (em_view_geometry(n->op, in->shape, is, in->ndim, &n->attrs, shape, st, &nd, &off))
                memcpy(strides[n->out[0]->id], st, sizeof st);
        } else if (info->kind == EM_KIND_COPY && em_strides_are_contiguous(in->shape, is, in->ndim)) {
            memcpy(strides[n->out[0]->id], is, sizeof strides[0]); /* contiguous() returns its input */
        }
    }
}

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

static em_status run_kernel(void *ctx, const em_ir_node *node, em_tensor *const *in, em_tensor **out) {
    kernel *k = ctx;
    for (int i = 0; i < node->n_in; i++)
        if (!same_layout(in[i], k->in_strides[i])) {
            __atomic_fetch_add(&k->eager_runs, 1, __ATOMIC_RELAXED);
            return em_interp_run_region(node, in, out);
        }
    char *ptrs[80];
    for (int i = 0; i < node->n_out; i++) {
        const em_type *t = &node->out[i]->type;
        out[i] = em_tensor_empty(t->shape, t->ndim, t->dtype, t->device);
        if (!out[i]) {
            for (int j = 0; j < i; j++) em_tensor_release(out[j]);
            return em_last_status();
        }
        ptrs[i] = em_tensor_data(out[i]);
    }
    for (int i = 0; i < node->n_in; i++) ptrs[node->n_out + i] = em_tensor_data(in[i]);
    launch l = {k->fn, ptrs};
    em_parallel_for(out[0]->numel, 16384, run_range, &l);
    return EM_OK;
}

static void exec_free(void *state) {
    executable *x = state;
    if (!x) return;
    em_interp_free(x->interp);
    em_llvm_remove(x->rt);
    for (int i = 0; i < x->n_kernels; i++) free(x->kernels[i].in_strides);
    free(x->kernels);
    free(x);
}

static char *print_kernels(executable *x, LLVMModuleRef mod) {
    em_strbuf s;
    em_strbuf_init(&s);
    for (int i = 0; i < x->n_kernels; i++) {
        char *t = LLVMPrintValueToString(LLVMGetNamedFunction(mod, x->kernels[i].name));
        em_strbuf_puts(&s, t);
        em_strbuf_puts(&s, "\n");
        LLVMDisposeMessage(t);
    }
    return em_strbuf_take(&s);
}

static em_status llvm_compile(const em_ir_graph *g, const em_backend_opts *opts, void **state) {
    em_status st = em_llvm_init();
    if (st != EM_OK) return st;
    executable *x = calloc(1, sizeof *x);
    int64_t (*strides)[EM_MAX_DIMS] = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *strides);
    int n_fused = 0;
    int64_t min_elements = jit_min_elements();
    for (const em_ir_node *n = g->body->first; n; n = n->next) n_fused += worth_compiling(n, min_elements);
    if (x) x->kernels = calloc((size_t)(n_fused ? n_fused : 1), sizeof *x->kernels);
    if (!x || !strides || !x->kernels) {
        free(strides);
        exec_free(x);
        return em_error(EM_ERR_NOMEM, "out of memory compiling");
    }
    x->g = g;
    propagate_layouts(g, opts->examples, opts->n_examples, strides);

    int64_t m = __atomic_fetch_add(&module_counter, 1, __ATOMIC_RELAXED);
    char mname[64];
    snprintf(mname, sizeof mname, "ember_%s_%lld", g->name, (long long)m);
    LLVMOrcThreadSafeContextRef tsctx;
    LLVMModuleRef mod;
    if ((st = em_llvm_new_module(mname, &tsctx, &mod)) != EM_OK) {
        free(strides);
        exec_free(x);
        return st;
    }
    for (const em_ir_node *n = g->body->first; n && st == EM_OK; n = n->next) {
        if (!worth_compiling(n, min_elements)) continue; /* (the interpreter runs it op by op) */
        kernel *k = &x->kernels[x->n_kernels];
        k->node = n;
        snprintf(k->name, sizeof k->name, "em_g%lld_k%d", (long long)m, n->id);
        k->in_strides = calloc((size_t)(n->n_in ? n->n_in : 1), sizeof *k->in_strides);
        if (!k->in_strides) {
            st = em_error(EM_ERR_NOMEM, "out of memory compiling");
            break;
        }
        for (int i = 0; i < n->n_in; i++) memcpy(k->in_strides[i], strides[n->in[i]->id], sizeof strides[0]);
        x->n_kernels++;
        st = em_llvm_emit_kernel(mod, k->name, n, k->in_strides);
    }
    free(strides);
    char *msg = NULL;
    if (st == EM_OK && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        st = em_error(EM_ERR_INTERNAL, "llvm: generated code does not verify: %s", msg);
    }
    LLVMDisposeMessage(msg);
    if (st == EM_OK && opts->dump) {
        char *text = print_kernels(x, mod);
        if (text) opts->dump(opts->dump_ctx, "kernels.ll", text);
        free(text);
    }
    if (st == EM_OK) st = em_llvm_optimize(mod);
    if (st == EM_OK && opts->dump) {
        char *text = LLVMPrintModuleToString(mod);
        opts->dump(opts->dump_ctx, "kernels.opt.ll", text);
        LLVMDisposeMessage(text);
    }
    if (st != EM_OK) {
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsctx);
        exec_free(x);
        return st;
    }
    if ((st = em_llvm_add_module(tsctx, mod, &x->rt)) != EM_OK) {
        exec_free(x);
        return st;
    }
    x->interp = em_interp_new(g);
    if (!x->interp) {
        exec_free(x);
        return EM_ERR_NOMEM;
    }
    for (int i = 0; i < x->n_kernels; i++) {
        void *addr;
        if ((st = em_llvm_lookup(x->kernels[i].name, &addr)) != EM_OK) {
            exec_free(x);
            return st;
        }
        x->kernels[i].fn = (em_llvm_kernel_fn)addr;
        em_interp_set_kernel(x->interp, x->kernels[i].node, run_kernel, &x->kernels[i]);
    }
    *state = x;
    return EM_OK;
}

static em_status llvm_run(void *state, em_tensor *const *in, int n_in, em_tensor **out, int n_out) {
    return em_interp_run(((executable *)state)->interp, in, n_in, out, n_out);
}

static char *llvm_describe(void *state) {
    executable *x = state;
    em_strbuf s;
    em_strbuf_init(&s);
    int small = 0;
    int64_t min_elements = jit_min_elements();
    for (const em_ir_node *n = x->g->body->first; n; n = n->next)
        small += n->region && !worth_compiling(n, min_elements);
    em_strbuf_printf(&s, "llvm backend: %d fused kernel%s compiled for %s; other nodes run their "
                         "eager kernels\n",
                     x->n_kernels, x->n_kernels == 1 ? "" : "s", em_llvm_host_cpu());
    if (small)
        em_strbuf_printf(&s, "  (%d fused node%s under %lld elements run op by op: not worth "
                             "compiling; EMBER_JIT_MIN_ELEMENTS)\n",
                         small, small == 1 ? "" : "s", (long long)min_elements);
    for (int i = 0; i < x->n_kernels; i++) {
        const kernel *k = &x->kernels[i];
        int ops = 0;
        for (const em_ir_node *n = k->node->region->first; n; n = n->next) ops++;
        char t[256];
        em_type_str(&k->node->out[0]->type, t, sizeof t);
        em_strbuf_printf(&s, "  %s: %d ops over %s", k->name, ops, t);
        if (k->node->loc.file)
            em_strbuf_printf(&s, " from %s:%d-%d", k->node->loc.file, k->node->loc.line,
                             k->node->loc.line_end);
        if (k->eager_runs) em_strbuf_printf(&s, " (%lld eager fallbacks)", (long long)k->eager_runs);
        em_strbuf_puts(&s, "\n");
    }
    return em_strbuf_take(&s);
}

static const em_backend llvm_backend = {"llvm", llvm_compile, llvm_run, llvm_describe, exec_free};

const em_backend *em_llvm_backend(void) { return &llvm_backend; }
