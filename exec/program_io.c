/*
 * program_io.c - a program's description as text, and back (program.h):
 * what a shared object made ahead of time stores beside its machine code
 * so that its runtime can rebuild the program in another process. The
 * graph is not in it (the caller keeps the graph's text, and parses it
 * back to the same node and value ids); nor are the addresses (the
 * functions come from the object's table, the rest from the graph).
 *
 *   program <kernels> <donations> <buffers> <arena bytes> <refs>
 *   kernel <node id> <units> <grain> <strides per input dim...> <share, donation per output...>
 *   donated <graph input index>...
 *   buffer <value id> <offset> <bytes>
 *   refs <kind> <index>...
 *
 * Loading checks every number against the graph (ids, ranks, offsets
 * inside the arena, donations and refs in range), so a damaged
 * description is an error, never a wild pointer.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/strbuf.h"
#include "program.h"

char *em_llvm_program_save(const em_llvm_program *p) {
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_printf(&s, "program %d %d %d %lld %d\n", p->n_kernels, p->n_donations, p->plan.n_buffers,
                     (long long)p->plan.arena_bytes, p->n_refs);
    for (int i = 0; i < p->n_kernels; i++) {
        const em_llvm_kernel *k = &p->kernels[i];
        em_strbuf_printf(&s, "kernel %d %lld %lld", k->node->id, (long long)k->split.units,
                         (long long)k->split.grain);
        for (int j = 0; j < k->node->n_in; j++)
            for (int d = 0; d < k->node->in[j]->type.ndim; d++)
                em_strbuf_printf(&s, " %lld", (long long)k->in_strides[j][d]);
        for (int o = 0; o < k->node->n_out; o++) em_strbuf_printf(&s, " %d %d", k->shares[o], k->donation[o]);
        em_strbuf_puts(&s, "\n");
    }
    em_strbuf_puts(&s, "donated");
    for (int d = 0; d < p->n_donations; d++) em_strbuf_printf(&s, " %d", p->donated_input[d]);
    em_strbuf_puts(&s, "\n");
    for (int i = 0; i < p->plan.n_buffers; i++)
        em_strbuf_printf(&s, "buffer %d %lld %lld\n", p->plan.buffers[i].value, (long long)p->plan.buffers[i].offset,
                         (long long)p->plan.buffers[i].nbytes);
    em_strbuf_puts(&s, "refs");
    for (int i = 0; i < p->n_refs; i++) em_strbuf_printf(&s, " %d %d", p->ref_kinds[i].kind, p->ref_kinds[i].index);
    em_strbuf_puts(&s, "\n");
    return em_strbuf_take(&s);
}

/* Body node `id` of g, or NULL. */
static const em_ir_node *node_of(const em_ir_graph *g, int id) {
    for (const em_ir_node *n = g->body->first; n; n = n->next)
        if (n->id == id) return n;
    return NULL;
}

/* Body value `id` of g made by a node (a buffer's value), or NULL. */
static const em_ir_value *value_of(const em_ir_graph *g, int id) {
    for (const em_ir_node *n = g->body->first; n; n = n->next)
        for (int o = 0; o < n->n_out; o++)
            if (n->out[o]->id == id) return n->out[o];
    return NULL;
}

static em_status load_kernel(em_words *sc, const em_ir_graph *g, em_llvm_program *p, em_llvm_kernel *k) {
    em_words_expect(sc, "kernel");
    int id = (int)em_words_int(sc, 0, g->n_nodes);
    if (sc->failed) return em_words_status(sc);
    if (!(k->node = node_of(g, id)) || !k->node->region)
        return em_error(EM_ERR_PARSE, "program: kernel of node %d, which is no fused node of @%s", id, g->name);
    const em_ir_node *n = k->node;
    k->split.units = em_words_int(sc, 0, INT64_MAX);
    k->split.grain = em_words_int(sc, 1, INT64_MAX);
    k->in_strides = calloc((size_t)(n->n_in ? n->n_in : 1), sizeof *k->in_strides);
    k->shares = malloc((size_t)n->n_out * sizeof *k->shares);
    k->donation = malloc((size_t)n->n_out * sizeof *k->donation);
    if (!k->in_strides || !k->shares || !k->donation) return em_error(EM_ERR_NOMEM, "out of memory loading a program");
    for (int j = 0; j < n->n_in; j++)
        for (int d = 0; d < n->in[j]->type.ndim; d++) k->in_strides[j][d] = em_words_int(sc, INT64_MIN / 2, INT64_MAX / 2);
    for (int o = 0; o < n->n_out; o++) {
        k->shares[o] = (int)em_words_int(sc, -1, n->n_in - 1);
        k->donation[o] = (int)em_words_int(sc, -1, p->n_donations - 1);
    }
    return em_words_status(sc);
}

em_status em_llvm_program_load(const char *text, size_t len, const em_ir_graph *g, em_llvm_graph_fn fn,
                               const em_llvm_kernel_fn *kernels, int n_kernels, em_llvm_program *p) {
    em_words sc;
    em_words_init(&sc, text, len, "program description");
    memset(p, 0, sizeof *p);
    p->g = g;
    p->fn = fn;
    em_words_expect(&sc, "program");
    int nk = (int)em_words_int(&sc, 0, g->n_nodes);
    p->n_donations = (int)em_words_int(&sc, 0, EM_LLVM_MAX_DONATIONS);
    int nb = (int)em_words_int(&sc, 0, g->n_values);
    p->plan.arena_bytes = em_words_int(&sc, 0, INT64_MAX / 2);
    int nr = (int)em_words_int(&sc, 0, 1 << 24);
    if (sc.failed) return em_words_status(&sc);
    if (n_kernels >= 0 && nk != n_kernels)
        return em_error(EM_ERR_PARSE, "program: %d kernels described, %d in the code", nk, n_kernels);
    p->kernels = calloc((size_t)(nk ? nk : 1), sizeof *p->kernels);
    p->plan.buffers = calloc((size_t)(nb ? nb : 1), sizeof *p->plan.buffers);
    p->ref_kinds = malloc((size_t)(nr ? nr : 1) * sizeof *p->ref_kinds);
    if (!p->kernels || !p->plan.buffers || !p->ref_kinds) return em_error(EM_ERR_NOMEM, "out of memory loading a program");
    for (int i = 0; i < nk; i++, p->n_kernels++) {
        em_status st = load_kernel(&sc, g, p, &p->kernels[i]);
        if (st != EM_OK) return st;
        p->kernels[i].fn = kernels[i];
    }
    em_words_expect(&sc, "donated");
    for (int d = 0; d < p->n_donations; d++) p->donated_input[d] = (int)em_words_int(&sc, 0, g->body->n_params - 1);
    for (int i = 0; i < nb && !sc.failed; i++, p->plan.n_buffers++) {
        struct em_llvm_buffer *b = &p->plan.buffers[i];
        em_words_expect(&sc, "buffer");
        b->value = (int)em_words_int(&sc, 0, g->n_values - 1);
        b->offset = em_words_int(&sc, 0, p->plan.arena_bytes);
        b->nbytes = em_words_int(&sc, 0, p->plan.arena_bytes);
        if (sc.failed) break;
        if (!(b->def = value_of(g, b->value)))
            return em_error(EM_ERR_PARSE, "program: buffer %d holds %%%d, which no node of @%s makes", i, b->value,
                            g->name);
        b->type = &b->def->type;
        int64_t need = em_shape_numel(b->type->shape, b->type->ndim) * (int64_t)em_dtype_size(b->type->dtype);
        if (b->nbytes < need || b->offset + b->nbytes > p->plan.arena_bytes)
            return em_error(EM_ERR_PARSE, "program: buffer %d (%lld bytes at %lld) does not hold %%%d or leaves the "
                            "%lld-byte arena", i, (long long)b->nbytes, (long long)b->offset, b->value,
                            (long long)p->plan.arena_bytes);
    }
    em_words_expect(&sc, "refs");
    for (int i = 0; i < nr && !sc.failed; i++, p->n_refs++) {
        p->ref_kinds[i].kind = (int32_t)em_words_int(&sc, EM_REF_CALLEE, EM_REF_EFFECTS);
        p->ref_kinds[i].index = (int32_t)em_words_int(&sc, 0, 1 << 30);
    }
    return em_words_status(&sc);
}
