/*
 * emit.c - the element emitter every LLVM kernel shares (kernel.c's fused
 * elementwise kernels, row_kernel.c's row kernels): LLVM types of ember's
 * dtypes, loads and stores, constants, sizes and strides (immediates, or
 * read from the launch's size table when compiled for run-time sizes), the
 * scalar library's calls and conversions, one IR node's value per element,
 * and operands' offsets from a row number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_internal.h"

static const char *const dtype_sfx[EM_DTYPE_COUNT] = {
#define SFX(unused, S, T, sfx) [EM_DTYPE_##S] = #sfx,
    EM_FOR_DTYPES_STORED(SFX, _)
#undef SFX
};

typedef em_llvm_emitter emitter;

void em_llvm_emitter_init(em_llvm_emitter *e, LLVMModuleRef mod, em_llvm_sizes *sizes) {
    memset(e, 0, sizeof *e);
    e->sizes = sizes;
    e->ctx = LLVMGetModuleContext(mod);
    e->mod = mod;
    e->i64 = LLVMInt64TypeInContext(e->ctx);
    e->i32 = LLVMInt32TypeInContext(e->ctx);
    e->i16 = LLVMInt16TypeInContext(e->ctx);
    e->i1 = LLVMInt1TypeInContext(e->ctx);
    e->i8 = LLVMInt8TypeInContext(e->ctx);
    e->f32 = LLVMFloatTypeInContext(e->ctx);
    e->f64 = LLVMDoubleTypeInContext(e->ctx);
    e->ptr = LLVMPointerTypeInContext(e->ctx, 0);
    e->b = LLVMCreateBuilderInContext(e->ctx);
}

LLVMValueRef em_llvm_kernel_function(const em_llvm_emitter *e, const char *name) {
    LLVMTypeRef params[3] = {e->i64, e->i64, e->ptr};
    LLVMValueRef fn = LLVMAddFunction(e->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), params, 3, 0));
    LLVMAddTargetDependentFunctionAttr(fn, "target-cpu", em_llvm_host_cpu());
    LLVMAddTargetDependentFunctionAttr(fn, "target-features", em_llvm_host_features());
    return fn;
}

void em_llvm_emitter_enter(em_llvm_emitter *e, LLVMValueRef fn, LLVMBasicBlockRef entry, int n_ops) {
    e->ptrs = LLVMGetParam(fn, 2);
    e->entry = entry;
    e->n_ops = n_ops;
    e->table = NULL;
}

/* Emits into the entry block, before its branch when it has one. */
static LLVMBuilderRef at_entry(const emitter *e) {
    LLVMBuilderRef b = LLVMCreateBuilderInContext(e->ctx);
    LLVMValueRef term = LLVMGetBasicBlockTerminator(e->entry);
    if (term)
        LLVMPositionBuilderBefore(b, term);
    else
        LLVMPositionBuilderAtEnd(b, e->entry);
    return b;
}

LLVMValueRef em_llvm_size(emitter *e, int64_t v) {
    em_llvm_sizes *t = e->sizes;
    if (!t) return em_llvm_i64(e, v);
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        int64_t *nv = realloc(t->v, (size_t)cap * sizeof *nv);
        if (!nv) {
            t->nomem = true;
            return em_llvm_i64(e, v);
        }
        t->v = nv;
        t->cap = cap;
    }
    /* loaded in the entry block: the kernel's stores could alias the table
     * as far as LLVM knows, so a load in a loop would stay in it */
    LLVMBuilderRef b = at_entry(e);
    if (!e->table) {
        LLVMValueRef idx = em_llvm_i64(e, e->n_ops);
        e->table = LLVMBuildLoad2(b, e->ptr, LLVMBuildGEP2(b, e->ptr, e->ptrs, &idx, 1, ""), "sizes");
    }
    LLVMValueRef idx = em_llvm_i64(e, t->n);
    LLVMValueRef r = LLVMBuildLoad2(b, e->i64, LLVMBuildGEP2(b, e->i64, e->table, &idx, 1, ""), "size");
    LLVMDisposeBuilder(b);
    t->v[t->n++] = v;
    return r;
}

LLVMValueRef em_llvm_stride(emitter *e, int64_t v) {
    return v >= -1 && v <= 1 ? em_llvm_i64(e, v) : em_llvm_size(e, v);
}

/* The type a value of `dt` has in registers (bool: i1; the 16-bit floats:
 * their bit patterns, i16) and in memory (bool: i8). */
LLVMTypeRef em_llvm_reg_type(const emitter *e, em_dtype dt) {
    switch (dt) {
    case EM_DTYPE_F32: return e->f32;
    case EM_DTYPE_F64: return e->f64;
    case EM_DTYPE_I64: return e->i64;
    case EM_DTYPE_I32: return e->i32;
    case EM_DTYPE_I16:
    case EM_DTYPE_F16:
    case EM_DTYPE_BF16: return e->i16;
    case EM_DTYPE_I8:
    case EM_DTYPE_U8: return e->i8;
    default: return e->i1;
    }
}
LLVMTypeRef em_llvm_mem_type(const emitter *e, em_dtype dt) {
    return dt == EM_DTYPE_BOOL ? e->i8 : em_llvm_reg_type(e, dt);
}

LLVMValueRef em_llvm_load(const emitter *e, em_dtype dt, LLVMValueRef addr) {
    LLVMValueRef v = LLVMBuildLoad2(e->b, em_llvm_mem_type(e, dt), addr, "");
    LLVMSetAlignment(v, (unsigned)em_dtype_size(dt));
    if (dt == EM_DTYPE_BOOL) v = LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "");
    return v;
}

void em_llvm_store(const emitter *e, em_dtype dt, LLVMValueRef v, LLVMValueRef addr) {
    if (dt == EM_DTYPE_BOOL) v = LLVMBuildZExt(e->b, v, e->i8, "");
    LLVMValueRef s = LLVMBuildStore(e->b, v, addr);
    LLVMSetAlignment(s, (unsigned)em_dtype_size(dt));
}

/* The value of a `full` constant of dtype dt: made by the runtime's own
 * conversion (a 0-d tensor), so it has exactly the eager value's bits. */
static LLVMValueRef konst(const emitter *e, em_dtype dt, const em_attrs *a) {
    em_tensor *t = dt == EM_DTYPE_BOOL || em_dtype_is_float(dt) ? em_tensor_scalar(a->value, dt)
                                                                : em_tensor_scalar_i64(a->value_i, dt);
    if (!t) return NULL;
    const void *p = em_tensor_data(t);
    LLVMValueRef v;
    switch (dt) {
    case EM_DTYPE_F32: v = LLVMConstReal(e->f32, *(const float *)p); break;
    case EM_DTYPE_F64: v = LLVMConstReal(e->f64, *(const double *)p); break;
    case EM_DTYPE_I64: v = LLVMConstInt(e->i64, (unsigned long long)*(const int64_t *)p, 1); break;
    case EM_DTYPE_I32: v = LLVMConstInt(e->i32, (unsigned long long)(int64_t)*(const int32_t *)p, 1); break;
    case EM_DTYPE_I16: v = LLVMConstInt(e->i16, (unsigned long long)(int64_t)*(const int16_t *)p, 1); break;
    case EM_DTYPE_F16:
    case EM_DTYPE_BF16: v = LLVMConstInt(e->i16, *(const uint16_t *)p, 0); break;
    case EM_DTYPE_I8: v = LLVMConstInt(e->i8, (unsigned long long)(int64_t)*(const int8_t *)p, 1); break;
    case EM_DTYPE_U8: v = LLVMConstInt(e->i8, *(const uint8_t *)p, 0); break;
    default: v = LLVMConstInt(e->i1, *(const bool *)p, 0); break;
    }
    em_tensor_release(t);
    return v;
}

LLVMValueRef em_llvm_i64(const emitter *e, int64_t v) {
    return LLVMConstInt(e->i64, (unsigned long long)v, 1);
}

/* Calls em_scalar_<name> (from the linked library) on args. */
static em_status call_lib(const emitter *e, const char *name, LLVMValueRef *args, int n,
                          LLVMValueRef *out) {
    char fname[96];
    snprintf(fname, sizeof fname, "em_scalar_%s", name);
    LLVMValueRef fn = LLVMGetNamedFunction(e->mod, fname);
    if (!fn) return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: the scalar library has no %s", fname);
    *out = LLVMBuildCall2(e->b, LLVMGlobalGetValueType(fn), fn, args, (unsigned)n, "");
    return EM_OK;
}

static em_status convert(const emitter *e, LLVMValueRef v, em_dtype from, em_dtype to,
                         LLVMValueRef *out) {
    if (from == to) {
        *out = v;
        return EM_OK;
    }
    char name[64];
    snprintf(name, sizeof name, "cast_%s_%s", dtype_sfx[from], dtype_sfx[to]);
    return call_lib(e, name, &v, 1, out);
}

em_status em_llvm_emit_element(const emitter *e, const em_ir_node *n, LLVMValueRef *vals) {
    const em_op_info *info = em_op_get(n->op);
    em_dtype odt = n->out[0]->type.dtype;
    LLVMValueRef res = NULL;
    em_status st = EM_OK;
    if (em_ir_is_scalar_const(n)) {
        if (!(res = konst(e, odt, EM_IR_ATTRS(n)))) return em_last_status();
    } else if (info->flags & EM_F_BROADCAST) {
        res = vals[n->in[0]->id]; /* broadcasting is in the strides */
    } else if (info->kind == EM_KIND_CAST) {
        st = convert(e, vals[n->in[0]->id], n->in[0]->type.dtype, odt, &res);
    } else if (info->flags & EM_F_ELEMENTWISE) {
        /* as the eager kernel: operands into their dtypes, the call in the
         * compute dtype, its result rounded to the node's dtype */
        em_type it[4];
        for (int i = 0; i < n->n_in; i++) it[i] = n->in[i]->type;
        em_dtype cd = em_ew_compute_dtype(n->op, it, n->n_in, odt);
        LLVMValueRef args[4];
        for (int i = 0; i < n->n_in && st == EM_OK; i++) {
            em_dtype via = em_ew_operand_via(n->op, i, it, n->n_in, odt);
            st = convert(e, vals[n->in[i]->id], n->in[i]->type.dtype, via, &args[i]);
            if (st == EM_OK) st = convert(e, args[i], via, em_ew_operand_dtype(n->op, i, cd), &args[i]);
        }
        char name[64];
        snprintf(name, sizeof name, "%s_%s", info->name, dtype_sfx[cd]);
        if (st == EM_OK) st = call_lib(e, name, args, n->n_in, &res);
        if (st == EM_OK) st = convert(e, res, em_ew_native_result(n->op, cd), odt, &res);
    } else {
        return em_error(EM_ERR_NOT_IMPLEMENTED, "llvm: %s cannot appear in a kernel", info->name);
    }
    if (st != EM_OK) return st;
    vals[n->out[0]->id] = res;
    return EM_OK;
}

/* Adds each operand's offset at position pos of the first `upto` dims to
 * off[] (the row number's digits times the operands' strides). */
void em_llvm_emit_offsets(em_llvm_emitter *e, const int64_t *shape, const int64_t (*strides)[EM_MAX_DIMS],
                          int n_ops, int upto, LLVMValueRef pos, LLVMValueRef *off) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef rem = pos;
    for (int d = upto - 1; d >= 0; d--) {
        LLVMValueRef idx = rem;
        if (d) {
            LLVMValueRef size = em_llvm_size(e, shape[d]);
            idx = LLVMBuildSRem(b, rem, size, "");
            rem = LLVMBuildSDiv(b, rem, size, "");
        }
        for (int k = 0; k < n_ops; k++)
            if (strides[k][d])
                off[k] = LLVMBuildAdd(b, off[k], LLVMBuildMul(b, idx, em_llvm_size(e, strides[k][d]), ""), "");
    }
}
