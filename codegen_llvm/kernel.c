/*
 * kernel.c - a fused node's region -> one LLVM function.
 *
 *   void kernel(i64 begin, i64 end, ptr ptrs)   ; ptrs: outputs, then inputs
 *
 * The kernel walks elements [begin, end) of the iteration space (the first
 * result's shape, row-major) so the executor can split it across threads.
 * The space is coalesced at compile time exactly like the eager iterator
 * does (size-1 dims dropped, contiguous neighbours merged), leaving rows of
 * an innermost dim. Per row, the operands' offsets come from dividing the
 * row number by constant dim sizes; the inner loop is a plain counted loop
 * whose operand strides are constants (usually 0 or 1), which the loop
 * vectoriser turns into SIMD code.
 *
 * The loop body evaluates the region per element: parameters are loads
 * (through broadcast strides), `full` constants are immediates, `expand` is
 * the identity (broadcasting lives in the strides), and every elementwise op
 * is a call to em_scalar_<op>_<dtype> from the linked scalar library, which
 * inlines: the same definition the eager kernels run.
 *
 * Compiled for sizes read at run time (dynamic shapes, em_llvm_size), the
 * same loops read every size and outer stride from a table the launch
 * passes after the operands, loaded once in the entry block; strides of 0
 * and +-1 in the inner loop stay constants, so it still vectorises. The
 * module then depends only on the graph's structure, and another size of
 * the same graph gets the same code (docs/dynamic_shapes.md).
 *
 * A GEMM epilogue (a region holding a matmul: the fuse pass explains
 * when) compiles to the same kind of kernel over the product's
 * elements: the launch has BLAS write the product into result 0's memory
 * block by block (em_matmul_epilogue) and runs the kernel on each block
 * right after, reading the product's element where it then writes result
 * 0's. The matmul's operands are not read by the kernel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_internal.h"

typedef em_llvm_emitter emitter;

/* Is region parameter p read only by the node's matmul (not per element)? */
static bool gemm_operand_only(const em_ir_node *node, const em_ir_value *p) {
    const em_ir_node *mm = em_llvm_gemm_of(node);
    if (!mm) return false;
    for (const em_ir_node *n = node->region->first; n; n = n->next)
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] == p && n != mm) return false;
    for (int i = 0; i < node->region->n_results; i++)
        if (node->region->results[i] == p) return false;
    return true;
}

/* Emits the region's ops for one element. vals[] maps value ids to registers;
 * params already hold their loaded values (and a matmul's result its
 * element of the product). */
static em_status emit_body(const emitter *e, const em_ir_block *r, LLVMValueRef *vals) {
    for (const em_ir_node *n = r->first; n; n = n->next) {
        if (n->op == EM_OP_MATMUL) continue;
        em_status st = em_llvm_emit_element(e, n, vals);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* Iteration geometry after coalescing: n_ops operands (outputs, then inputs). */
typedef struct {
    int nd, n_ops;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[80][EM_MAX_DIMS];
} geometry;

static em_status plan(const em_ir_node *node, int64_t (*const in_strides)[EM_MAX_DIMS],
                      geometry *g) {
    const em_type *it = &node->out[0]->type;
    int n_ops = node->n_out + node->n_in, nd = it->ndim;
    if (n_ops > 80) return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: kernel with %d operands", n_ops);
    int64_t contig[EM_MAX_DIMS];
    em_contiguous_strides(it->shape, nd, contig);
    for (int k = 0; k < n_ops; k++) {
        bool is_out = k < node->n_out;
        const em_type *t = is_out ? &node->out[k]->type : &node->in[k - node->n_out]->type;
        if (!is_out && gemm_operand_only(node, node->region->params[k - node->n_out])) {
            memset(g->strides[k], 0, sizeof g->strides[k]); /* (never loaded) */
            continue;
        }
        em_broadcast_strides(t->shape, is_out ? contig : in_strides[k - node->n_out], t->ndim, nd,
                             g->strides[k]);
    }
    memcpy(g->shape, it->shape, sizeof g->shape);
    g->nd = em_coalesce_dims(g->shape, nd, g->strides, n_ops);
    if (g->nd == 0) { /* a single element */
        g->shape[0] = 1;
        for (int k = 0; k < n_ops; k++) g->strides[k][0] = 0;
        g->nd = 1;
    }
    g->n_ops = n_ops;
    return EM_OK;
}

/* Transposed operands: when one operand walks the innermost dim with a
 * large stride and the next dim with stride +-1 (x.t() * 2), a row of the
 * result reads a new cache line per element, and 1024 of them no longer
 * fit in L1 by the next row. The kernel then walks TILE x TILE tiles of the
 * two innermost dims, as the eager iterator does (runtime/cpu/iter.c): a
 * tile's lines stay in L1 across its rows. Compiled x.t() * 2 over
 * 1024x1024 took 5.4 ms on one thread untiled, against eager's 1.8.
 * LLVM vectorises a tile's rows with scatters (and a stepped operand's
 * rows with gathers). Scalar loops were faster for a multiply (0.5 ms)
 * but 2-10x slower for exp or tanh, whose vector forms then go unused;
 * staging strided operands through a contiguous buffer would serve both
 * (not done: bench/RESULTS.md). */
#define TILE EM_LLVM_TILE

static bool tiled(const geometry *g) {
    if (g->nd < 2) return false;
    int last = g->nd - 1;
    if (g->shape[last] < TILE || g->shape[last - 1] < TILE) return false;
    for (int k = 0; k < g->n_ops; k++) {
        int64_t inner = g->strides[k][last], next = g->strides[k][last - 1];
        if ((inner > 16 || inner < -16) && (next == 1 || next == -1)) return true;
    }
    return false;
}

static int64_t tiles_of(const geometry *g) {
    int last = g->nd - 1;
    int64_t outer = 1;
    for (int d = 0; d < last - 1; d++) outer *= g->shape[d];
    return outer * ((g->shape[last - 1] + TILE - 1) / TILE) * ((g->shape[last] + TILE - 1) / TILE);
}

bool em_llvm_split_is_tiled(const em_ir_node *node, const em_llvm_split *split) {
    if (em_llvm_is_row_kernel(node) || em_llvm_gemm_of(node)) return false;
    const em_type *t = &node->out[0]->type;
    return split->units != em_shape_numel(t->shape, t->ndim); /* (units are tiles) */
}

em_status em_llvm_kernel_split(const em_ir_node *node, int64_t (*const in_strides)[EM_MAX_DIMS],
                               em_llvm_split *split) {
    const em_ir_node *mm = em_llvm_gemm_of(node);
    if (mm) {
        em_dtype dt = mm->out[0]->type.dtype;
        if (em_llvm_is_row_kernel(node))
            return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: a matmul and a reduction in one kernel");
        if ((dt != EM_DTYPE_F32 && dt != EM_DTYPE_F64) || !em_type_eq(&mm->out[0]->type, &node->out[0]->type))
            return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: GEMM epilogue: the first result must have the "
                                                    "product's type, float32 or float64");
    }
    if (em_llvm_is_row_kernel(node)) return em_llvm_row_split(node, in_strides, split);
    if (node->n_out + node->n_in > 80)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: kernel with %d operands", node->n_out + node->n_in);
    const em_type *t = &node->out[0]->type;
    split->units = em_shape_numel(t->shape, t->ndim);
    split->grain = 16384;
    if (!mm) {
        geometry g = {0};
        em_status st = plan(node, in_strides, &g);
        if (st != EM_OK) return st;
        if (tiled(&g)) { /* units are tiles */
            split->units = tiles_of(&g);
            split->grain = 16384 / (TILE * TILE);
        }
    }
    return EM_OK;
}

/* Emits, at the builder, the inner loop over j in [j0, j1) of the
 * innermost dim: per element the operands' addresses (off[k] + j times the
 * innermost stride), the loads, the region and the stores; the builder ends
 * in `after`. The loop's blocks go before `after`. */
static em_status emit_inner(emitter *e, LLVMValueRef fn, const em_ir_node *node, const geometry *g,
                            LLVMValueRef *base, LLVMValueRef *off, LLVMValueRef j0, LLVMValueRef j1,
                            LLVMBasicBlockRef after, LLVMValueRef *vals) {
    LLVMBuilderRef b = e->b;
    const em_ir_block *r = node->region;
    int last = g->nd - 1;
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->ctx, fn, "inner");
    LLVMMoveBasicBlockBefore(loop, after);
    LLVMBasicBlockRef before = LLVMGetInsertBlock(b);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j0, j1, ""), loop, after);

    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef j = LLVMBuildPhi(b, e->i64, "j");
    LLVMValueRef addr[80];
    for (int k = 0; k < g->n_ops; k++) {
        bool is_out = k < node->n_out;
        em_dtype dt = is_out ? node->out[k]->type.dtype : node->in[k - node->n_out]->type.dtype;
        LLVMValueRef ix = off[k];
        if (g->strides[k][last])
            ix = LLVMBuildAdd(b, ix, LLVMBuildMul(b, j, em_llvm_stride(e, g->strides[k][last]), ""), "");
        addr[k] = LLVMBuildGEP2(b, em_llvm_mem_type(e, dt), base[k], &ix, 1, "");
        if (is_out || gemm_operand_only(node, r->params[k - node->n_out])) continue;
        vals[r->params[k - node->n_out]->id] = em_llvm_load(e, dt, addr[k]);
    }
    const em_ir_node *mm = em_llvm_gemm_of(node);
    if (mm) vals[mm->out[0]->id] = em_llvm_load(e, mm->out[0]->type.dtype, addr[0]);
    em_status st = emit_body(e, r, vals);
    if (st != EM_OK) return st;
    for (int k = 0; k < node->n_out; k++)
        em_llvm_store(e, node->out[k]->type.dtype, vals[r->results[k]->id], addr[k]);
    LLVMValueRef jn = LLVMBuildNSWAdd(b, j, em_llvm_i64(e, 1), ""); /* (nsw: indices never overflow) */
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(b);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, jn, j1, ""), loop, after);
    LLVMAddIncoming(j, &j0, &before, 1);
    LLVMAddIncoming(j, &jn, &loop_end, 1);
    LLVMPositionBuilderAtEnd(b, after);
    return EM_OK;
}

static LLVMValueRef smin(emitter *e, LLVMValueRef a, LLVMValueRef b2) {
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b2, ""), a, b2, "");
}

/* Rows: elements [begin, end) of the row-major space, row by row, each
 * row's [j0, j1) clipped to the range. */
static em_status emit_rows(emitter *e, LLVMValueRef fn, const em_ir_node *node, const geometry *g,
                           LLVMValueRef *base, LLVMValueRef *vals) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef begin = LLVMGetParam(fn, 0), end = LLVMGetParam(fn, 1);
    LLVMBasicBlockRef row_head = LLVMAppendBasicBlockInContext(e->ctx, fn, "row");
    LLVMBasicBlockRef row_body = LLVMAppendBasicBlockInContext(e->ctx, fn, "row.body");
    LLVMBasicBlockRef latch = LLVMAppendBasicBlockInContext(e->ctx, fn, "row.next");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->ctx, fn, "exit");
    int last = g->nd - 1;
    LLVMValueRef inner = em_llvm_size(e, g->shape[last]);
    LLVMValueRef row0 = LLVMBuildSDiv(b, begin, inner, "row0");
    LLVMBasicBlockRef entry = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, row_head);

    /* row: r = phi; stop when the row starts at or after end */
    LLVMPositionBuilderAtEnd(b, row_head);
    LLVMValueRef row = LLVMBuildPhi(b, e->i64, "r");
    LLVMValueRef row_start = LLVMBuildMul(b, row, inner, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row_start, end, ""), row_body, exit);

    /* row.body: clip [j0, j1) to [begin, end); operand offsets of the row */
    LLVMPositionBuilderAtEnd(b, row_body);
    LLVMValueRef lo = LLVMBuildSub(b, begin, row_start, "");
    LLVMValueRef j0 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, lo, em_llvm_i64(e, 0), ""), lo,
                                      em_llvm_i64(e, 0), "j0");
    LLVMValueRef j1 = smin(e, LLVMBuildSub(b, end, row_start, ""), inner);
    LLVMValueRef off[80];
    for (int k = 0; k < g->n_ops; k++) off[k] = em_llvm_i64(e, 0);
    em_llvm_emit_offsets(e, g->shape, (const int64_t(*)[EM_MAX_DIMS])g->strides, g->n_ops, last, row, off);
    em_status st = emit_inner(e, fn, node, g, base, off, j0, j1, latch, vals);
    if (st != EM_OK) return st;

    /* row.next */
    LLVMValueRef rn = LLVMBuildNSWAdd(b, row, em_llvm_i64(e, 1), "");
    LLVMBuildBr(b, row_head);
    LLVMAddIncoming(row, &row0, &entry, 1);
    LLVMAddIncoming(row, &rn, &latch, 1);
    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);
    return EM_OK;
}

/* Tiles: tiles [begin, end) of TILE x TILE over the two innermost dims
 * (t = outer position, tile row, tile column), each row of a tile an inner
 * loop (see tiled). */
static em_status emit_tiles(emitter *e, LLVMValueRef fn, const em_ir_node *node, const geometry *g,
                            LLVMValueRef *base, LLVMValueRef *vals) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef begin = LLVMGetParam(fn, 0), end = LLVMGetParam(fn, 1);
    LLVMBasicBlockRef tile_head = LLVMAppendBasicBlockInContext(e->ctx, fn, "tile");
    LLVMBasicBlockRef tile_body = LLVMAppendBasicBlockInContext(e->ctx, fn, "tile.body");
    LLVMBasicBlockRef row_head = LLVMAppendBasicBlockInContext(e->ctx, fn, "row");
    LLVMBasicBlockRef row_body = LLVMAppendBasicBlockInContext(e->ctx, fn, "row.body");
    LLVMBasicBlockRef row_latch = LLVMAppendBasicBlockInContext(e->ctx, fn, "row.next");
    LLVMBasicBlockRef tile_latch = LLVMAppendBasicBlockInContext(e->ctx, fn, "tile.next");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->ctx, fn, "exit");
    int last = g->nd - 1;
    LLVMValueRef rows = em_llvm_size(e, g->shape[last - 1]), cols = em_llvm_size(e, g->shape[last]);
    LLVMValueRef tsize = em_llvm_i64(e, TILE), tm1 = em_llvm_i64(e, TILE - 1);
    LLVMValueRef trows = LLVMBuildSDiv(b, LLVMBuildAdd(b, rows, tm1, ""), tsize, "trows");
    LLVMValueRef tcols = LLVMBuildSDiv(b, LLVMBuildAdd(b, cols, tm1, ""), tsize, "tcols");
    LLVMBasicBlockRef entry = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, tile_head);

    LLVMPositionBuilderAtEnd(b, tile_head);
    LLVMValueRef t = LLVMBuildPhi(b, e->i64, "t");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t, end, ""), tile_body, exit);

    /* tile.body: the tile's corner and extent, the outer dims' offsets */
    LLVMPositionBuilderAtEnd(b, tile_body);
    LLVMValueRef tc = LLVMBuildSRem(b, t, tcols, ""), q = LLVMBuildSDiv(b, t, tcols, "");
    LLVMValueRef tr = LLVMBuildSRem(b, q, trows, ""), outer = LLVMBuildSDiv(b, q, trows, "outer");
    LLVMValueRef r0 = LLVMBuildNSWMul(b, tr, tsize, "r0"), c0 = LLVMBuildNSWMul(b, tc, tsize, "c0");
    LLVMValueRef r1 = smin(e, LLVMBuildNSWAdd(b, r0, tsize, ""), rows);
    LLVMValueRef c1 = smin(e, LLVMBuildNSWAdd(b, c0, tsize, ""), cols);
    LLVMValueRef toff[80];
    for (int k = 0; k < g->n_ops; k++) toff[k] = em_llvm_i64(e, 0);
    em_llvm_emit_offsets(e, g->shape, (const int64_t(*)[EM_MAX_DIMS])g->strides, g->n_ops, last - 1, outer,
                         toff);
    LLVMBuildBr(b, row_head);

    LLVMPositionBuilderAtEnd(b, row_head);
    LLVMValueRef r = LLVMBuildPhi(b, e->i64, "r");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, r, r1, ""), row_body, tile_latch);

    LLVMPositionBuilderAtEnd(b, row_body);
    LLVMValueRef off[80];
    for (int k = 0; k < g->n_ops; k++) {
        off[k] = toff[k];
        if (g->strides[k][last - 1])
            off[k] = LLVMBuildAdd(b, off[k], LLVMBuildMul(b, r, em_llvm_stride(e, g->strides[k][last - 1]), ""), "");
    }
    em_status st = emit_inner(e, fn, node, g, base, off, c0, c1, row_latch, vals);
    if (st != EM_OK) return st;

    LLVMValueRef rn = LLVMBuildNSWAdd(b, r, em_llvm_i64(e, 1), "");
    LLVMBuildBr(b, row_head);
    LLVMAddIncoming(r, &r0, &tile_body, 1);
    LLVMAddIncoming(r, &rn, &row_latch, 1);

    LLVMPositionBuilderAtEnd(b, tile_latch);
    LLVMValueRef tn = LLVMBuildNSWAdd(b, t, em_llvm_i64(e, 1), "");
    LLVMBuildBr(b, tile_head);
    LLVMAddIncoming(t, &begin, &entry, 1);
    LLVMAddIncoming(t, &tn, &tile_latch, 1);

    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);
    return EM_OK;
}

em_status em_llvm_emit_kernel(LLVMModuleRef mod, const char *name, const em_ir_node *node,
                              int64_t (*const in_strides)[EM_MAX_DIMS], const int *shares, em_llvm_sizes *sizes) {
    if (em_llvm_is_row_kernel(node)) return em_llvm_emit_row_kernel(mod, name, node, in_strides, sizes);
    geometry g = {0};
    em_status st = plan(node, in_strides, &g);
    if (st != EM_OK) return st;
    emitter e;
    em_llvm_emitter_init(&e, mod, sizes);
    LLVMValueRef fn = em_llvm_kernel_function(&e, name);
    LLVMValueRef ptrs = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e.ctx, fn, "entry");
    em_llvm_emitter_enter(&e, fn, entry, g.n_ops);
    LLVMBuilderRef b = e.b;
    LLVMValueRef base[80], *vals = calloc((size_t)node->region->graph->n_values, sizeof *vals);
    if (!vals) {
        LLVMDisposeBuilder(b);
        return em_error(EM_ERR_NOMEM, "out of memory");
    }

    /* entry: operand base pointers (inputs first: an output written in
     * place takes its input's pointer itself, so LLVM sees the exact
     * aliasing and vectorises without a runtime overlap check) */
    LLVMPositionBuilderAtEnd(b, entry);
    for (int k = g.n_ops - 1; k >= 0; k--) {
        if (k < node->n_out && shares && shares[k] >= 0) {
            base[k] = base[node->n_out + shares[k]];
            continue;
        }
        LLVMValueRef idx = em_llvm_i64(&e, k);
        LLVMValueRef slot = LLVMBuildGEP2(b, e.ptr, ptrs, &idx, 1, "");
        base[k] = LLVMBuildLoad2(b, e.ptr, slot, "");
    }
    if (!em_llvm_gemm_of(node) && tiled(&g))
        st = emit_tiles(&e, fn, node, &g, base, vals);
    else
        st = emit_rows(&e, fn, node, &g, base, vals);
    free(vals);
    LLVMDisposeBuilder(b);
    if (st != EM_OK) LLVMDeleteFunction(fn);
    return st;
}
