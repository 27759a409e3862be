/*
 * graph.c - a whole graph -> one LLVM function, so a compiled call is one
 * C call:
 *
 *   i32 graph(ptr in, ptr out, ptr run)   ; em_llvm_graph_fn
 *
 * The function runs the nodes in the plan's order (exec/plan.c), each as one
 * call: a compiled kernel through the backend's launcher, a fused node too
 * small to be worth a kernel op by op, any other node its eager kernel
 * (em_op_run_planned: no inference, no dispatch, results written into the
 * run's arena where the memory plan put them). Between the calls it keeps
 * values in frame slots, compares each value guard right after the node
 * computing it, releases each value right after its last use, and at the
 * end applies the effects (write-backs, .grad updates) and hands out the
 * outputs. A failing call stops the run: every value still held is
 * released and the status returned, nothing written.
 *
 * The code calls the runtime (program.c's callees) and refers to the
 * graph's nodes, kernels, value guards and effects through a table of
 * addresses it is handed at run time (run->refs), never by an address of
 * its own: the machine code depends on the graph alone, as a compile cache
 * or a shared object needs. What each entry stands for is recorded as an
 * em_llvm_ref, which the program resolves in whichever process runs it.
 * It is marked optnone: it is straight-line calls and loads, which O3
 * would not speed up, and big graphs would pay for trying.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_internal.h"

/* ---- emitting ---- */

typedef struct {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef i32, i64, ptr, vd;
    LLVMTypeRef t_node, t_check, t_unary, t_release_all, t_effects; /* the callees' types */
    LLVMValueRef fn, in, out, run, slots, args, outs, res, status, planned, refs_base;
    em_llvm_ref *refs; /* what each entry of the table the code reads stands for */
    int n_refs, cap_refs;
    bool failed;       /* out of memory growing refs */
    LLVMBasicBlockRef fail;
    const em_llvm_plan *plan;
    const em_ir_graph *g;
} emitter;

/* The address ref stands for, as the code reads it: its entry of the
 * table (one per address). */
static LLVMValueRef addr(emitter *e, em_llvm_ref_kind kind, int index) {
    int i = 0;
    while (i < e->n_refs && (e->refs[i].kind != (int32_t)kind || e->refs[i].index != index)) i++;
    if (i == e->n_refs) {
        if (e->n_refs == e->cap_refs) {
            int cap = e->cap_refs ? 2 * e->cap_refs : 64;
            em_llvm_ref *r = realloc(e->refs, (size_t)cap * sizeof *r);
            if (!r) {
                e->failed = true;
                return LLVMConstNull(e->ptr);
            }
            e->refs = r;
            e->cap_refs = cap;
        }
        e->refs[e->n_refs++] = (em_llvm_ref){(int32_t)kind, index};
    }
    LLVMValueRef idx = LLVMConstInt(e->i32, (unsigned long long)i, 0);
    return LLVMBuildLoad2(e->b, e->ptr, LLVMBuildGEP2(e->b, e->ptr, e->refs_base, &idx, 1, ""), "");
}

/* A call of runtime function `callee`, through its table entry. */
static LLVMValueRef call(emitter *e, LLVMTypeRef type, em_llvm_callee callee, LLVMValueRef *args, int n) {
    return LLVMBuildCall2(e->b, type, addr(e, EM_REF_CALLEE, callee), args, (unsigned)n, "");
}

static LLVMValueRef i32c(const emitter *e, int v) { return LLVMConstInt(e->i32, (unsigned long long)v, 1); }

/* &array[i] for an array of pointers. */
static LLVMValueRef at(const emitter *e, LLVMValueRef array, int i) {
    LLVMValueRef idx = i32c(e, i);
    return LLVMBuildGEP2(e->b, e->ptr, array, &idx, 1, "");
}

static LLVMValueRef load(const emitter *e, LLVMValueRef p) { return LLVMBuildLoad2(e->b, e->ptr, p, ""); }

/* The tensor holding value v now: a graph input, or its frame slot. */
static LLVMValueRef value(const emitter *e, const em_ir_value *v) {
    if (!v->def) return load(e, at(e, e->in, v->index));
    return load(e, at(e, e->slots, e->plan->slot[v->id]));
}

/* Goes on when status st is EM_OK, else to the failure exit. */
static void check_status(emitter *e, LLVMValueRef st) {
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "ok");
    LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "bad");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntNE, st, i32c(e, 0), ""), bad, ok);
    LLVMPositionBuilderAtEnd(e->b, bad);
    LLVMBuildStore(e->b, st, e->status);
    LLVMBuildBr(e->b, e->fail);
    LLVMPositionBuilderAtEnd(e->b, ok);
}

/* The value guards due at position k + 1 (k = -1: on entry). */
static void emit_checks(emitter *e, const em_run_spec *spec, int k) {
    const em_llvm_plan *p = e->plan;
    for (int j = p->check_start[k + 1]; j < p->check_start[k + 2]; j++) {
        int r = p->check_ids[j];
        LLVMValueRef args[4] = {value(e, e->g->body->results[r]), addr(e, EM_REF_EXPECTED, r),
                                addr(e, EM_REF_GRAPH, 0), i32c(e, r)};
        check_status(e, call(e, e->t_check, EM_CALLEE_CHECK, args, 4));
    }
}

static void emit_node(emitter *e, int k, const int *kernel_of, const int *op_donation) {
    const em_llvm_plan *p = e->plan;
    const em_ir_node *n = p->order[k];
    for (int i = 0; i < n->n_in; i++) LLVMBuildStore(e->b, value(e, n->in[i]), at(e, e->args, i));
    for (int o = 0; o < n->n_out; o++) {
        int buf = p->buffer[n->out[o]->id];
        LLVMValueRef t = buf >= 0 ? load(e, at(e, e->planned, buf)) : LLVMConstNull(e->ptr);
        LLVMBuildStore(e->b, t, at(e, e->outs, o));
    }
    LLVMValueRef st;
    if (kernel_of[n->id] >= 0) {
        LLVMValueRef args[4] = {addr(e, EM_REF_KERNEL, kernel_of[n->id]), e->args, e->outs, e->run};
        st = call(e, LLVMFunctionType(e->i32, (LLVMTypeRef[]){e->ptr, e->ptr, e->ptr, e->ptr}, 4, 0),
                  EM_CALLEE_LAUNCH, args, 4);
    } else if (op_donation && op_donation[n->id] >= 0) {
        LLVMValueRef args[5] = {addr(e, EM_REF_NODE, n->id), e->args, e->outs, e->run, i32c(e, op_donation[n->id])};
        st = call(e, LLVMFunctionType(e->i32, (LLVMTypeRef[]){e->ptr, e->ptr, e->ptr, e->ptr, e->i32}, 5, 0),
                  EM_CALLEE_OP_DONATING, args, 5);
    } else {
        LLVMValueRef args[3] = {addr(e, EM_REF_NODE, n->id), e->args, e->outs};
        st = call(e, e->t_node, n->region ? EM_CALLEE_REGION : EM_CALLEE_OP, args, 3);
    }
    check_status(e, st);
    for (int o = 0; o < n->n_out; o++)
        LLVMBuildStore(e->b, load(e, at(e, e->outs, o)), at(e, e->slots, p->slot[n->out[o]->id]));
}

static void emit_releases(emitter *e, int k) {
    const em_llvm_plan *p = e->plan;
    for (int j = p->release_start[k]; j < p->release_start[k + 1]; j++) {
        LLVMValueRef slot = at(e, e->slots, p->slot[p->release_ids[j]]), t = load(e, slot);
        call(e, e->t_unary, EM_CALLEE_RELEASE, &t, 1);
        LLVMBuildStore(e->b, LLVMConstNull(e->ptr), slot);
    }
}

/* The effects, then the outputs; the frame's remaining values released. */
static void emit_epilogue(emitter *e, const em_run_spec *spec) {
    const em_ir_block *b = e->g->body;
    for (int r = 0; r < b->n_results; r++) LLVMBuildStore(e->b, value(e, b->results[r]), at(e, e->res, r));
    if (spec && spec->n_effects) {
        LLVMValueRef args[4] = {addr(e, EM_REF_EFFECTS, 0), i32c(e, spec->n_effects), e->in, e->res};
        check_status(e, call(e, e->t_effects, EM_CALLEE_EFFECTS, args, 4));
    }
    int n_out = spec ? spec->n_outputs : b->n_results;
    for (int i = 0; i < n_out; i++) {
        LLVMValueRef t = load(e, at(e, e->res, i));
        call(e, e->t_unary, EM_CALLEE_RETAIN, &t, 1);
        LLVMBuildStore(e->b, t, at(e, e->out, i));
    }
    LLVMValueRef args[2] = {e->slots, i32c(e, e->plan->n_slots)};
    call(e, e->t_release_all, EM_CALLEE_RELEASE_ALL, args, 2);
    LLVMBuildRet(e->b, i32c(e, 0));
}

static void emit_failure_exit(emitter *e) {
    LLVMPositionBuilderAtEnd(e->b, e->fail);
    LLVMValueRef args[2] = {e->slots, i32c(e, e->plan->n_slots)};
    call(e, e->t_release_all, EM_CALLEE_RELEASE_ALL, args, 2);
    LLVMBuildRet(e->b, LLVMBuildLoad2(e->b, e->i32, e->status, ""));
}

static LLVMValueRef array(emitter *e, int n, const char *name) {
    return LLVMBuildArrayAlloca(e->b, e->ptr, LLVMConstInt(e->i64, (unsigned long long)(n > 0 ? n : 1), 0), name);
}

em_status em_llvm_emit_graph(LLVMModuleRef mod, const char *name, const em_ir_graph *g,
                             const em_llvm_plan *plan, const em_run_spec *spec, const int *kernel_of,
                             const int *op_donation, em_llvm_ref **refs, int *n_refs) {
    emitter e = {.mod = mod, .plan = plan, .g = g};
    e.ctx = LLVMGetModuleContext(mod);
    e.i32 = LLVMInt32TypeInContext(e.ctx);
    e.i64 = LLVMInt64TypeInContext(e.ctx);
    e.ptr = LLVMPointerTypeInContext(e.ctx, 0);
    e.vd = LLVMVoidTypeInContext(e.ctx);
    e.t_node = LLVMFunctionType(e.i32, (LLVMTypeRef[]){e.ptr, e.ptr, e.ptr}, 3, 0);
    e.t_check = LLVMFunctionType(e.i32, (LLVMTypeRef[]){e.ptr, e.ptr, e.ptr, e.i32}, 4, 0);
    e.t_unary = LLVMFunctionType(e.vd, &e.ptr, 1, 0);
    e.t_release_all = LLVMFunctionType(e.vd, (LLVMTypeRef[]){e.ptr, e.i32}, 2, 0);
    e.t_effects = LLVMFunctionType(e.i32, (LLVMTypeRef[]){e.ptr, e.i32, e.ptr, e.ptr}, 4, 0);
    LLVMTypeRef fn_type = LLVMFunctionType(e.i32, (LLVMTypeRef[]){e.ptr, e.ptr, e.ptr}, 3, 0);
    e.fn = LLVMAddFunction(mod, name, fn_type);
    unsigned optnone = LLVMGetEnumAttributeKindForName("optnone", 7);
    unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
    LLVMAddAttributeAtIndex(e.fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e.ctx, optnone, 0));
    LLVMAddAttributeAtIndex(e.fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e.ctx, noinline, 0));
    e.in = LLVMGetParam(e.fn, 0);
    e.out = LLVMGetParam(e.fn, 1);
    e.run = LLVMGetParam(e.fn, 2);
    e.b = LLVMCreateBuilderInContext(e.ctx);
    LLVMPositionBuilderAtEnd(e.b, LLVMAppendBasicBlockInContext(e.ctx, e.fn, "entry"));
    e.fail = LLVMAppendBasicBlockInContext(e.ctx, e.fn, "fail");
    int max_in = 1, max_out = 1;
    for (int k = 0; k < plan->n_nodes; k++) {
        if (plan->order[k]->n_in > max_in) max_in = plan->order[k]->n_in;
        if (plan->order[k]->n_out > max_out) max_out = plan->order[k]->n_out;
    }
    e.slots = array(&e, plan->n_slots, "slots");
    e.args = array(&e, max_in, "args");
    e.outs = array(&e, max_out, "outs");
    e.res = array(&e, g->body->n_results, "results");
    e.status = LLVMBuildAlloca(e.b, e.i32, "status");
    LLVMBuildMemSet(e.b, e.slots, LLVMConstInt(LLVMInt8TypeInContext(e.ctx), 0, 0),
                    LLVMConstInt(e.i64, (unsigned long long)(plan->n_slots ? plan->n_slots : 1) * 8, 0), 8);
    /* run->planned and run->refs */
    LLVMValueRef field = LLVMConstInt(e.i64, offsetof(em_llvm_run, planned), 0);
    e.planned = load(&e, LLVMBuildGEP2(e.b, LLVMInt8TypeInContext(e.ctx), e.run, &field, 1, ""));
    field = LLVMConstInt(e.i64, offsetof(em_llvm_run, refs), 0);
    e.refs_base = load(&e, LLVMBuildGEP2(e.b, LLVMInt8TypeInContext(e.ctx), e.run, &field, 1, ""));
    if (spec && spec->expected) emit_checks(&e, spec, -1);
    for (int k = 0; k < plan->n_nodes; k++) {
        emit_node(&e, k, kernel_of, op_donation);
        if (spec && spec->expected) emit_checks(&e, spec, k);
        emit_releases(&e, k);
    }
    emit_epilogue(&e, spec);
    emit_failure_exit(&e);
    LLVMDisposeBuilder(e.b);
    if (e.failed) {
        free(e.refs);
        return em_error(EM_ERR_NOMEM, "out of memory compiling @%s", g->name);
    }
    *refs = e.refs;
    *n_refs = e.n_refs;
    return EM_OK;
}
