/*
 * device.c - the meta device of the device table (../device.h): tensors
 * with a shape, a dtype and strides but no data, as PyTorch's meta device.
 *
 * Every op's inference is device-free (../infer/), so an op on meta tensors
 * is its inference and nothing more: dispatch allocates the results it
 * infers (storages without memory) and the kernel here has nothing left to
 * compute. Views get their geometry as on the CPU (the same rules,
 * geometry.c), so a meta view shares its base's storage and strides. An op
 * whose result's shape depends on the data (nonzero, unique, ...) cannot
 * run without data, and says so.
 */
#include "../device.h"

static bool meta_supports(em_op op) {
    return (unsigned)op < EM_OP_COUNT && em_op_get(op)->kind != EM_KIND_FUSED;
}

/* A new contiguous meta tensor of t's shape and dtype. */
static em_tensor *meta_like(const em_tensor *t) { return em_tensor_empty(t->shape, t->ndim, t->dtype, em_meta()); }

static em_status meta_view(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out) {
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS], off;
    int nd;
    em_tensor *src = in[0], *copy = NULL;
    if (!em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off)) {
        if (op != EM_OP_RESHAPE) return em_error(EM_ERR_INTERNAL, "%s: no view geometry", em_op_name(op));
        /* reshape of strides that allow no view: of a copy, as on the CPU */
        if (!(src = copy = meta_like(src))) return em_last_status();
        em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off);
    }
    out[0] = em_tensor_alias(src, src->offset + off, shape, strides, nd);
    em_tensor_release(copy);
    return out[0] ? EM_OK : em_last_status();
}

static em_status meta_run(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)n_in;
    const em_op_info *info = em_op_get(op);
    if (info->flags & EM_F_DATA_DEPENDENT)
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "%s: its result's shape depends on the values of its input, which a meta tensor does not "
                        "have", info->name);
    if (info->kind == EM_KIND_VIEW) return meta_view(op, in, attrs, out);
    if (info->kind == EM_KIND_COPY) { /* contiguous(): itself, or a contiguous copy */
        if (em_tensor_is_contiguous(in[0])) {
            em_tensor_retain(in[0]);
            out[0] = in[0];
            return EM_OK;
        }
        return (out[0] = meta_like(in[0])) ? EM_OK : em_last_status();
    }
    return EM_OK; /* (dispatch made the results: their types are all there is) */
}

const em_device_impl em_meta_device = {"meta", &em_meta_memory, meta_supports, meta_run, NULL, NULL};
