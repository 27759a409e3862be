/*
 * dispatch.c - em_op_run(), the single entry point of eager execution, and
 * its relatives: inference through the op's rule, results allocated, the
 * kernel run, and the interceptors told (the tracer and autograd).
 *
 * Each row's kind picks its inference: elementwise kinds share
 * infer_elementwise; other kinds have their own; OTHER rows name theirs
 * (infer_<name>). Inference is the same on every device; the kernel comes
 * from the device table (device.h), the device being the operands'. The
 * interceptors (ops.h) see every op that user code ran (nesting depth 0),
 * in their order: dispatch names none of them.
 */
#include <stdio.h>
#include <string.h>

#include "device.h"
#include "kernels.h"

#define INFER_FOR(kind, name) INFER_FOR_##kind(name)
#define INFER_FOR_UNARY(n) infer_elementwise
#define INFER_FOR_BINARY(n) infer_elementwise
#define INFER_FOR_TERNARY(n) infer_elementwise
#define INFER_FOR_CAST(n) infer_cast
#define INFER_FOR_REDUCE(n) infer_reduce
#define INFER_FOR_SCAN(n) infer_scan
#define INFER_FOR_MATMUL(n) infer_matmul
#define INFER_FOR_VIEW(n) infer_view
#define INFER_FOR_COPY(n) infer_same
#define INFER_FOR_FACTORY(n) infer_factory
#define INFER_FOR_RANDOM(n) infer_factory
#define INFER_FOR_FUSED(n) infer_fused
#define INFER_FOR_OTHER(n) infer_##n

/* Each op's inference: the same on every device. */
static const em_infer_fn infers[EM_OP_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) [EM_OP_##E] = INFER_FOR(kind, n),
#include "ember/ops.def"
#undef EM_OP
};

/* The device table: an entry per device type this build has. */
static const em_device_impl *devices[] = {[EM_DEVICE_CPU] = &em_cpu_device, [EM_DEVICE_META] = &em_meta_device,
                                          [EM_DEVICE_CUDA] = NULL};

void em_device_register(em_device_type type, const em_device_impl *impl) {
    if ((unsigned)type >= sizeof devices / sizeof *devices || type == EM_DEVICE_CPU || type == EM_DEVICE_META) return;
    em_device_memory_register(type, impl ? impl->memory : NULL);
    __atomic_store_n(&devices[type], impl, __ATOMIC_RELEASE);
}

const em_device_impl *em_device_impl_of(em_device d) {
    return (unsigned)d.type < sizeof devices / sizeof *devices ? __atomic_load_n(&devices[d.type], __ATOMIC_ACQUIRE)
                                                                : NULL;
}

bool em_op_has_kernels(em_op op) {
    return (unsigned)op < EM_OP_COUNT && infers[op] && em_cpu_device.supports(op);
}

/* Ops run inside kernels (depth > 0) are not the user's: the trace hook
 * and autograd see the outermost op only. */
static _Thread_local int op_depth;

/* ---- dispatch ---- */

#define MAX_IO 64

em_status em_op_infer(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                      int n_out) {
    if ((unsigned)op >= EM_OP_COUNT) return em_error(EM_ERR_INTERNAL, "unknown op %d", (int)op);
    const em_op_info *info = em_op_get(op);
    if ((info->n_in >= 0 && n_in != info->n_in) || (info->n_out >= 0 && n_out != info->n_out))
        return em_error(EM_ERR_VALUE, "%s: expected %d inputs and %d results, got %d and %d",
                        info->name, info->n_in, info->n_out, n_in, n_out);
    return infers[op](op, in, n_in, attrs, out, n_out);
}

/* Is t a host scalar (kernels.h: a 0-d CPU tensor, which joins operands
 * on any device)? */
static inline bool host_scalar(const em_tensor *t) { return t->ndim == 0 && t->device.type == EM_DEVICE_CPU; }

/* The device op runs on: its operands' (all on one, host scalars aside:
 * PyTorch's error otherwise), or for ops without operands (factories) its
 * result's; an error naming the op where that device is not built here or
 * has no kernel for it. */
static em_status device_of(em_op op, em_tensor *const *in, int n_in, const em_type *result,
                           const em_device_impl **out) {
    em_device d = n_in > 0 && in[0] ? in[0]->device : result ? result->device : em_cpu();
    for (int i = 0; i < n_in; i++)
        if (in[i] && !host_scalar(in[i])) {
            d = in[i]->device;
            break;
        }
    for (int i = 0; i < n_in; i++)
        if (in[i] && !em_device_eq(in[i]->device, d) && !host_scalar(in[i]))
            return em_device_mismatch(op, d, in[i]->device);
    const em_device_impl *dev = em_device_impl_of(d);
    char name[16];
    if (!dev)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: this build of ember has no %s device support yet",
                        em_op_name(op), em_device_str(d, name));
    if (!dev->supports(op))
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s: no kernel for it on %s yet", em_op_name(op),
                        em_device_str(d, name));
    *out = dev;
    return EM_OK;
}

/* Runs op's kernel on results of `types`: out[i] given (borrowed) is the
 * memory result i goes into, NULL a new tensor (ops that make their own
 * results take NULLs). On success out[] holds new references; on failure it
 * is as it was. */
static em_status run_kernel(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                            const em_type *types, em_tensor **out, int n_out) {
    const em_op_info *info = em_op_get(op);
    const em_device_impl *dev = NULL;
    em_status st = device_of(op, in, n_in, n_out ? &types[0] : NULL, &dev);
    if (st != EM_OK) return st;
    bool self_alloc = (info->flags & (EM_F_VIEW | EM_F_DATA_DEPENDENT)) || info->kind == EM_KIND_COPY;
    em_tensor *res[MAX_IO] = {NULL};
    for (int i = 0; !self_alloc && i < n_out && st == EM_OK; i++) {
        if (out[i]) {
            res[i] = out[i];
            em_tensor_retain(res[i]);
        } else if (!(res[i] = em_tensor_empty(types[i].shape, types[i].ndim, types[i].dtype, types[i].device))) {
            st = em_last_status();
        } else if (attrs && attrs->n_layout == types[i].ndim && (info->attrs & EM_A_LAYOUT)) {
            em_layout_strides(types[i].shape, types[i].ndim, attrs->layout, res[i]->strides); /* (new, unshared) */
        }
    }
    if (st == EM_OK) {
        op_depth++;
        st = dev->run(op, in, n_in, attrs, res);
        op_depth--;
    }
    if (st != EM_OK) {
        for (int i = 0; i < n_out; i++) em_tensor_release(res[i]);
        return st;
    }
    if (info->flags & EM_F_VIEW)
        for (int i = 0; i < n_out; i++) {
            res[i]->is_view = true;
            em_tensor *base = in[0]->view_base ? in[0]->view_base : in[0];
            if (res[i]->storage != base->storage || res[i] == base || res[i]->view_base) continue;
            em_tensor_retain(base);
            __atomic_add_fetch(&base->view_refs, 1, __ATOMIC_ACQ_REL);
            res[i]->view_base = base;
            res[i]->view_version = __atomic_load_n(&base->storage->version, __ATOMIC_RELAXED);
        }
    memcpy(out, res, (size_t)n_out * sizeof *out);
    return EM_OK;
}

/* ---- autocast (ember.autocast, as PyTorch's CPU autocast) ----
 *
 * While it is on, the ops PyTorch's CPU autocast runs in lower precision
 * (matmuls and convolutions) cast their float32 (and float16) operands to
 * its dtype first, as ops of their own: autograd differentiates through
 * the casts (a gradient comes back in its input's dtype) and a tracer
 * records them. Outermost ops only, as autograd records them. */
static _Thread_local int autocast_dtype = -1;

int em_autocast_dtype(void) { return autocast_dtype; }

int em_set_autocast_dtype(int dtype) {
    int old = autocast_dtype;
    autocast_dtype = dtype;
    return old;
}

static bool autocast_lowers(em_op op) {
    return op == EM_OP_MATMUL || op == EM_OP_CONV || op == EM_OP_CONV_TRANSPOSE;
}

static em_status op_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out,
                        int n_out);

static inline const em_interceptor *interceptor(int rank) {
    return __atomic_load_n(&em_interceptors[rank], __ATOMIC_ACQUIRE);
}

/* An autocast operand cast, an op of its own (autograd records it). */
static em_tensor *cast_to(em_tensor *a, em_dtype dtype) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = dtype;
    em_tensor *out = NULL;
    return op_run(EM_OP_CAST, &a, 1, &at, &out, 1) == EM_OK ? out : NULL;
}

em_status em_op_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                    em_tensor **out, int n_out) {
    if (autocast_dtype < 0 || op_depth != 0 || !autocast_lowers(op) || n_in > MAX_IO)
        return op_run(op, in, n_in, attrs, out, n_out);
    em_dtype low = (em_dtype)autocast_dtype;
    /* convolutions have no half-precision kernels: they take their operands
     * rounded to the low dtype and computed in float32 (accumulating in
     * float32, as oneDNN's bfloat16 convolutions do), and their result
     * rounded to it */
    bool widen = op != EM_OP_MATMUL;
    em_tensor *cast[MAX_IO] = {NULL}, *round[MAX_IO] = {NULL};
    em_tensor *use[MAX_IO] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < n_in; i++) use[i] = in[i];
    for (int i = 0; i < n_in && st == EM_OK; i++) {
        if (!in[i] || !(in[i]->dtype == EM_DTYPE_F32 || in[i]->dtype == EM_DTYPE_F16 || in[i]->dtype == low)) continue;
        if (in[i]->dtype != low) {
            if (!(cast[i] = cast_to(in[i], low))) {
                st = em_last_status();
                break;
            }
            use[i] = cast[i];
        }
        if (widen) {
            if (!(round[i] = cast_to(use[i], EM_DTYPE_F32)))
                st = em_last_status();
            else
                use[i] = round[i];
        }
    }
    if (st == EM_OK) st = op_run(op, use, n_in, attrs, out, n_out);
    for (int j = 0; widen && st == EM_OK && j < n_out; j++) {
        em_tensor *r = cast_to(out[j], low);
        em_tensor_release(out[j]);
        out[j] = r;
        if (!r) { /* (on failure the results are untouched: none) */
            st = em_last_status();
            for (int k = 0; k < n_out; k++) {
                if (k != j) em_tensor_release(out[k]);
                out[k] = NULL;
            }
        }
    }
    for (int i = 0; i < n_in; i++) {
        em_tensor_release(cast[i]);
        em_tensor_release(round[i]);
    }
    return st;
}

static em_status op_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out,
                        int n_out) {
    if (n_in > MAX_IO || n_out > MAX_IO)
        return em_error(EM_ERR_VALUE, "%s: at most %d operands, got %d", em_op_name(op), MAX_IO,
                        n_in);
    em_type in_types[MAX_IO], out_types[MAX_IO];
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return em_error(EM_ERR_VALUE, "%s: input %d is missing", em_op_name(op), i);
        in_types[i] = em_tensor_type(in[i]);
    }
    em_status st = em_op_infer(op, in_types, n_in, attrs, out_types, n_out);
    if (st != EM_OK) return st;

    for (int r = 0; op_depth == 0 && r < EM_INTERCEPT_COUNT; r++) {
        const em_interceptor *ic = interceptor(r);
        if (ic && ic->before_op) ic->before_op(op, in, n_in, attrs);
    }
    em_tensor *res[MAX_IO] = {NULL};
    if ((st = run_kernel(op, in, n_in, attrs, out_types, res, n_out)) != EM_OK) return st;
    /* the layers see the outermost op only: an op built from others
     * traces and differentiates as one */
    for (int r = 0; op_depth == 0 && r < EM_INTERCEPT_COUNT; r++) {
        const em_interceptor *ic = interceptor(r);
        if (ic && ic->after_op && (st = ic->after_op(op, in, n_in, attrs, res, n_out)) != EM_OK) {
            for (int i = 0; i < n_out; i++) em_tensor_release(res[i]);
            return st;
        }
    }
    memcpy(out, res, (size_t)n_out * sizeof *out);
    return EM_OK;
}

em_status em_op_run_planned(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                            const em_type *types, em_tensor **out, int n_out) {
    if (n_out > MAX_IO) return em_error(EM_ERR_VALUE, "%s: at most %d results", em_op_name(op), MAX_IO);
    return run_kernel(op, in, n_in, attrs, types, out, n_out);
}

/* ---- in-place ---- */

bool em_can_cast(em_dtype from, em_dtype to) {
    em_dtype_category cf = em_dtype_category_of(from), ct = em_dtype_category_of(to);
    return cf <= ct;
}

/* Does writing `out` read `in` at a different position (same memory,
 * another view)? Then the result goes through a temporary. */
static bool partial_overlap(const em_tensor *out, const em_tensor *in) {
    if (in->storage != out->storage) return false;
    if (in->offset == out->offset && em_shape_eq(in->shape, in->ndim, out->shape, out->ndim) &&
        memcmp(in->strides, out->strides, (size_t)in->ndim * sizeof *in->strides) == 0)
        return false; /* the very same elements, read and written in step */
    return true;
}

/* The write will not happen: the layers below rank `upto` that prepared
 * for it let go. */
static void abort_inplace(const em_interceptor *const *ics, void *const *state, int upto) {
    for (int r = 0; r < upto; r++)
        if (ics[r] && ics[r]->abort_inplace && state[r]) ics[r]->abort_inplace(state[r]);
}

static em_status run_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *out);

/* (An in-place op's operands are on its target's device, as any op's. A
 * copy_ across devices moves its source first, above dispatch:
 * em_copy_source, em_assign_copy, the Python layer's copy_.) */
em_status em_op_run_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                            em_tensor *out) {
    return run_inplace(op, in, n_in, attrs, out); /* (which refuses devices this build lacks) */
}

static em_status run_inplace(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *out) {
    const em_op_info *info = em_op_get(op);
    const char *name = info->kind == EM_KIND_CAST ? "copy" : info->name; /* x.copy_(y), x[k] = y */
    char a[256], b[256];
    em_type in_types[MAX_IO], rt;
    if (n_in > MAX_IO) return em_error(EM_ERR_VALUE, "%s_: too many operands", name);
    for (int i = 0; i < n_in; i++) in_types[i] = em_tensor_type(in[i]);
    em_status st = em_op_infer(op, in_types, n_in, attrs, &rt, 1);
    if (st != EM_OK) return st;
    /* written where the operands are, by that device's kernels (the CPU's
     * are the only ones an in-place write has yet: a copy between devices
     * is refused by name, not run as if both were the host) */
    em_tensor *operands[MAX_IO + 1];
    memcpy(operands, in, (size_t)n_in * sizeof *in);
    operands[n_in] = out;
    const em_device_impl *dev;
    /* (a copy into a meta tensor reads nothing: from any device, as PyTorch's) */
    bool into_meta = out->device.type == EM_DEVICE_META;
    if (into_meta && info->kind == EM_KIND_CAST) operands[0] = out;
    if (info->kind == EM_KIND_CAST && !em_tensor_has_data(in[0]) && !into_meta)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "copy_: Cannot copy out of meta tensor; no data!");
    if ((st = device_of(op, operands, n_in + 1, NULL, &dev)) != EM_OK) return st;
    if (!dev->write && !into_meta)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "%s_: in-place writes on %s are not implemented yet", name, dev->name);
    /* The operands must broadcast to the written tensor's shape, which is
     * then the broadcast shape itself whenever that tensor is an operand
     * (x.add_(y)), as in PyTorch; copy_ and fill_ broadcast their source. */
    int64_t joint[EM_MAX_DIMS];
    int joint_nd;
    if (!em_broadcast_shapes(rt.shape, rt.ndim, out->shape, out->ndim, joint, &joint_nd) ||
        !em_shape_eq(joint, joint_nd, out->shape, out->ndim)) {
        em_shape_str(out->shape, out->ndim, a, sizeof a);
        em_shape_str(rt.shape, rt.ndim, b, sizeof b);
        return em_error(EM_ERR_SHAPE, "%s_: output with shape %s doesn't match the broadcast shape %s",
                        name, a, b);
    }
    if (!em_can_cast(rt.dtype, out->dtype))
        return em_error(EM_ERR_DTYPE, "%s_: result type %s can't be cast to the desired output type %s",
                        name, em_dtype_long_name(rt.dtype), em_dtype_long_name(out->dtype));
    for (int d = 0; d < out->ndim; d++)
        if (out->strides[d] == 0 && out->shape[d] > 1)
            return em_error(EM_ERR_VALUE,
                            "%s_: more than one element of the written-to tensor refers to a single "
                            "memory location; clone() it before writing", name);
    bool through_tmp = info->kind != EM_KIND_UNARY && info->kind != EM_KIND_BINARY &&
                       info->kind != EM_KIND_TERNARY && info->kind != EM_KIND_CAST;
    /* x[i] = v writes the few indexed elements of x itself, not a copy of x
     * (unless the indices or values share x's memory) */
    bool put = op == EM_OP_INDEX_PUT && in[0] == out && dev == &em_cpu_device; /* (the CPU's kernel writes it) */
    for (int i = 1; put && i < n_in; i++) put = in[i]->storage != out->storage;
    for (int i = 0; i < n_in; i++) through_tmp |= partial_overlap(out, in[i]);
    void *state[EM_INTERCEPT_COUNT] = {NULL}; /* what each layer made ready for the write */
    const em_interceptor *ics[EM_INTERCEPT_COUNT] = {NULL};
    for (int r = 0; op_depth == 0 && r < EM_INTERCEPT_COUNT; r++) {
        ics[r] = interceptor(r);
        if (!ics[r] || !ics[r]->before_inplace) continue;
        if ((st = ics[r]->before_inplace(op, in, n_in, attrs, out, &state[r])) != EM_OK) {
            abort_inplace(ics, state, r);
            return st;
        }
    }
    op_depth++;
    if (into_meta) {
        st = EM_OK; /* (nothing to write: the checks above were the op) */
    } else if (put) {
        st = em_index_put_write(out, in + 1, n_in - 2, in[n_in - 1], attrs);
    } else if (!through_tmp) {
        st = dev->write(op, in, n_in, out);
    } else { /* compute the result apart, then write it */
        em_tensor *r = NULL;
        st = em_op_run(op, in, n_in, attrs, &r, 1);
        if (st == EM_OK) st = dev->write(EM_OP_CAST, &r, 1, out);
        em_tensor_release(r);
    }
    op_depth--;
    if (st != EM_OK) {
        abort_inplace(ics, state, EM_INTERCEPT_COUNT);
        return st;
    }
    __atomic_fetch_add(&out->storage->version, 1, __ATOMIC_RELAXED);
    /* in the stack's order: the tracer first, as for out-of-place ops (the
     * result autograd saves is an alias that must carry the written
     * value's graph value, not the one from before the write: sigmoid_,
     * tanh_ and exp_ differentiate through their result) */
    for (int r = 0; r < EM_INTERCEPT_COUNT; r++)
        if (ics[r] && ics[r]->after_inplace) ics[r]->after_inplace(op, in, n_in, attrs, out, state[r]);
    return EM_OK;
}
