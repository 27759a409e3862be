/*
 * plan.c - how a whole-graph function runs its graph, decided at compile
 * time: the order of the nodes, the frame slot each value lives in, after
 * which node each value dies, where each value guard is compared, and the
 * memory plan.
 *
 * The memory plan puts values into one arena per run instead of a fresh
 * allocation each. A value can live there when nothing outside the run can
 * ever see it: it is made by a node that allocates its result (a compiled
 * kernel, an eager kernel other than a view), and neither it nor anything
 * that may share its memory (views of it, copies that may return it,
 * regions run op by op) is a graph input or a result. Its buffer is busy
 * from its node until the last use of anything sharing its memory; buffers
 * whose busy times do not overlap share bytes (first fit, in node order).
 * Values that share memory are found with a union-find over the nodes whose
 * results may alias their inputs. A kernel's result computed in the memory
 * of an input dying at that kernel (in_place) takes over the input's
 * buffer, which stays busy until the result's last use: that span was the
 * input's alone, so nothing else can lie there.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/alloc.h"
#include "program.h"

void em_llvm_plan_free(em_llvm_plan *p) {
    em_free(p->order);
    em_free(p->pos);
    em_free(p->last);
    em_free(p->slot);
    em_free(p->release_start);
    em_free(p->release_ids);
    em_free(p->check_start);
    em_free(p->check_ids);
    em_free(p->buffer);
    em_free(p->in_place);
    em_free(p->buffers);
    memset(p, 0, sizeof *p);
}

/* Bucket sort of ids 0..n-1 by key[] (in [0, n_keys); others left out)
 * into start[] (n_keys + 1 entries: bucket k is out[start[k]..start[k+1]))
 * and out[], keeping id order within a bucket. fill[] is scratch of n_keys
 * + 1 entries. */
static void bucket(const int *key, int n, int n_keys, int *start, int *out, int *fill) {
    memset(start, 0, (size_t)(n_keys + 1) * sizeof *start);
    for (int i = 0; i < n; i++)
        if (key[i] >= 0 && key[i] < n_keys) start[key[i] + 1]++;
    for (int k = 0; k < n_keys; k++) start[k + 1] += start[k];
    memcpy(fill, start, (size_t)(n_keys + 1) * sizeof *fill);
    for (int i = 0; i < n; i++)
        if (key[i] >= 0 && key[i] < n_keys) out[fill[key[i]]++] = i;
}

/* Frame slots: a value takes a slot from its node until its last use;
 * freed slots are reused (lowest first). */
static int assign_slots(em_llvm_plan *p) {
    const em_ir_graph *g = p->g;
    int *free_at = em_malloc((size_t)(g->n_values + 1) * sizeof *free_at); /* per slot: position it frees after */
    if (!free_at) return -1;
    int n_slots = 0;
    for (int k = 0; k < p->n_nodes; k++) {
        const em_ir_node *n = p->order[k];
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o]->id, s = 0;
            while (s < n_slots && free_at[s] >= k) s++; /* (busy through this node) */
            if (s == n_slots) n_slots++;
            p->slot[v] = s;
            free_at[s] = p->last[v] > k ? p->last[v] : k;
        }
    }
    em_free(free_at);
    return n_slots;
}

em_status em_llvm_plan_schedule(const em_ir_graph *g, const em_run_spec *spec, em_llvm_plan *p) {
    memset(p, 0, sizeof *p);
    p->g = g;
    const em_ir_block *b = g->body;
    int nv = g->n_values ? g->n_values : 1, nn = g->n_nodes ? g->n_nodes : 1, nr = b->n_results;
    p->order = em_calloc((size_t)nn, sizeof *p->order);
    p->pos = em_malloc((size_t)nv * sizeof *p->pos);
    p->last = em_malloc((size_t)nv * sizeof *p->last);
    p->slot = em_malloc((size_t)nv * sizeof *p->slot);
    p->release_start = em_malloc((size_t)(nn + 1) * sizeof *p->release_start);
    p->release_ids = em_malloc((size_t)nv * sizeof *p->release_ids);
    p->check_start = em_malloc((size_t)(nn + 2) * sizeof *p->check_start);
    p->check_ids = em_malloc((size_t)(nr ? nr : 1) * sizeof *p->check_ids);
    p->buffer = em_malloc((size_t)nv * sizeof *p->buffer);
    if (!p->order || !p->pos || !p->last || !p->slot || !p->release_start || !p->release_ids ||
        !p->check_start || !p->check_ids || !p->buffer)
        goto nomem;
    for (int v = 0; v < nv; v++) p->pos[v] = p->last[v] = p->slot[v] = p->buffer[v] = -1;
    int k = 0;
    for (const em_ir_node *n = b->first; n; n = n->next, k++) {
        p->order[k] = n;
        for (int i = 0; i < n->n_out; i++) p->pos[n->out[i]->id] = p->last[n->out[i]->id] = k;
        for (int i = 0; i < n->n_in; i++) p->last[n->in[i]->id] = k;
    }
    p->n_nodes = k;
    for (int r = 0; r < nr; r++) p->last[b->results[r]->id] = k; /* kept to the end */
    /* values die after their last use (params are the caller's: never);
     * value guards are compared right after their node (position + 1; 0:
     * at entry) */
    int *key = em_malloc((size_t)(nv > nr ? nv : nr + 1) * sizeof *key);
    int *fill = em_malloc((size_t)(k + 2) * sizeof *fill);
    if (!key || !fill) {
        em_free(key);
        em_free(fill);
        goto nomem;
    }
    for (int v = 0; v < g->n_values; v++) key[v] = p->pos[v] >= 0 && p->last[v] < k ? p->last[v] : -1;
    bucket(key, g->n_values, k, p->release_start, p->release_ids, fill);
    p->checked_by = -1;
    for (int r = 0; r < nr; r++) {
        key[r] = spec && spec->expected && spec->expected[r] ? p->pos[b->results[r]->id] + 1 : -1;
        if (key[r] - 1 > p->checked_by) p->checked_by = key[r] - 1;
    }
    bucket(key, nr, k + 1, p->check_start, p->check_ids, fill);
    em_free(key);
    em_free(fill);
    if ((p->n_slots = assign_slots(p)) < 0) goto nomem;
    return EM_OK;
nomem:
    em_llvm_plan_free(p);
    return em_error(EM_ERR_NOMEM, "out of memory planning @%s", g->name);
}

static int64_t nbytes_of(const em_type *t) {
    int64_t n = em_shape_numel(t->shape, t->ndim) * (int64_t)em_dtype_size(t->dtype);
    return (n + 63) & ~(int64_t)63; /* 64-byte aligned, as the allocator's blocks */
}

typedef struct {
    int64_t start, end;
} span;

static int by_start(const void *a, const void *b) {
    int64_t x = ((const span *)a)->start, y = ((const span *)b)->start;
    return x < y ? -1 : x > y;
}

/* First fit: the lowest offset where buffer i overlaps none of the earlier
 * buffers busy at the same time (their byte spans sorted by start; spans[]
 * is scratch for i entries). */
static int64_t first_fit(const em_llvm_plan *p, int i, const int *busy_from, const int *busy_to,
                         span *spans) {
    int n = 0;
    for (int j = 0; j < i; j++)
        if (!(busy_to[j] < busy_from[i] || busy_to[i] < busy_from[j]) && p->buffers[j].nbytes)
            spans[n++] = (span){p->buffers[j].offset, p->buffers[j].offset + p->buffers[j].nbytes};
    qsort(spans, (size_t)n, sizeof *spans, by_start);
    int64_t off = 0;
    for (int j = 0; j < n && spans[j].start < off + p->buffers[i].nbytes; j++)
        if (spans[j].end > off) off = spans[j].end;
    return off;
}

em_status em_llvm_plan_buffers(em_llvm_plan *p, const bool *aliases_inputs) {
    const em_ir_graph *g = p->g;
    const em_ir_block *b = g->body;
    int nv = g->n_values ? g->n_values : 1;
    int *parent = em_malloc((size_t)nv * sizeof *parent), *busy = em_malloc((size_t)nv * sizeof *busy);
    bool *escapes = em_calloc((size_t)nv, sizeof *escapes);
    int *busy_from = em_malloc((size_t)nv * sizeof *busy_from), *busy_to = em_malloc((size_t)nv * sizeof *busy_to);
    span *spans = em_malloc((size_t)nv * sizeof *spans);
    p->buffers = em_malloc((size_t)nv * sizeof *p->buffers);
    em_status st = EM_OK;
    if (!parent || !busy || !escapes || !busy_from || !busy_to || !spans || !p->buffers) {
        st = em_error(EM_ERR_NOMEM, "out of memory planning @%s", g->name);
        goto done;
    }
    em_ir_alias_classes(g, aliases_inputs, parent); /* results that may share their inputs' memory */
    /* a class escapes when a graph input or a result is in it; it is busy
     * until the last use of any of its values */
    for (int v = 0; v < nv; v++) busy[v] = -1;
    for (int i = 0; i < b->n_params; i++) escapes[em_ir_class(parent, b->params[i]->id)] = true;
    for (int r = 0; r < b->n_results; r++) escapes[em_ir_class(parent, b->results[r]->id)] = true;
    for (int v = 0; v < g->n_values; v++) {
        int c = em_ir_class(parent, v);
        if (p->last[v] > busy[c]) busy[c] = p->last[v];
    }
    p->n_buffers = 0;
    p->arena_bytes = 0;
    for (int k = 0; k < p->n_nodes; k++) {
        const em_ir_node *n = p->order[k];
        if (aliases_inputs[n->id]) continue; /* (its results are others' memory) */
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o]->id, c = em_ir_class(parent, v), i = p->n_buffers;
            if (escapes[c]) continue;
            int u = p->in_place ? p->in_place[v] : -1;
            if (u >= 0) { /* computed in u's memory: u's buffer, busy on */
                int bu = p->buffer[u];
                if (bu >= 0 && busy[c] > busy_to[bu]) busy_to[bu] = busy[c];
                p->buffer[v] = bu;
                continue;
            }
            p->buffers[i].value = v;
            p->buffers[i].type = &n->out[o]->type;
            p->buffers[i].def = n->out[o];
            p->buffers[i].nbytes = nbytes_of(&n->out[o]->type);
            busy_from[i] = k;
            busy_to[i] = busy[c] > k ? busy[c] : k;
            p->buffers[i].offset = first_fit(p, i, busy_from, busy_to, spans);
            if (p->buffers[i].offset + p->buffers[i].nbytes > p->arena_bytes)
                p->arena_bytes = p->buffers[i].offset + p->buffers[i].nbytes;
            p->buffer[v] = p->n_buffers++;
        }
    }
done:
    em_free(spans);
    em_free(parent);
    em_free(busy);
    em_free(escapes);
    em_free(busy_from);
    em_free(busy_to);
    return st;
}
