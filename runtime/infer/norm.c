/*
 * norm.c - the inference of layer_norm (../cpu/norm.c runs it), the same
 * on every device.
 */
#include <string.h>

#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

em_status infer_layer_norm(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    (void)op;
    (void)n_out;
    char x[256], w[256];
    const em_type *t = &in[0];
    if (!em_dtype_is_float(t->dtype))
        return em_error(EM_ERR_DTYPE, "layer_norm: expected a floating point input, got %s", TYPE_STR(t, x));
    int k = a->n_dims;
    bool trailing = k >= 1 && k <= t->ndim;
    for (int i = 0; trailing && i < k; i++) trailing = a->dims[i] == t->ndim - k + i;
    if (!trailing)
        return em_error(EM_ERR_SHAPE, "layer_norm: the normalized dims must be the last ones of %s",
                        TYPE_STR(t, x));
    for (int i = 1; i < n_in; i++) {
        const em_type *p = &in[i];
        bool fits = p->dtype == t->dtype && p->ndim == k &&
                    em_shape_eq(p->shape, k, t->shape + t->ndim - k, k);
        if (!fits)
            return em_error(EM_ERR_SHAPE, "layer_norm: %s %s does not fit the normalized shape of %s",
                            i == 1 ? "weight" : "bias", TYPE_STR(p, w), TYPE_STR(t, x));
    }
    out[0] = *t;
    return EM_OK;
}
