/*
 * views.c - the inference of as_strided_scatter (../cpu/views.c runs it),
 * the same on every device.
 */
#include <string.h>

#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

em_status infer_as_strided_scatter(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                                   int n_out) {
    (void)n_out;
    if (n_in != 2) return em_error(EM_ERR_VALUE, "as_strided_scatter: takes a tensor and the values of its view");
    if (in[0].dtype != in[1].dtype || !em_device_eq(in[0].device, in[1].device))
        return em_error(EM_ERR_DTYPE, "as_strided_scatter: the values (%s) must have the tensor's dtype (%s) "
                                      "and device", em_dtype_long_name(in[1].dtype), em_dtype_long_name(in[0].dtype));
    em_status st = em_strided_view_fits(op, &in[0], in[1].shape, in[1].ndim, a->stride, a->n_stride, a->offset);
    if (st != EM_OK) return st;
    out[0] = in[0];
    return EM_OK;
}
