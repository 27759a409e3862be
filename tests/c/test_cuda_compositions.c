/*
 * test_cuda_compositions.c - the CUDA device's ops that are compositions
 * of other ops (cuda/movement.c: flip, roll, tril, triu, one_hot, nonzero,
 * masked_select; cuda/indexing.c: cat), run on CPU tensors, where every op
 * they are made of is the CPU's, against the CPU's own kernels for them.
 * They are device-free (they go through dispatch, not a device's kernels),
 * so what runs here is what runs on a GPU, over the GPU's kernels for the
 * parts, which tools/gpu_check.sh checks. To the bit: every part moves or
 * selects values.
 */
#include <stdio.h>
#include <string.h>

#include "../../cuda/device_internal.h"
#include "check.h"
#include "ember/ops.h"
#include "ember/tensor.h"

/* Values of dtype dt (float64 made, then cast by the CPU's cast). */
static em_tensor *filled(em_dtype dt, const int64_t *shape, int nd, int seed) {
    em_tensor *t = em_tensor_empty(shape, nd, EM_DTYPE_F64, em_cpu()), *c = NULL;
    for (int64_t i = 0; t && i < t->numel; i++) {
        double v = (double)((i * 37 + seed * 11) % 23) - 9.0;
        if (dt == EM_DTYPE_BOOL) v = ((i * 7 + seed) % 3) == 0;
        ((double *)em_tensor_data(t))[i] = dt == EM_DTYPE_F32 ? v / 4 : v;
    }
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    if (t) em_op_run(EM_OP_CAST, &t, 1, &a, &c, 1);
    em_tensor_release(t);
    return c;
}

static bool same(const em_tensor *a, const em_tensor *b) {
    if (!a || !b || a->dtype != b->dtype || !em_shape_eq(a->shape, a->ndim, b->shape, b->ndim)) return false;
    for (int64_t i = 0; i < a->numel; i++)
        if (em_tensor_get_f64(a, i) != em_tensor_get_f64(b, i)) return false;
    return true;
}

/* op through the composition and through the CPU's kernel: equal? */
static void compare(const char *what, em_op op, em_tensor *const *in, int n_in, const em_attrs *a) {
    em_tensor *want = NULL, *got = NULL;
    em_status sw = em_op_run(op, in, n_in, a, &want, 1);
    CHECK_MSG(sw == EM_OK, "%s on the CPU: %s", what, em_last_error());
    if (sw != EM_OK) return;
    em_status sg;
    if (em_op_get(op)->flags & EM_F_DATA_DEPENDENT) {
        sg = em_cuda_run_movement(NULL, op, in, n_in, a, &got);
    } else {
        em_type in_types[8], t;
        for (int i = 0; i < n_in; i++) in_types[i] = em_tensor_type(in[i]);
        CHECK(em_op_infer(op, in_types, n_in, a, &t, 1) == EM_OK);
        got = em_tensor_empty(t.shape, t.ndim, t.dtype, em_cpu());
        sg = op == EM_OP_CAT ? em_cuda_cat(in, n_in, a, got) : em_cuda_run_movement(NULL, op, in, n_in, a, &got);
    }
    CHECK_MSG(sg == EM_OK && same(got, want), "%s: %s", what, sg == EM_OK ? "differs from the CPU's" : em_last_error());
    em_tensor_release(want);
    em_tensor_release(got);
}

int main(void) {
    int64_t s3[3] = {3, 4, 5}, s2[2] = {4, 5};
    em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_I64, EM_DTYPE_BOOL};
    for (int t = 0; t < 3; t++) {
        em_tensor *x = filled(dts[t], s3, 3, 1);
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.n_dims = 2, a.dims[0] = 0, a.dims[1] = 2;
        compare("flip over dims 0 and 2", EM_OP_FLIP, &x, 1, &a);
        a.n_shifts = 2, a.shifts[0] = 1, a.shifts[1] = -7;
        compare("roll by (1, -7) over dims 0 and 2", EM_OP_ROLL, &x, 1, &a);
        for (int k = -2; k <= 2; k += 2) {
            memset(&a, 0, sizeof a);
            a.diagonal = k;
            compare("tril", EM_OP_TRIL, &x, 1, &a);
            compare("triu", EM_OP_TRIU, &x, 1, &a);
        }
        /* a transposed view: read through its strides */
        int64_t perm[3] = {0, 2, 1};
        em_tensor *xt = em_permute(x, perm, 3);
        memset(&a, 0, sizeof a);
        a.n_dims = 1, a.dims[0] = 1;
        compare("flip of a transposed view", EM_OP_FLIP, &xt, 1, &a);
        compare("nonzero", EM_OP_NONZERO, &x, 1, &a);
        em_tensor *m = filled(EM_DTYPE_BOOL, s2, 2, 2), *pair[2] = {x, m};
        memset(&a, 0, sizeof a);
        compare("masked_select with a broadcast mask", EM_OP_MASKED_SELECT, pair, 2, &a);
        int64_t s35[3] = {3, 5, 4};
        em_tensor *y = filled(dts[t], s35, 3, 3), *cat2[3] = {xt, y, xt};
        a.n_dims = 1, a.dims[0] = 1;
        compare("cat along dim 1", EM_OP_CAT, cat2, 3, &a);
        em_tensor_release(x);
        em_tensor_release(xt);
        em_tensor_release(m);
        em_tensor_release(y);
    }
    /* one_hot, and a class out of range: the CPU's words */
    int64_t s1[1] = {6};
    em_tensor *cls = em_tensor_empty(s1, 1, EM_DTYPE_I64, em_cpu());
    for (int i = 0; i < 6; i++) ((int64_t *)em_tensor_data(cls))[i] = (i * 5) % 4;
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_shape = 2, a.shape[0] = 6, a.shape[1] = 4;
    compare("one_hot", EM_OP_ONE_HOT, &cls, 1, &a);
    ((int64_t *)em_tensor_data(cls))[3] = 4;
    int64_t s64[2] = {6, 4};
    em_tensor *out = em_tensor_empty(s64, 2, EM_DTYPE_I64, em_cpu());
    CHECK(em_cuda_run_movement(NULL, EM_OP_ONE_HOT, &cls, 1, &a, &out) != EM_OK);
    CHECK_MSG(strstr(em_last_error(), "one_hot: index 4 is out of bounds for dimension 1 with size 4"), "%s",
              em_last_error());
    em_tensor_release(out);
    em_tensor_release(cls);
    printf("flip, roll, tril, triu, nonzero, masked_select, cat and one_hot as the CUDA device composes them: "
           "the CPU's results\n");
    return check_report();
}
