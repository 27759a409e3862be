/*
 * geometry.c - iteration-space arithmetic shared by the eager kernels and
 * the code generators: broadcasting strides and coalescing dims.
 */
#include "ember/ops.h"

void em_broadcast_strides(const int64_t *shape, const int64_t *strides, int ndim, int to_ndim,
                          int64_t *out) {
    int lead = to_ndim - ndim;
    for (int d = 0; d < to_ndim; d++) {
        int td = d - lead;
        out[d] = (td < 0 || shape[td] == 1) ? 0 : strides[td];
    }
}

int em_coalesce_dims(int64_t *shape, int ndim, int64_t (*strides)[EM_MAX_DIMS], int n_ops) {
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        bool merge = n > 0;
        for (int k = 0; k < n_ops && merge; k++) merge = strides[k][n - 1] == strides[k][d] * shape[d];
        if (merge) {
            shape[n - 1] *= shape[d];
            for (int k = 0; k < n_ops; k++) strides[k][n - 1] = strides[k][d];
        } else {
            shape[n] = shape[d];
            for (int k = 0; k < n_ops; k++) strides[k][n] = strides[k][d];
            n++;
        }
    }
    return n;
}
