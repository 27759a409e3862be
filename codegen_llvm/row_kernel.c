/*
 * row_kernel.c - a fused node whose region holds reductions -> one LLVM
 * function that runs a block of rows:
 *
 *   void kernel(i64 row_begin, i64 row_end, ptr ptrs)   ; ptrs: outputs, inputs
 *
 * Every reduction in the region reduces the trailing k dims of one shape S
 * (the fuser makes sure of it); S splits into outer dims O, whose elements
 * are the rows, and inner dims I, a row's N elements. Each region value is
 * either per element (it varies within a row) or per row (a reduction's
 * result, a value broadcast along I, or computed from those only). A value's
 * level counts the reductions on its longest path from the inputs: level 0
 * depends on none.
 *
 * A row runs as a few loops over its N elements. Loop L computes the
 * per-element values of level L that a reduction or an output needs; a
 * reduction's input is written to a row-sized scratch buffer (on the stack:
 * the row stays in L1/L2), unless it is a kernel input whose row is already
 * contiguous in memory. After loop L the reductions of that loop run over
 * their rows, and the per-row values of level L + 1 are computed once, in
 * registers. A later loop reads a value it needs from its scratch row
 * instead of computing it again: softmax written as
 * `e = (x - x.amax(-1, keepdim=True)).exp(); e / e.sum(-1, keepdim=True)`
 * reads x twice (the max, then exp into scratch) and writes the output from
 * the scratch row. An output too big for the cache is written with
 * streaming stores (choose_streams).
 *
 * The reductions themselves are the eager kernels' own code for a
 * contiguous row: float32 sum, mean, amax and amin the folds of ops_fold.h,
 * inlined from the scalar library's bitcode, the rest em_reduce_row; so a
 * fused reduction has the eager result's bits;
 * everything else is the elementwise code of kernel.c. Rows split across
 * threads; a row is never split.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ops_stream.h"
#include "llvm_internal.h"

#define MAX_OPERANDS 80
#define MAX_SCRATCH_BYTES (256 << 10) /* per row, on the thread's stack */

typedef struct {
    const em_ir_node *node;
    const em_ir_block *r;
    em_ir_rows S;         /* the shape S; its trailing S.k dims are reduced */
    int64_t rows, n;      /* numel of O and of I */
    int n_ops;            /* outputs, then inputs */
    int nd_outer;         /* O coalesced over all operands */
    int64_t outer[EM_MAX_DIMS];
    int64_t ostr[MAX_OPERANDS][EM_MAX_DIMS];
    int64_t istr[MAX_OPERANDS]; /* I coalesced to one dim */
    int *level;           /* per value id */
    bool *per_row;        /* per value id */
    bool *scratch;        /* per value id: written to a scratch row */
    int *home;            /* per value id: the output whose row is its scratch row, or -1 */
    int streamed;         /* the output written with streaming stores (choose_streams), or -1 */
    int max_loop;         /* the last loop with work */
    int64_t scratch_bytes;
} row_plan;

static em_status refuse(const char *why) {
    return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: row kernel: %s", why);
}

bool em_llvm_is_row_kernel(const em_ir_node *node) {
    for (const em_ir_node *n = node->region ? node->region->first : NULL; n; n = n->next)
        if (em_op_get(n->op)->kind == EM_KIND_REDUCE) return true;
    return false;
}

/* Does reduction n reduce the kernel's rows? */
static bool reduces_trailing(const row_plan *p, const em_ir_node *n) {
    em_ir_rows r;
    return em_ir_reduces_rows(n, &r) && r.k == p->S.k && em_shape_eq(r.shape, r.ndim, p->S.shape, p->S.ndim);
}

/* Levels, per-row flags and scratch rows of the region's values. */
static em_status classify(row_plan *p) {
    const em_ir_block *r = p->r;
    const em_ir_node *node = p->node;
    int *uses_inside = calloc((size_t)r->graph->n_values, sizeof *uses_inside);
    if (!uses_inside) return em_error(EM_ERR_NOMEM, "out of memory");
    em_status st = EM_OK;
    for (const em_ir_node *n = r->first; n; n = n->next)
        for (int i = 0; i < n->n_in; i++) uses_inside[n->in[i]->id]++;
    for (int i = 0; i < r->n_params && st == EM_OK; i++) {
        const em_type *t = &r->params[i]->type;
        if (!em_ir_rows_fit(&p->S, t, &p->per_row[r->params[i]->id]))
            st = refuse("an input does not broadcast into the rows");
    }
    p->max_loop = -1;
    for (const em_ir_node *n = r->first; n && st == EM_OK; n = n->next) {
        const em_op_info *info = em_op_get(n->op);
        const em_ir_value *v = n->out[0];
        int level = 0;
        for (int i = 0; i < n->n_in; i++) level = p->level[n->in[i]->id] > level ? p->level[n->in[i]->id] : level;
        if (info->kind == EM_KIND_REDUCE) {
            const em_ir_value *x = n->in[0];
            if (!reduces_trailing(p, n)) {
                st = refuse("reductions over different dims or shapes");
            } else if (p->per_row[x->id] || (x->def && (em_op_get(x->def->op)->flags & EM_F_BROADCAST))) {
                st = refuse("a reduction of a broadcast value"); /* eager reduces a strided view */
            } else if (n->op == EM_OP_LOGSUMEXP && !em_dtype_is_float(x->type.dtype)) {
                st = refuse("logsumexp of integers");
            } else if (!EM_IR_ATTRS(n)->keepdim && uses_inside[v->id]) {
                st = refuse("a reduction without keepdim used inside the kernel");
            }
            if (st != EM_OK) break;
            p->level[v->id] = level + 1;
            p->per_row[v->id] = true;
            if (!x->def) { /* an input: read in place when its rows are contiguous */
                int k = node->n_out + x->index;
                if (p->istr[k] != 1) st = refuse("a reduction of an input whose rows are not contiguous");
            } else if (!p->scratch[x->id]) {
                p->scratch[x->id] = true;
                p->scratch_bytes += p->n * (int64_t)em_dtype_size(x->type.dtype);
            }
            if (level > p->max_loop) p->max_loop = level;
            continue;
        }
        bool row = true;
        if (!em_ir_rows_fit(&p->S, &v->type, &row)) st = refuse("a value does not broadcast into the rows");
        for (int i = 0; i < n->n_in; i++) row &= p->per_row[n->in[i]->id];
        p->per_row[v->id] = row;
        p->level[v->id] = level;
    }
    for (int i = 0; i < r->n_results && st == EM_OK; i++) {
        const em_ir_value *v = r->results[i];
        if (p->per_row[v->id]) { /* (never the rows' shape: a row has 2 elements or more) */
            if (!em_ir_rows_result(&p->S, &v->type)) st = refuse("a per-row result of another shape");
        } else if (!em_shape_eq(v->type.shape, v->type.ndim, p->S.shape, p->S.ndim)) {
            st = refuse("a result of another shape");
        } else if (p->level[v->id] > p->max_loop) {
            p->max_loop = p->level[v->id];
        }
    }
    free(uses_inside);
    return st;
}

/* Does loop `level` read v from a kernel input's row in memory, rather
 * than from scratch rows and per-row values only? One pass over the
 * region, in its order (every operand before its user). */
static em_status reads_an_input_row(const row_plan *p, const em_ir_value *v, int level, bool *reads) {
    const em_ir_block *r = p->r;
    bool *from_input = calloc((size_t)r->graph->n_values, sizeof *from_input);
    if (!from_input) return em_error(EM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r->n_params; i++) from_input[r->params[i]->id] = !p->per_row[r->params[i]->id];
    for (const em_ir_node *n = r->first; n; n = n->next) {
        const em_ir_value *u = n->out[0];
        if (p->per_row[u->id] || (p->scratch[u->id] && p->level[u->id] < level)) continue;
        for (int i = 0; i < n->n_in; i++) from_input[u->id] |= from_input[n->in[i]->id];
    }
    *reads = from_input[v->id];
    free(from_input);
    return EM_OK;
}

/* A kernel's one per-element output, when it is too big for the cache
 * (ops_stream.h) and its loop reads an input's row, goes to memory with
 * streaming stores: each 16 elements the loop computes are stored as one
 * 64-byte block. Nothing reads the output's lines before they are written
 * (the kernel moves 2n bytes per row of n instead of 3n), and no plain
 * stores that miss the cache hold up the next row's loads, a page away.
 * The stores are spread through a loop that also loads, as eager's layer
 * norm spreads them: a loop that only stores (a whole row computed first
 * and then streamed out, measured 3.4 against 2.2 ms plain for a layer
 * norm over 8192x1024 on one thread; or softmax's last loop, which reads
 * exp from a scratch row, 1.21-1.29x the C loop against 1.03-1.04x) stalls
 * on the write-combining buffers. Softmax instead keeps its scratch row in
 * the output's row (place_scratch), whose lines are then in cache.
 * Measured on the user's layer norm expression, 8192x1024, compiled both
 * ways in one process: two threads 0.98-1.39 ms streamed against
 * 1.14-1.55 plain; one thread 2.49-2.58 against 2.16-2.33, where the
 * variance's scratch row, no longer kept in the output's row, costs more
 * than the streaming saves. */
static em_status choose_streams(row_plan *p) {
    const em_ir_block *r = p->r;
    int per_element = 0, o_stream = -1;
    p->streamed = -1;
    for (int o = 0; o < r->n_results; o++) {
        const em_ir_value *v = r->results[o];
        if (p->per_row[v->id]) continue;
        per_element++;
        if (v->type.dtype == EM_DTYPE_F32 && p->istr[o] == 1 &&
            em_stream_pays((size_t)(p->rows * p->n) * sizeof(float)))
            o_stream = o;
    }
    if (per_element != 1 || o_stream < 0) return EM_OK;
    bool reads = false;
    em_status st = reads_an_input_row(p, r->results[o_stream], p->level[r->results[o_stream]->id], &reads);
    if (st == EM_OK && reads) p->streamed = o_stream;
    return st;
}

/* A scratch row may live in the row of an output that the last loop
 * writes: softmax's exp goes into the output row, the sum reads it there,
 * and the last loop divides it in place, as eager's softmax does. The row
 * kernel then touches two rows of memory per row instead of three, and the
 * output's row is already in cache when the last loop writes it. Nothing
 * reads a scratch row after the last loop, and that loop computes all its
 * results (reading element j of the scratch row) before it stores any
 * (row_loop); a row
 * kernel's outputs never share an input's memory (backend.c). */
static void place_scratch(row_plan *p) {
    const em_ir_block *r = p->r;
    for (int i = 0; i < r->graph->n_values; i++) p->home[i] = -1;
    bool taken[MAX_OPERANDS] = {false};
    for (const em_ir_node *n = r->first; n; n = n->next) {
        const em_ir_value *v = n->out[0];
        if (!p->scratch[v->id] || p->level[v->id] >= p->max_loop) continue;
        for (int o = 0; o < r->n_results; o++) {
            const em_ir_value *res = r->results[o];
            if (taken[o] || o == p->streamed || p->per_row[res->id] || p->level[res->id] != p->max_loop || p->istr[o] != 1 ||
                res->type.dtype != v->type.dtype)
                continue;
            taken[o] = true;
            p->home[v->id] = o;
            p->scratch_bytes -= p->n * (int64_t)em_dtype_size(v->type.dtype);
            break;
        }
    }
}

/* Operand strides over O and I (coalesced across operands). */
static em_status geometry(row_plan *p, int64_t (*const in_strides)[EM_MAX_DIMS]) {
    const em_ir_node *node = p->node;
    int nd = p->S.ndim, k = p->S.k, no = nd - k;
    int64_t bs[MAX_OPERANDS][EM_MAX_DIMS];
    for (int op = 0; op < p->n_ops; op++) {
        bool is_out = op < node->n_out;
        const em_type *t = is_out ? &node->out[op]->type : &node->in[op - node->n_out]->type;
        int64_t shape[EM_MAX_DIMS], contig[EM_MAX_DIMS];
        int tnd = t->ndim;
        memcpy(shape, t->shape, sizeof shape);
        if (is_out && tnd == no) { /* a result without keepdim: as if kept */
            for (int d = no; d < nd; d++) shape[d] = 1;
            tnd = nd;
        }
        em_contiguous_strides(shape, tnd, contig);
        em_broadcast_strides(shape, is_out ? contig : in_strides[op - node->n_out], tnd, nd, bs[op]);
    }
    int64_t os[MAX_OPERANDS][EM_MAX_DIMS], is[MAX_OPERANDS][EM_MAX_DIMS], ishape[EM_MAX_DIMS];
    for (int op = 0; op < p->n_ops; op++) {
        memcpy(os[op], bs[op], (size_t)no * sizeof(int64_t));
        memcpy(is[op], bs[op] + no, (size_t)k * sizeof(int64_t));
    }
    memcpy(p->outer, p->S.shape, (size_t)no * sizeof(int64_t));
    memcpy(ishape, p->S.shape + no, (size_t)k * sizeof(int64_t));
    p->nd_outer = em_coalesce_dims(p->outer, no, os, p->n_ops);
    int ni = em_coalesce_dims(ishape, k, is, p->n_ops);
    if (ni > 1) return refuse("an operand whose rows do not flatten to one stride");
    for (int op = 0; op < p->n_ops; op++) {
        memcpy(p->ostr[op], os[op], sizeof os[op]);
        p->istr[op] = ni ? is[op][0] : 0;
    }
    return EM_OK;
}

static void plan_free(row_plan *p) {
    free(p->level);
    free(p->per_row);
    free(p->scratch);
    free(p->home);
}

static em_status plan_rows(const em_ir_node *node, int64_t (*const in_strides)[EM_MAX_DIMS], row_plan *p) {
    memset(p, 0, sizeof *p);
    p->node = node;
    p->r = node->region;
    p->n_ops = node->n_out + node->n_in;
    if (p->n_ops > MAX_OPERANDS) return refuse("too many operands");
    const em_ir_node *first = p->r->first;
    while (first && em_op_get(first->op)->kind != EM_KIND_REDUCE) first = first->next;
    if (!first || !em_ir_reduces_rows(first, &p->S)) return refuse("a reduction of other than trailing dims");
    p->rows = em_shape_numel(p->S.shape, p->S.ndim - p->S.k);
    p->n = em_shape_numel(p->S.shape + p->S.ndim - p->S.k, p->S.k);
    if (p->rows < 1 || p->n < 2) return refuse("empty rows or rows of one element");
    size_t nv = (size_t)p->r->graph->n_values;
    p->level = calloc(nv, sizeof *p->level);
    p->per_row = calloc(nv, sizeof *p->per_row);
    p->scratch = calloc(nv, sizeof *p->scratch);
    p->home = malloc(nv * sizeof *p->home);
    if (!p->level || !p->per_row || !p->scratch || !p->home) {
        plan_free(p);
        return em_error(EM_ERR_NOMEM, "out of memory");
    }
    em_status st = geometry(p, in_strides);
    if (st == EM_OK) st = classify(p);
    if (st == EM_OK) st = choose_streams(p);
    if (st == EM_OK) place_scratch(p);
    if (st == EM_OK && p->scratch_bytes > MAX_SCRATCH_BYTES) st = refuse("rows too long for scratch rows");
    if (st != EM_OK) plan_free(p);
    return st;
}

em_status em_llvm_row_split(const em_ir_node *node, int64_t (*const in_strides)[EM_MAX_DIMS],
                            em_llvm_split *split) {
    row_plan p;
    em_status st = plan_rows(node, in_strides, &p);
    if (st != EM_OK) return st;
    split->units = p.rows;
    split->grain = 16384 / p.n + 1;
    plan_free(&p);
    return EM_OK;
}

/* ---- emission ---- */

typedef struct {
    em_llvm_emitter e;
    const row_plan *p;
    LLVMValueRef fn;
    LLVMValueRef base[MAX_OPERANDS], off[MAX_OPERANDS];
    LLVMValueRef *rowv;    /* per value id: per-row registers */
    LLVMValueRef *vals;    /* per value id: this loop's registers */
    LLVMValueRef *buf;     /* per value id: its scratch row */
    LLVMValueRef block;    /* 16 floats of the streamed output (choose_streams) */
    LLVMValueRef block_at; /* the index of the block's first element, while loops fill it */
    LLVMValueRef k;        /* the current loop's counter (in a block: from 0) */
    LLVMValueRef red_out;  /* where em_reduce_row writes */
    LLVMValueRef j;        /* the current loop's index */
    LLVMValueRef n;        /* a row's length */
    int loop;
} emit_ctx;

static LLVMValueRef at(emit_ctx *c, int k, em_dtype dt, LLVMValueRef j) {
    LLVMBuilderRef b = c->e.b;
    LLVMValueRef ix = c->off[k];
    if (j && c->p->istr[k]) ix = LLVMBuildAdd(b, ix, LLVMBuildMul(b, j, em_llvm_stride(&c->e, c->p->istr[k]), ""), "");
    return LLVMBuildGEP2(b, em_llvm_mem_type(&c->e, dt), c->base[k], &ix, 1, "");
}

/* The register holding v in the current loop (j: its index), emitting what
 * it needs on first use. */
static em_status value(emit_ctx *c, const em_ir_value *v) {
    const row_plan *p = c->p;
    if (c->vals[v->id]) return EM_OK;
    if (p->per_row[v->id] && c->rowv[v->id]) {
        c->vals[v->id] = c->rowv[v->id];
        return EM_OK;
    }
    em_dtype dt = v->type.dtype;
    if (p->scratch[v->id] && p->level[v->id] < c->loop) { /* written by an earlier loop */
        LLVMValueRef a = LLVMBuildGEP2(c->e.b, em_llvm_mem_type(&c->e, dt), c->buf[v->id], &c->j, 1, "");
        c->vals[v->id] = em_llvm_load(&c->e, dt, a);
        return EM_OK;
    }
    if (!v->def) {
        c->vals[v->id] = em_llvm_load(&c->e, dt, at(c, c->p->node->n_out + v->index, dt, c->j));
        return EM_OK;
    }
    for (int i = 0; i < v->def->n_in; i++) {
        em_status st = value(c, v->def->in[i]);
        if (st != EM_OK) return st;
    }
    return em_llvm_emit_element(&c->e, v->def, c->vals);
}

/* Per-row values of `level` (parameters, constants and elementwise ops:
 * reductions are set after their loop), then the per-row results ready. */
static em_status row_values(emit_ctx *c, int level) {
    const row_plan *p = c->p;
    const em_ir_block *r = p->r;
    for (int i = 0; i < r->n_params; i++) {
        const em_ir_value *v = r->params[i];
        if (level == 0 && p->per_row[v->id])
            c->rowv[v->id] = em_llvm_load(&c->e, v->type.dtype, at(c, p->node->n_out + i, v->type.dtype, NULL));
    }
    for (const em_ir_node *n = r->first; n; n = n->next) {
        const em_ir_value *v = n->out[0];
        if (!p->per_row[v->id] || p->level[v->id] != level || em_op_get(n->op)->kind == EM_KIND_REDUCE)
            continue;
        em_status st = em_llvm_emit_element(&c->e, n, c->rowv); /* (its operands are per-row too) */
        if (st != EM_OK) return st;
    }
    for (int o = 0; o < r->n_results; o++) {
        const em_ir_value *v = r->results[o];
        if (p->per_row[v->id] && p->level[v->id] == level)
            em_llvm_store(&c->e, v->type.dtype, c->rowv[v->id], at(c, o, v->type.dtype, NULL));
    }
    return EM_OK;
}

/* Where result o's element j goes: its row in memory, or the block. */
static LLVMValueRef result_at(emit_ctx *c, int o, em_dtype dt, LLVMValueRef j) {
    if (!c->block_at || o != c->p->streamed) return at(c, o, dt, j);
    return LLVMBuildGEP2(c->e.b, em_llvm_mem_type(&c->e, dt), c->block, &c->k, 1, "");
}

/* Calls the scalar library's function `name`. */
static LLVMValueRef call_library(emit_ctx *c, const char *name, LLVMValueRef *args, unsigned n) {
    LLVMValueRef f = LLVMGetNamedFunction(c->e.mod, name);
    return LLVMBuildCall2(c->e.b, LLVMGlobalGetValueType(f), f, args, n, "");
}

typedef struct {
    LLVMBasicBlockRef body, done, pre;
    LLVMValueRef j;
} counted_loop;

/* for (j = lo; j < hi; j += step): opens the body, where the builder is left. */
static counted_loop loop_open(emit_ctx *c, LLVMValueRef lo, LLVMValueRef hi, const char *name) {
    LLVMBuilderRef b = c->e.b;
    counted_loop l;
    l.pre = LLVMGetInsertBlock(b);
    l.body = LLVMAppendBasicBlockInContext(c->e.ctx, c->fn, name);
    l.done = LLVMAppendBasicBlockInContext(c->e.ctx, c->fn, "loop.done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, lo, hi, ""), l.body, l.done);
    LLVMPositionBuilderAtEnd(b, l.body);
    l.j = LLVMBuildPhi(b, c->e.i64, "j");
    LLVMAddIncoming(l.j, &lo, &l.pre, 1);
    return l;
}

static void loop_close(emit_ctx *c, counted_loop *l, LLVMValueRef hi, int64_t step) {
    LLVMBuilderRef b = c->e.b;
    /* (nsw: an index never overflows, and saying so lets LLVM count the
     * trips of a loop whose bounds are read at run time; the block loop of
     * 16 is then unrolled and its block kept in registers) */
    LLVMValueRef jn = LLVMBuildNSWAdd(b, l->j, em_llvm_i64(&c->e, step), "");
    LLVMBasicBlockRef end = LLVMGetInsertBlock(b);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, jn, hi, ""), l->body, l->done);
    LLVMAddIncoming(l->j, &jn, &end, 1);
    LLVMPositionBuilderAtEnd(b, l->done);
}

/* One loop over the row's elements [lo, hi) of level `level`: its scratch
 * rows and per-element results. */
static em_status element_loop(emit_ctx *c, int level, LLVMValueRef lo, LLVMValueRef hi) {
    const row_plan *p = c->p;
    const em_ir_block *r = p->r;
    counted_loop l = loop_open(c, lo, hi, "loop");
    /* in a block, the loop counts 0..16 (constant bounds: LLVM unrolls it
     * and keeps the block in registers, whatever it knows of the row's
     * length) and the element is the block's first plus that */
    c->k = l.j;
    c->j = c->block_at ? LLVMBuildNSWAdd(c->e.b, c->block_at, l.j, "") : l.j;
    c->loop = level;
    memset(c->vals, 0, (size_t)r->graph->n_values * sizeof *c->vals);
    em_status st = EM_OK;
    for (const em_ir_node *n = r->first; n && st == EM_OK; n = n->next) {
        const em_ir_value *v = n->out[0];
        if (!p->scratch[v->id] || p->level[v->id] != level) continue;
        if ((st = value(c, v)) != EM_OK) break;
        LLVMValueRef a = LLVMBuildGEP2(c->e.b, em_llvm_mem_type(&c->e, v->type.dtype), c->buf[v->id], &c->j, 1, "");
        em_llvm_store(&c->e, v->type.dtype, c->vals[v->id], a);
    }
    /* every result's value before any store: a scratch row kept in an
     * output's row (place_scratch) is read at j before that output's j is
     * written, whichever result reads it */
    for (int o = 0; o < r->n_results && st == EM_OK; o++) {
        const em_ir_value *v = r->results[o];
        if (!p->per_row[v->id] && p->level[v->id] == level) st = value(c, v);
    }
    if (st != EM_OK) return st;
    for (int o = 0; o < r->n_results; o++) {
        const em_ir_value *v = r->results[o];
        if (!p->per_row[v->id] && p->level[v->id] == level)
            em_llvm_store(&c->e, v->type.dtype, c->vals[v->id], result_at(c, o, v->type.dtype, c->j));
    }
    loop_close(c, &l, hi, 1);
    return EM_OK;
}

/* The loops of level `level` over the row's elements. Where the level
 * writes the streamed output: plain stores up to its row's first 64-byte
 * boundary, then blocks of EM_STREAM_F32 elements computed into `block`
 * (a loop of a constant 16 iterations, which O3 turns into vector
 * registers) and streamed, then plain stores for the rest. */
static em_status row_loop(emit_ctx *c, int level) {
    const row_plan *p = c->p;
    const em_ir_block *r = p->r;
    bool work = false;
    for (const em_ir_node *n = r->first; n; n = n->next)
        work |= p->scratch[n->out[0]->id] && p->level[n->out[0]->id] == level;
    for (int o = 0; o < r->n_results; o++)
        work |= !p->per_row[r->results[o]->id] && p->level[r->results[o]->id] == level;
    if (!work) return EM_OK;
    int streamed = p->streamed >= 0 && p->level[r->results[p->streamed]->id] == level ? p->streamed : -1;
    em_llvm_emitter *e = &c->e;
    LLVMValueRef zero = em_llvm_i64(e, 0), n = c->n;
    if (streamed < 0) return element_loop(c, level, zero, n);
    LLVMBuilderRef b = e->b;
    LLVMValueRef row_args[2] = {at(c, streamed, EM_DTYPE_F32, NULL), n};
    LLVMValueRef head = call_library(c, "em_scalar_stream_head_f32", row_args, 2);
    LLVMValueRef blocks = LLVMBuildSDiv(b, LLVMBuildNSWSub(b, n, head, ""), em_llvm_i64(e, EM_STREAM_F32), "");
    LLVMValueRef tail = LLVMBuildNSWAdd(b, head, LLVMBuildNSWMul(b, blocks, em_llvm_i64(e, EM_STREAM_F32), ""), "");
    em_status st = element_loop(c, level, zero, head);
    if (st != EM_OK) return st;
    counted_loop l = loop_open(c, head, tail, "blocks");
    c->block_at = l.j;
    st = element_loop(c, level, zero, em_llvm_i64(e, EM_STREAM_F32));
    c->block_at = NULL;
    if (st != EM_OK) return st;
    LLVMValueRef block_args[2] = {at(c, streamed, EM_DTYPE_F32, l.j), c->block};
    call_library(c, "em_scalar_stream_block_f32", block_args, 2);
    loop_close(c, &l, tail, EM_STREAM_F32);
    return element_loop(c, level, tail, n);
}

/* The library fold (ops_fold.h, inlined from the scalar library) that
 * computes reduction n of a contiguous row in double, or NULL where the row
 * kernel calls em_reduce_row; *mean: divide the fold by the row's length. */
static LLVMValueRef library_fold(const emit_ctx *c, const em_ir_node *n, bool *mean) {
    const em_ir_value *x = n->in[0], *v = n->out[0];
    *mean = n->op == EM_OP_MEAN;
    if (x->type.dtype != EM_DTYPE_F32 || v->type.dtype != EM_DTYPE_F32 || n->n_out != 1) return NULL;
    const char *name = n->op == EM_OP_SUM || n->op == EM_OP_MEAN ? "em_scalar_row_sum_f32"
                       : n->op == EM_OP_AMAX                     ? "em_scalar_row_max_f32"
                       : n->op == EM_OP_AMIN                     ? "em_scalar_row_min_f32"
                                                                 : NULL;
    return name ? LLVMGetNamedFunction(c->e.mod, name) : NULL;
}

/* n's attributes as a private constant of the module: em_attrs is plain
 * data, and a copy in the code keeps it free of this process's addresses. */
static LLVMValueRef attrs_constant(em_llvm_emitter *e, const em_attrs *a) {
    LLVMValueRef init = LLVMConstStringInContext(e->ctx, (const char *)a, (unsigned)sizeof *a, 1);
    LLVMValueRef g = LLVMAddGlobal(e->mod, LLVMTypeOf(init), "em.attrs");
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetAlignment(g, 8);
    return g;
}

/* After loop `level`: each reduction of a value of that level over the row,
 * by the eager kernels' code: the shared folds of ops_fold.h inline, the
 * rest through em_reduce_row. */
static void row_reductions(emit_ctx *c, int level) {
    const row_plan *p = c->p;
    em_llvm_emitter *e = &c->e;
    LLVMTypeRef i32 = e->i32;
    LLVMTypeRef args[7] = {i32, e->ptr, i32, e->ptr, e->i64, i32, e->ptr};
    LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), args, 7, 0);
    /* by name: the JIT defines it (jit.c), as a linker would */
    LLVMValueRef callee = LLVMGetNamedFunction(e->mod, "em_reduce_row");
    if (!callee) callee = LLVMAddFunction(e->mod, "em_reduce_row", fty);
    for (const em_ir_node *n = p->r->first; n; n = n->next) {
        const em_ir_value *x = n->in[0], *v = n->out[0];
        if (em_op_get(n->op)->kind != EM_KIND_REDUCE || p->level[x->id] != level) continue;
        LLVMValueRef row = x->def ? c->buf[x->id] : at(c, p->node->n_out + x->index, x->type.dtype, NULL);
        bool mean;
        LLVMValueRef fold = library_fold(c, n, &mean);
        if (fold) { /* as em_reduce_row's finish: a mean divides in double, then rounds */
            LLVMValueRef fa[2] = {row, c->n};
            LLVMValueRef d = LLVMBuildCall2(e->b, LLVMGlobalGetValueType(fold), fold, fa, 2, "");
            if (mean) d = LLVMBuildFDiv(e->b, d, LLVMBuildSIToFP(e->b, c->n, e->f64, ""), "");
            c->rowv[v->id] = LLVMBuildFPTrunc(e->b, d, e->f32, "");
            continue;
        }
        LLVMValueRef av[7] = {
            LLVMConstInt(i32, (unsigned long long)n->op, 0),
            attrs_constant(e, EM_IR_ATTRS(n)),
            LLVMConstInt(i32, (unsigned long long)x->type.dtype, 0),
            row,
            c->n,
            LLVMConstInt(i32, (unsigned long long)v->type.dtype, 0),
            c->red_out,
        };
        LLVMBuildCall2(e->b, fty, callee, av, 7, "");
        c->rowv[v->id] = em_llvm_load(e, v->type.dtype, c->red_out);
    }
}

static em_status emit_rows(emit_ctx *c) {
    const row_plan *p = c->p;
    em_llvm_emitter *e = &c->e;
    LLVMBuilderRef b = e->b;
    LLVMValueRef begin = LLVMGetParam(c->fn, 0), end = LLVMGetParam(c->fn, 1), ptrs = LLVMGetParam(c->fn, 2);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->ctx, c->fn, "entry");
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->ctx, c->fn, "row");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, c->fn, "row.body");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->ctx, c->fn, "exit");

    /* entry: operand pointers, the row length, scratch rows */
    em_llvm_emitter_enter(e, c->fn, entry, p->n_ops);
    LLVMPositionBuilderAtEnd(b, entry);
    for (int k = 0; k < p->n_ops; k++) {
        LLVMValueRef idx = em_llvm_i64(e, k);
        c->base[k] = LLVMBuildLoad2(b, e->ptr, LLVMBuildGEP2(b, e->ptr, ptrs, &idx, 1, ""), "");
    }
    c->n = em_llvm_size(e, p->n);
    for (const em_ir_node *n = p->r->first; n; n = n->next) {
        const em_ir_value *v = n->out[0];
        if (!p->scratch[v->id] || p->home[v->id] >= 0) continue;
        LLVMTypeRef mt = em_llvm_mem_type(e, v->type.dtype);
        c->buf[v->id] = e->sizes ? LLVMBuildArrayAlloca(b, mt, c->n, "scratch")
                                 : LLVMBuildAlloca(b, LLVMArrayType2(mt, (uint64_t)p->n), "scratch");
        LLVMSetAlignment(c->buf[v->id], 64);
    }
    if (p->streamed >= 0) {
        c->block = LLVMBuildAlloca(b, LLVMArrayType2(e->f32, EM_STREAM_F32), "block");
        LLVMSetAlignment(c->block, 64);
    }
    c->red_out = LLVMBuildAlloca(b, e->i64, "reduced");
    LLVMBuildBr(b, head);

    /* row: r = phi; stop at end */
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef row = LLVMBuildPhi(b, e->i64, "r");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row, end, ""), body, exit);

    /* row.body: the operands' row offsets, then the loops */
    LLVMPositionBuilderAtEnd(b, body);
    for (int k = 0; k < p->n_ops; k++) c->off[k] = em_llvm_i64(e, 0);
    em_llvm_emit_offsets(e, p->outer, (const int64_t(*)[EM_MAX_DIMS])p->ostr, p->n_ops, p->nd_outer, row, c->off);
    for (const em_ir_node *n = p->r->first; n; n = n->next) {
        const em_ir_value *v = n->out[0];
        if (p->home[v->id] >= 0) c->buf[v->id] = at(c, p->home[v->id], v->type.dtype, NULL);
    }
    em_status st = row_values(c, 0);
    for (int level = 0; level <= p->max_loop && st == EM_OK; level++) {
        if ((st = row_loop(c, level)) != EM_OK) break;
        row_reductions(c, level);
        st = row_values(c, level + 1);
    }
    if (st != EM_OK) return st;
    LLVMValueRef next = LLVMBuildNSWAdd(b, row, em_llvm_i64(e, 1), "");
    LLVMBasicBlockRef last = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, head);
    LLVMAddIncoming(row, &begin, &entry, 1);
    LLVMAddIncoming(row, &next, &last, 1);

    LLVMPositionBuilderAtEnd(b, exit);
    if (p->streamed >= 0) call_library(c, "em_scalar_stream_fence", NULL, 0); /* before the pool's signal */
    LLVMBuildRetVoid(b);
    return EM_OK;
}

em_status em_llvm_emit_row_kernel(LLVMModuleRef mod, const char *name, const em_ir_node *node,
                                  int64_t (*const in_strides)[EM_MAX_DIMS], em_llvm_sizes *sizes) {
    row_plan p;
    em_status st = plan_rows(node, in_strides, &p);
    if (st != EM_OK) return st;
    emit_ctx c;
    memset(&c, 0, sizeof c);
    c.p = &p;
    size_t nv = (size_t)node->region->graph->n_values;
    c.rowv = calloc(nv, sizeof *c.rowv);
    c.vals = calloc(nv, sizeof *c.vals);
    c.buf = calloc(nv, sizeof *c.buf);
    em_llvm_emitter_init(&c.e, mod, sizes);
    if (c.rowv && c.vals && c.buf) {
        c.fn = em_llvm_kernel_function(&c.e, name);
        st = emit_rows(&c);
        if (st != EM_OK) LLVMDeleteFunction(c.fn);
    } else {
        st = em_error(EM_ERR_NOMEM, "out of memory");
    }
    LLVMDisposeBuilder(c.e.b);
    free(c.rowv);
    free(c.vals);
    free(c.buf);
    plan_free(&p);
    return st;
}
