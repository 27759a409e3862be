/*
 * backend.c - the LLVM backend: a graph becomes one compiled function
 * (graph.c) that runs its nodes in order, with every fused node worth it
 * compiled into a kernel (kernel.c) and the others run op by op or by their
 * eager kernels, intermediate values in an arena laid out by a memory plan
 * (exec/plan.c), value guards and write-backs included. A compiled call is one C
 * call. Runs that are profiled (EMBER_PROFILE) go through the interpreter
 * instead, with the same kernels installed, which times every node.
 *
 * Kernels are specialised on the strides their inputs will have, found by
 * propagating the example inputs' strides through the graph: compute ops
 * produce contiguous results (or lay them out as their layout attribute
 * says), views follow em_view_geometry (the rule the eager views use). Before each launch the actual strides are checked
 * against the compiled ones; a mismatch runs the region on the eager
 * kernels instead, so a wrong layout guess costs speed, never correctness.
 *
 * In place: an elementwise kernel's single result is computed in the memory
 * of an input of its type, laid out like it, that nothing reads after the
 * kernel (used once, by the kernel, and made by a node that allocates its
 * result: the run owns that memory alone); the memory plan gives the
 * result the input's buffer. One buffer of the pair less at the peak, and
 * the kernel writes into lines it has just read.
 *
 * Donation: a kernel computing a write-back (an optimizer's new parameter,
 * a new momentum) writes it into the input's own memory instead of a new
 * buffer the caller then swaps in: three memory streams instead of four
 * and no buffer churn, as PyTorch's in-place optimizers. Only where no one
 * can tell (see donatable): the graph reads the input nowhere after the
 * kernel, directly or through a view; every value guard is compared before
 * it; and, checked per call, no other input shares the input's memory.
 *
 * Fused nodes over fewer than EMBER_JIT_MIN_ELEMENTS elements (default
 * 2048: a bias update, a loss, a 0-d step counter) are not compiled: LLVM
 * takes ~9 ms per kernel here, while the interpreter runs such a region on
 * the eager kernels' loops in well under a microsecond more (one pass over
 * blocks when it is elementwise: em_interp_run_region). Compile time then
 * follows the kernels that matter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

#include "ember/alloc.h"
#include "ember/backend.h"
#include "ember/parallel.h"
#include "ember/strbuf.h"
#include "llvm_internal.h"

/* A graph compiled here: the program that runs it (program.h) and what
 * explain and profiling need besides. */
typedef struct {
    em_llvm_program prog;
    em_interp *interp;    /* for profiled runs */
    em_llvm_split *split; /* per node id: a kernel's split; grain 0: not compiled */
    char *refused;        /* why fused nodes worth a kernel run op by op (describe) */
    em_llvm_code *code;   /* the machine code (code.c) */
    em_llvm_code_source source;
    char key[EM_LLVM_KEY_LEN + 1];
    int64_t min_elements; /* fused nodes smaller run on the interpreter */
    int *op_donation;     /* per node id: the donation an eager node writes its input under, or -1 */
    bool dynamic_sizes;   /* compiled for sizes read at run time */
} executable;

static int64_t jit_min_elements(void) {
    const char *v = getenv("EMBER_JIT_MIN_ELEMENTS");
    return v && *v ? strtoll(v, NULL, 10) : 2048;
}

/* Is this fused node big enough to be worth a compiled kernel? */
static bool worth_compiling(const em_ir_node *n, int64_t min_elements) {
    int64_t most = 0; /* (a row kernel's result may be small, its rows not) */
    for (int i = 0; i < n->n_in + n->n_out; i++) {
        const em_type *t = i < n->n_in ? &n->in[i]->type : &n->out[i - n->n_in]->type;
        int64_t numel = em_shape_numel(t->shape, t->ndim);
        most = numel > most ? numel : most;
    }
    return n->region && most >= min_elements;
}

/* Strides of each value, from the examples through the graph. */
static void propagate_layouts(const em_ir_graph *g, em_tensor *const *examples, int n_examples,
                              int64_t (*strides)[EM_MAX_DIMS]) {
    const em_ir_block *b = g->body;
    for (int i = 0; i < b->n_params && i < n_examples; i++)
        memcpy(strides[b->params[i]->id], examples[i]->strides, sizeof strides[0]);
    for (const em_ir_node *n = b->first; n; n = n->next) {
        const em_op_info *info = em_op_get(n->op);
        for (int k = 0; k < n->n_out; k++) em_ir_value_strides(n->out[k], strides[n->out[k]->id]);
        if (n->n_in == 0) continue;
        const em_type *in = &n->in[0]->type;
        const int64_t *is = strides[n->in[0]->id];
        if (info->flags & EM_F_VIEW) {
            int64_t shape[EM_MAX_DIMS], st[EM_MAX_DIMS], off;
            int nd;
            if (em_view_geometry(n->op, in->shape, is, in->ndim, EM_IR_ATTRS(n), shape, st, &nd, &off))
                memcpy(strides[n->out[0]->id], st, sizeof st);
        } else if (info->kind == EM_KIND_COPY && em_strides_are_contiguous(in->shape, is, in->ndim)) {
            memcpy(strides[n->out[0]->id], is, sizeof strides[0]); /* contiguous() returns its input */
        }
    }
}

/* The same as the interpreter's kernel for a node (profiled runs). */
static em_status interp_kernel(void *ctx, void *run_ctx, const em_ir_node *node, em_tensor *const *in,
                               em_tensor **out) {
    for (int i = 0; i < node->n_out; i++) out[i] = NULL;
    return em_llvm_launch(ctx, in, out, run_ctx);
}

/* Can the outputs of body node m share memory with its inputs? (Views,
 * copies and casts that may return their input, and fused nodes that run
 * op by op, which may contain those.) */
static bool may_alias_inputs(const em_ir_node *m, const em_llvm_split *split) {
    return m->region ? split[m->id].grain == 0 : em_ir_may_alias_inputs(m);
}

/* Do strides lay a value of type t out contiguously (size-1 dims aside)? */
static bool dense(const em_type *t, const int64_t *strides) {
    int64_t contig[EM_MAX_DIMS];
    em_contiguous_strides(t->shape, t->ndim, contig);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1 && strides[d] != contig[d]) return false;
    return true;
}

/* Is graph input p's memory (p, and the values that view, copy or cast it,
 * marked in aliases) read by no node after n (at position plan->pos), by n
 * only through its operand `via` (-1: only p itself, not a view of it),
 * and shared by no graph result? What a node may need to write into p's
 * memory at n. */
static bool read_before(const em_ir_graph *g, const em_llvm_plan *plan, const em_ir_node *n, const em_ir_value *p,
                        int via, const em_llvm_split *split, bool *aliases) {
    const em_ir_block *b = g->body;
    int pn = plan->pos[n->out[0]->id];
    bool read_at_n = false;
    memset(aliases, 0, (size_t)g->n_values * sizeof *aliases);
    aliases[p->id] = true;
    for (const em_ir_node *m = b->first; m; m = m->next) {
        int at = plan->pos[m->out[0]->id];
        bool reads = false;
        for (int i = 0; i < m->n_in; i++) {
            if (!aliases[m->in[i]->id]) continue;
            reads = true;
            if (at > pn || (m == n && (via < 0 ? m->in[i] != p : i != via))) return false;
            read_at_n |= m == n;
        }
        if (reads && m != n && may_alias_inputs(m, split))
            for (int i = 0; i < m->n_out; i++) aliases[m->out[i]->id] = true;
    }
    for (int i = 0; i < b->n_results; i++)
        if (aliases[b->results[i]->id]) return false;
    return read_at_n;
}

/* Output `o` of kernel node n (at position pn in the run) may be computed
 * in the memory of graph input `param` when: it is that input's write-back
 * and no other result; n reads the input itself, laid out like the output
 * (contiguous, same type); nothing at or after n reads the input through a
 * view, and nothing after n reads it at all; and every value guard has been
 * compared before n runs. Returns n's input index of the parameter, or -1. */
static int donatable(const em_ir_graph *g, const em_llvm_plan *plan, const em_ir_node *n, int o,
                     const int *writes_into, int64_t (*strides)[EM_MAX_DIMS], const em_llvm_split *split,
                     bool *aliases, int *param) {
    const em_ir_block *b = g->body;
    const em_ir_value *v = n->out[o];
    int r = -1;
    for (int i = 0; i < b->n_results; i++)
        if (b->results[i] == v) {
            if (r >= 0) return -1; /* also returned, or written elsewhere too */
            r = i;
        }
    if (r < 0 || writes_into[r] < 0 || writes_into[r] >= b->n_params) return -1;
    const em_ir_value *p = b->params[writes_into[r]];
    int pn = plan->pos[v->id];
    if (plan->checked_by >= pn || !em_type_eq(&p->type, &v->type) ||
        !em_shape_eq(v->type.shape, v->type.ndim, n->out[0]->type.shape, n->out[0]->type.ndim))
        return -1;
    if (!dense(&p->type, strides[p->id]) || !read_before(g, plan, n, p, -1, split, aliases)) return -1;
    int j = 0;
    while (n->in[j] != p) j++; /* (read_before found n reading p itself) */
    *param = writes_into[r];
    return j;
}

/* The input of kernel node n (one result, elementwise) whose memory may
 * hold its result, as the header says, or -1. uses: per value; to_result:
 * per value, may a graph result share its memory (then it must have its
 * own, not the run's arena). */
static int dying_input(const em_ir_node *n, const int *uses, const bool *to_result, int64_t (*strides)[EM_MAX_DIMS],
                       const em_llvm_split *split) {
    if (n->n_out != 1 || to_result[n->out[0]->id]) return -1; /* (the interpreter's fallback writes results one by one) */
    const em_type *t = &n->out[0]->type;
    for (int j = 0; j < n->n_in; j++) {
        const em_ir_value *u = n->in[j];
        if (u->def && uses[u->id] == 1 && em_type_eq(&u->type, t) && !may_alias_inputs(u->def, split) &&
            !em_ir_is_scalar_const(u->def) && dense(t, strides[u->id]))
            return j;
    }
    return -1;
}

/* May as_strided_scatter node n (at position pn) write into the memory of
 * the graph input `param` its input 0 is (or reshapes)? When its result,
 * or a reshape of it, is that input's write-back and no other result; the
 * input is dense; its values are not the values written (input 1), and
 * nothing after n reads them, nor any result shares them; and every value
 * guard has been compared before n runs. */
static bool donatable_scatter(const em_ir_graph *g, const em_llvm_plan *plan, const em_ir_node *n,
                              const int *writes_into, int64_t (*strides)[EM_MAX_DIMS], const em_llvm_split *split,
                              bool *aliases, int *param) {
    const em_ir_block *b = g->body;
    const em_ir_value *v = n->out[0], *u = n->in[0];
    int r = -1;
    for (int i = 0; i < b->n_results; i++) {
        const em_ir_value *res = b->results[i];
        if (res == v || (res->def && res->def->op == EM_OP_RESHAPE && res->def->in[0] == v)) {
            if (r >= 0) return false; /* also returned, or written elsewhere too */
            r = i;
        }
    }
    if (r < 0 || writes_into[r] < 0 || writes_into[r] >= b->n_params) return false;
    const em_ir_value *p = b->params[writes_into[r]];
    if (u != p && !(u->def && u->def->op == EM_OP_RESHAPE && u->def->in[0] == p)) return false;
    if (plan->checked_by >= plan->pos[v->id] || !dense(&p->type, strides[p->id]) ||
        !dense(&u->type, strides[u->id]) || !read_before(g, plan, n, p, 0, split, aliases))
        return false; /* (not read after it, nor as the values written) */
    *param = writes_into[r];
    return true;
}

/* Per body result, the graph input a write-back copies it into, or -1. */
static int *writes_of(const em_ir_graph *g, const em_run_spec *spec) {
    int n = g->body->n_results;
    int *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    if (!w) return NULL;
    for (int r = 0; r < n; r++) w[r] = -1;
    for (int j = 0; spec && j < spec->n_effects; j++)
        if (spec->effects[j].kind == EM_EFFECT_WRITE) w[spec->effects[j].result] = spec->effects[j].input;
    return w;
}

/* ---- compiling ---- */

static void exec_free(void *state) {
    executable *x = state;
    if (!x) return;
    em_interp_free(x->interp);
    em_llvm_code_release(x->code);
    free(x->split);
    free(x->refused);
    free(x->op_donation);
    em_llvm_program_clear(&x->prog);
    free(x);
}

/* The kernels and the graph function as generated (the dump's kernels.ll). */
static char *print_kernels(executable *x, LLVMModuleRef mod, const char *graph_fn) {
    em_strbuf s;
    em_strbuf_init(&s);
    for (int i = 0; i <= x->prog.n_kernels; i++) {
        char name[128];
        if (i < x->prog.n_kernels)
            em_llvm_code_name(x->key, x->prog.kernels[i].name, name, sizeof name);
        else
            snprintf(name, sizeof name, "%s", graph_fn);
        char *t = LLVMPrintValueToString(LLVMGetNamedFunction(mod, name));
        em_strbuf_puts(&s, t);
        em_strbuf_puts(&s, "\n");
        LLVMDisposeMessage(t);
    }
    return em_strbuf_take(&s);
}

/* Emits a kernel for every fused node worth one, deciding its donations;
 * kernel_of[node id] is the index of each (-1 elsewhere). */
static em_status emit_kernels(executable *x, LLVMModuleRef mod, const em_backend_opts *opts,
                              int64_t (*strides)[EM_MAX_DIMS], int *kernel_of) {
    const em_ir_graph *g = x->prog.g;
    bool *aliases = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *aliases);
    bool *donated = calloc((size_t)(g->body->n_params ? g->body->n_params : 1), sizeof *donated);
    int *writes_into = writes_of(g, opts->spec), *uses = malloc((size_t)(g->n_values + 1) * sizeof *uses);
    bool *from_input = malloc((size_t)(g->n_values + 1)), *to_result = malloc((size_t)(g->n_values + 1));
    x->prog.plan.in_place = em_malloc((size_t)(g->n_values + 1) * sizeof *x->prog.plan.in_place);
    em_status st = aliases && donated && writes_into && uses && from_input && to_result && x->prog.plan.in_place
                       ? EM_OK
                       : EM_ERR_NOMEM;
    if (st == EM_OK) {
        em_ir_count_uses(g, uses);
        em_ir_shared_memory(g, from_input, to_result);
        for (int v = 0; v < g->n_values; v++) x->prog.plan.in_place[v] = -1;
    }
    for (const em_ir_node *n = g->body->first; n && st == EM_OK; n = n->next) {
        if (x->split[n->id].grain == 0) continue; /* (run op by op) */
        em_llvm_kernel *k = &x->prog.kernels[x->prog.n_kernels];
        kernel_of[n->id] = x->prog.n_kernels;
        k->node = n;
        snprintf(k->name, sizeof k->name, EM_LLVM_PLACEHOLDER "k%d", n->id);
        k->in_strides = calloc((size_t)(n->n_in ? n->n_in : 1), sizeof *k->in_strides);
        k->shares = malloc((size_t)n->n_out * sizeof *k->shares);
        k->donation = malloc((size_t)n->n_out * sizeof *k->donation);
        x->prog.n_kernels++;
        if (!k->in_strides || !k->shares || !k->donation) {
            st = EM_ERR_NOMEM;
            break;
        }
        for (int i = 0; i < n->n_in; i++) memcpy(k->in_strides[i], strides[n->in[i]->id], sizeof strides[0]);
        k->split = x->split[n->id];
        bool in_place = !em_llvm_is_row_kernel(n) && !em_llvm_gemm_of(n); /* (those two cannot) */
        for (int o = 0; o < n->n_out; o++) {
            int param = -1;
            k->shares[o] = k->donation[o] = -1;
            if (x->prog.n_donations == EM_LLVM_MAX_DONATIONS || !in_place) continue;
            int j = donatable(g, &x->prog.plan, n, o, writes_into, strides, x->split, aliases, &param);
            if (j < 0 || donated[param]) continue;
            donated[param] = true;
            k->shares[o] = j;
            k->donation[o] = x->prog.n_donations;
            x->prog.donated_input[x->prog.n_donations++] = param;
        }
        int j = in_place && k->shares[0] < 0 ? dying_input(n, uses, to_result, strides, x->split) : -1;
        if (j >= 0) { /* (donation -1: an intermediate's memory, not a graph input's) */
            k->shares[0] = j;
            x->prog.plan.in_place[n->out[0]->id] = n->in[j]->id;
        }
        em_llvm_sizes sizes = {0};
        st = em_llvm_emit_kernel(mod, k->name, n, k->in_strides, k->shares, opts->dynamic_sizes ? &sizes : NULL);
        if (st == EM_OK && sizes.nomem) st = EM_ERR_NOMEM;
        k->sizes = sizes.v;
        k->n_sizes = sizes.n;
    }
    /* A traced write into a view (as_strided_scatter, an eager kernel)
     * updates its input's memory in place, as the eager write did, where
     * that input dies there and lives in the arena (a loop filling a buffer
     * row by row then costs a row per step, not the buffer), or is a graph
     * input the scatter's result is the write-back of (a donation, as
     * kernels make: `logits[:, -1] = v` writes one column, not a copy of
     * the input and a copy back). */
    if (st == EM_OK && !(x->op_donation = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *x->op_donation)))
        st = EM_ERR_NOMEM;
    for (int i = 0; st == EM_OK && i < g->n_nodes; i++) x->op_donation[i] = -1;
    for (const em_ir_node *n = g->body->first; n && st == EM_OK; n = n->next) {
        if (n->op != EM_OP_AS_STRIDED_SCATTER) continue;
        const em_ir_value *u = n->in[0];
        int param = -1;
        if (!to_result[n->out[0]->id] && u->def && uses[u->id] == 1 && !may_alias_inputs(u->def, x->split) &&
            !em_ir_is_scalar_const(u->def) && dense(&u->type, strides[u->id]))
            x->prog.plan.in_place[n->out[0]->id] = u->id;
        else if (x->prog.n_donations < EM_LLVM_MAX_DONATIONS &&
                 donatable_scatter(g, &x->prog.plan, n, writes_into, strides, x->split, aliases, &param) &&
                 !donated[param]) {
            donated[param] = true;
            x->op_donation[n->id] = x->prog.n_donations;
            x->prog.donated_input[x->prog.n_donations++] = param;
        }
    }
    free(aliases);
    free(donated);
    free(writes_into);
    free(uses);
    free(from_input);
    free(to_result);
    return st == EM_ERR_NOMEM ? em_error(st, "out of memory compiling @%s", g->name) : st;
}

/* Plans the arena: per node, may its results share its inputs' memory? */
static em_status plan_memory(executable *x, const int *kernel_of) {
    const em_ir_graph *g = x->prog.g;
    bool *aliases_inputs = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *aliases_inputs);
    if (!aliases_inputs) return em_error(EM_ERR_NOMEM, "out of memory planning @%s", g->name);
    for (const em_ir_node *n = g->body->first; n; n = n->next) {
        const em_llvm_kernel *k = kernel_of[n->id] >= 0 ? &x->prog.kernels[kernel_of[n->id]] : NULL;
        bool donates = false;
        for (int o = 0; k && o < n->n_out; o++) donates |= k->shares[o] >= 0 && k->donation[o] >= 0;
        aliases_inputs[n->id] = k ? donates : may_alias_inputs(n, x->split); /* (in place: plan.in_place) */
    }
    em_status st = em_llvm_plan_buffers(&x->prog.plan, aliases_inputs);
    free(aliases_inputs);
    return st;
}

/* Verifies and dumps mod, gets its machine code (code.c: this process's
 * copy, the disk cache's, or compiled here) and finds the functions in it.
 * A dumped compile is always compiled here, so its dumps are whole.
 * Consumes mod and tsctx. */
static em_status finish(executable *x, LLVMOrcThreadSafeContextRef tsctx, LLVMModuleRef mod,
                        const char *graph_fn, const em_backend_opts *opts) {
    char *msg = NULL;
    em_status st = EM_OK;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg))
        st = em_error(EM_ERR_INTERNAL, "llvm: generated code does not verify: %s", msg);
    LLVMDisposeMessage(msg);
    char name[128];
    if (st == EM_OK) st = em_llvm_code_key(mod, x->key);
    if (st == EM_OK && opts->dump) {
        em_llvm_code_name(x->key, graph_fn, name, sizeof name);
        char *text = print_kernels(x, mod, name);
        if (text) opts->dump(opts->dump_ctx, "kernels.ll", text);
        free(text);
        st = em_llvm_optimize(mod);
        if (st == EM_OK) {
            text = LLVMPrintModuleToString(mod);
            opts->dump(opts->dump_ctx, "kernels.opt.ll", text);
            LLVMDisposeMessage(text);
        }
    }
    if (st != EM_OK) {
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsctx);
        return st;
    }
    /* the names looked up below: every kernel's, then the graph's */
    int n_names = x->prog.n_kernels + 1;
    char(*names)[128] = calloc((size_t)n_names, sizeof *names);
    const char **symbols = calloc((size_t)n_names, sizeof *symbols);
    if (!names || !symbols) {
        free(names);
        free(symbols);
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsctx);
        return em_error(EM_ERR_NOMEM, "out of memory compiling a graph");
    }
    for (int i = 0; i < n_names; i++) {
        em_llvm_code_name(x->key, i < x->prog.n_kernels ? x->prog.kernels[i].name : graph_fn, names[i], sizeof names[i]);
        symbols[i] = names[i];
    }
    st = em_llvm_code_get(x->key, tsctx, mod, !opts->dump, opts->dump != NULL, symbols, n_names, &x->code, &x->source);
    void *addr;
    for (int i = 0; st == EM_OK && i < x->prog.n_kernels; i++) {
        if ((st = em_llvm_lookup(names[i], &addr)) != EM_OK) break;
        x->prog.kernels[i].fn = (em_llvm_kernel_fn)addr;
        em_interp_set_kernel(x->interp, x->prog.kernels[i].node, interp_kernel, &x->prog.kernels[i]);
    }
    if (st == EM_OK && (st = em_llvm_lookup(names[n_names - 1], &addr)) == EM_OK) x->prog.fn = (em_llvm_graph_fn)addr;
    free(names);
    free(symbols);
    return st == EM_OK ? em_llvm_program_resolve(&x->prog) : st;
}

/* Decides which fused nodes become kernels: those big enough that the
 * code generator can compile for their inputs' layouts. The others run op
 * by op; why is kept for describe. Returns how many, or -1 (no memory). */
static int choose_kernels(executable *x, int64_t (*strides)[EM_MAX_DIMS], int64_t min_elements) {
    int n_fused = 0;
    em_strbuf why;
    em_strbuf_init(&why);
    for (const em_ir_node *n = x->prog.g->body->first; n; n = n->next) {
        if (!worth_compiling(n, min_elements)) continue;
        int64_t (*ins)[EM_MAX_DIMS] = calloc((size_t)(n->n_in ? n->n_in : 1), sizeof *ins);
        if (!ins) {
            free(em_strbuf_take(&why));
            return -1;
        }
        for (int i = 0; i < n->n_in; i++) memcpy(ins[i], strides[n->in[i]->id], sizeof ins[0]);
        if (em_llvm_kernel_split(n, ins, &x->split[n->id]) == EM_OK) {
            n_fused++;
        } else {
            em_strbuf_printf(&why, "  fused node %%%d runs op by op: %s\n", n->out[0]->id, em_last_error());
        }
        free(ins);
    }
    x->refused = em_strbuf_take(&why);
    return n_fused;
}

/* Fixed names: code.c names the code by its contents, so graphs that
 * differ only in their functions' names share it */
#define MODULE_NAME "ember_graph"
#define GRAPH_FN EM_LLVM_PLACEHOLDER "graph"

/* Everything but the machine code: chooses the kernels (fused nodes of at
 * least min_elements), plans the run and emits the kernels and the graph
 * function (GRAPH_FN) into *mod. */
static em_status build(const em_ir_graph *g, const em_backend_opts *opts, int64_t min_elements, executable **xp,
                       LLVMOrcThreadSafeContextRef *tsctx, LLVMModuleRef *mod) {
    em_status st = em_llvm_init();
    if (st != EM_OK) return st;
    executable *x = calloc(1, sizeof *x);
    int *kernel_of = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *kernel_of);
    int64_t (*strides)[EM_MAX_DIMS] = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *strides);
    int n_fused = -1;
    if (x && strides) {
        x->prog.g = g;
        x->min_elements = min_elements;
        x->dynamic_sizes = opts->dynamic_sizes;
        for (int i = 0; kernel_of && i < g->n_nodes; i++) kernel_of[i] = -1;
        x->split = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *x->split);
        propagate_layouts(g, opts->examples, opts->n_examples, strides);
        if (x->split) n_fused = choose_kernels(x, strides, min_elements);
        x->prog.kernels = calloc((size_t)(n_fused > 0 ? n_fused : 1), sizeof *x->prog.kernels);
        x->interp = em_interp_new(g, opts->spec);
    }
    if (!x || !kernel_of || !strides || n_fused < 0 || !x->prog.kernels || !x->interp ||
        em_llvm_program_copy_spec(&x->prog, opts->spec) != EM_OK) {
        free(kernel_of);
        free(strides);
        exec_free(x);
        return em_error(EM_ERR_NOMEM, "out of memory compiling @%s", g->name);
    }
    *mod = NULL;
    if ((st = em_llvm_plan_schedule(g, &x->prog.spec, &x->prog.plan)) == EM_OK &&
        (st = em_llvm_new_module(MODULE_NAME, tsctx, mod)) == EM_OK) {
        if ((st = emit_kernels(x, *mod, opts, strides, kernel_of)) == EM_OK &&
            (st = plan_memory(x, kernel_of)) == EM_OK)
            st = em_llvm_emit_graph(*mod, GRAPH_FN, g, &x->prog.plan, &x->prog.spec, kernel_of, x->op_donation,
                                    &x->prog.ref_kinds, &x->prog.n_refs);
        if (st != EM_OK) {
            LLVMDisposeModule(*mod);
            LLVMOrcDisposeThreadSafeContext(*tsctx);
        }
    }
    free(kernel_of);
    free(strides);
    if (st != EM_OK) {
        exec_free(x);
        return st;
    }
    *xp = x;
    return EM_OK;
}

static em_status llvm_compile(const em_ir_graph *g, const em_backend_opts *opts, void **state) {
    executable *x;
    LLVMOrcThreadSafeContextRef tsctx;
    LLVMModuleRef mod;
    /* (compiled for sizes read at run time, every fused node is a kernel:
     * which are big enough would depend on the sizes, and the code is
     * shared by every size) */
    em_status st = build(g, opts, opts->dynamic_sizes ? 0 : jit_min_elements(), &x, &tsctx, &mod);
    if (st == EM_OK && (st = finish(x, tsctx, mod, GRAPH_FN, opts)) != EM_OK) exec_free(x);
    if (st == EM_OK) *state = x;
    return st;
}

/* Ahead of time: the module as llvm_compile builds it, with every fused
 * node a kernel however small (compile time is not the run's), its functions hidden
 * (a shared object exports its C ABI only) and listed in the table `table`
 * (the graph function, then the kernels in the description's order),
 * optimised and written as position-independent object code. */
static em_status llvm_compile_object(const em_ir_graph *g, const em_backend_opts *opts, const char *obj_path,
                                     const char *table, char **description) {
    executable *x;
    LLVMOrcThreadSafeContextRef tsctx;
    LLVMModuleRef mod;
    if (opts->dynamic_sizes)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: ahead of time: a model compiled for sizes read at run time");
    em_status st = build(g, opts, 0, &x, &tsctx, &mod);
    if (st != EM_OK) return st;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
    int n = 1 + x->prog.n_kernels;
    LLVMValueRef *fns = malloc((size_t)n * sizeof *fns);
    if (!fns) st = em_error(EM_ERR_NOMEM, "out of memory compiling @%s", g->name);
    for (int i = 0; st == EM_OK && i < n; i++)
        fns[i] = LLVMGetNamedFunction(mod, i ? x->prog.kernels[i - 1].name : GRAPH_FN);
    if (st == EM_OK) {
        for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
            if (!LLVMIsDeclaration(f)) LLVMSetVisibility(f, LLVMHiddenVisibility);
        LLVMValueRef t = LLVMAddGlobal(mod, LLVMArrayType2(ptr, (uint64_t)n), table);
        LLVMSetInitializer(t, LLVMConstArray2(ptr, fns, (uint64_t)n));
        LLVMSetGlobalConstant(t, 1);
        LLVMSetVisibility(t, LLVMHiddenVisibility);
        char *msg = NULL;
        if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg))
            st = em_error(EM_ERR_INTERNAL, "llvm: generated code does not verify: %s", msg);
        LLVMDisposeMessage(msg);
    }
    free(fns);
    if (st == EM_OK) st = em_llvm_optimize(mod);
    if (st == EM_OK) st = em_llvm_emit_object_file(mod, obj_path);
    if (st == EM_OK && !(*description = em_llvm_program_save(&x->prog)))
        st = em_error(EM_ERR_NOMEM, "out of memory compiling @%s", g->name);
    LLVMDisposeModule(mod);
    LLVMOrcDisposeThreadSafeContext(tsctx);
    exec_free(x);
    return st;
}

/* ---- running ---- */

static em_status llvm_run(void *state, em_tensor *const *in, int n_in, em_tensor **out, int n_out) {
    executable *x = state;
    if (n_in != x->prog.g->body->n_params || n_out != x->prog.spec.n_outputs)
        return em_error(EM_ERR_VALUE, "@%s takes %d inputs and returns %d results, got %d and %d",
                        x->prog.g->name, x->prog.g->body->n_params, x->prog.spec.n_outputs, n_in, n_out);
    if (em_interp_profiling()) {
        em_llvm_run run = {em_llvm_program_allowed(&x->prog, in, n_in), NULL, x->prog.refs};
        return em_interp_run(x->interp, &run, in, n_in, out, n_out);
    }
    return em_llvm_program_run(&x->prog, in, out);
}

static char *llvm_describe(void *state) {
    executable *x = state;
    em_strbuf s;
    em_strbuf_init(&s);
    int small = 0, chains = 0;
    int64_t min_elements = x->min_elements;
    for (const em_ir_node *n = x->prog.g->body->first; n; n = n->next)
        if (n->region && !worth_compiling(n, min_elements)) {
            small++;
            chains += em_interp_region_is_chain(n);
        }
    em_strbuf_printf(&s, "llvm backend: %d fused kernel%s compiled for %s%s; other nodes run their "
                         "eager kernels\n",
                     x->prog.n_kernels, x->prog.n_kernels == 1 ? "" : "s", em_llvm_host_cpu(),
                     x->dynamic_sizes ? ", reading sizes at run time (dynamic shapes: every fused node is a kernel)"
                                      : "");
    static const char *const source[] = {"compiled now", "shared with an identical graph compiled before",
                                         "loaded from the compile cache"};
    static const char *const cache_word[] = {"cache miss", "shared", "cache hit"};
    em_strbuf_printf(&s, "  machine code %s (key %s; the kernels and the graph function are one object, "
                         "so each kernel below is a %s too)\n",
                     source[x->source], x->key, cache_word[x->source]);
    em_strbuf_printf(&s, "  one compiled function runs the graph's %d nodes; memory plan: %d "
                         "intermediate value%s in one %lld-byte arena per run\n",
                     x->prog.plan.n_nodes, x->prog.plan.n_buffers, x->prog.plan.n_buffers == 1 ? "" : "s",
                     (long long)x->prog.plan.arena_bytes);
    if (small)
        em_strbuf_printf(&s, "  (%d fused node%s under %lld elements not worth compiling "
                             "(EMBER_JIT_MIN_ELEMENTS): %d run%s the eager loops in one pass over "
                             "blocks, %d op by op)\n",
                         small, small == 1 ? "" : "s", (long long)min_elements, chains, chains == 1 ? "s" : "",
                         small - chains);
    if (x->refused) em_strbuf_puts(&s, x->refused);
    if (x->prog.plan.n_buffers) /* which value lives in which buffer, and when */
        em_strbuf_printf(&s, "  memory plan (arena offset, bytes: value, made at node .. last used at node, of %d):\n",
                         x->prog.plan.n_nodes);
    for (int i = 0; i < x->prog.plan.n_buffers; i++) {
        const struct em_llvm_buffer *bf = &x->prog.plan.buffers[i];
        char t[256];
        em_type_str(bf->type, t, sizeof t);
        em_strbuf_printf(&s, "    %10lld %10lld: %%%d %s, %d .. %d\n", (long long)bf->offset, (long long)bf->nbytes,
                         bf->value, t, x->prog.plan.pos[bf->value], x->prog.plan.last[bf->value]);
        for (int v = bf->value; v < x->prog.g->n_values; v++) /* (results computed in place in it come later) */
            if (x->prog.plan.in_place[v] >= 0 && x->prog.plan.buffer[v] == i)
                em_strbuf_printf(&s, "    %21s  then %%%d, in place, %d .. %d\n", "", v, x->prog.plan.pos[v],
                                 x->prog.plan.last[v]);
    }
    for (int i = 0; i < x->prog.n_kernels; i++) {
        const em_llvm_kernel *k = &x->prog.kernels[i];
        int ops = 0;
        for (const em_ir_node *n = k->node->region->first; n; n = n->next) ops++;
        char t[256];
        em_type_str(&k->node->out[0]->type, t, sizeof t);
        char tiles[64];
        snprintf(tiles, sizeof tiles, " in %d x %d tiles (an operand is read transposed)", EM_LLVM_TILE, EM_LLVM_TILE);
        em_strbuf_printf(&s, "  %s [%s]: %d ops over %s%s", k->name, cache_word[x->source], ops, t,
                         em_llvm_gemm_of(k->node)                     ? " (a matmul and its epilogue, per block)"
                         : em_llvm_split_is_tiled(k->node, &k->split) ? tiles
                                                                      : "");
        if (k->node->loc.file)
            em_strbuf_printf(&s, " from %s:%d-%d", k->node->loc.file, k->node->loc.line,
                             k->node->loc.line_end);
        for (int o = 0; o < k->node->n_out; o++)
            if (k->shares[o] >= 0 && k->donation[o] >= 0)
                em_strbuf_printf(&s, "; result %d written in place into graph input %d", o,
                                 x->prog.donated_input[k->donation[o]]);
            else if (k->shares[o] >= 0)
                em_strbuf_printf(&s, "; result %d written in place into %%%d, which dies here", o,
                                 k->node->in[k->shares[o]]->id);
        if (k->eager_runs) em_strbuf_printf(&s, " (%lld eager fallbacks)", (long long)k->eager_runs);
        em_strbuf_puts(&s, "\n");
    }
    for (const em_ir_node *n = x->prog.g->body->first; n && x->op_donation; n = n->next)
        if (x->op_donation[n->id] >= 0)
            em_strbuf_printf(&s, "  %s %%%d: a write into a view, done in place in graph input %d\n", em_op_name(n->op),
                             n->out[0]->id, x->prog.donated_input[x->op_donation[n->id]]);
    return em_strbuf_take(&s);
}

static char *llvm_profile(void *state) { return em_interp_profile(((executable *)state)->interp); }

static const char *llvm_code_id(void *state) { return ((executable *)state)->key; }

static const em_backend llvm_backend = {"llvm",       llvm_compile, llvm_run,            llvm_describe,
                                        llvm_profile, exec_free,    llvm_code_id,        em_disk_cache_clear,
                                        llvm_compile_object};

const em_backend *em_llvm_backend(void) { return &llvm_backend; }
