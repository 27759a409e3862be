/*
 * test_cuda_compositions.c - the CUDA device's ops that are compositions
 * of other ops (cuda/movement.c: flip, roll, tril, triu, one_hot, nonzero,
 * masked_select; cuda/indexing.c: cat; cuda/conv.c: conv, conv_weight,
 * conv_transpose), run on CPU tensors, where every op
 * they are made of is the CPU's, against the CPU's own kernels for them.
 * They are device-free (they go through dispatch, not a device's kernels),
 * so what runs here is what runs on a GPU, over the GPU's kernels for the
 * parts, which tools/gpu_check.sh checks. To the bit: every part moves or
 * selects values.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../cuda/internal.h"
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

static double tolerance;

static bool same(const em_tensor *a, const em_tensor *b) {
    if (!a || !b || a->dtype != b->dtype || !em_shape_eq(a->shape, a->ndim, b->shape, b->ndim)) return false;
    em_tensor *ac = em_contiguous((em_tensor *)a), *bc = em_contiguous((em_tensor *)b);
    bool ok = true;
    for (int64_t i = 0; i < a->numel && ok; i++) {
        double x = em_tensor_get_f64(ac, i), y = em_tensor_get_f64(bc, i);
        ok = x == y || (x != x && y != y) || fabs(x - y) <= tolerance * (1 + fabs(x));
    }
    em_tensor_release(ac);
    em_tensor_release(bc);
    return ok;
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
        sg = op == EM_OP_TOPK || op == EM_OP_KTHVALUE ? EM_OK : op == EM_OP_CAT ? em_cuda_cat(in, n_in, a, got)
             : op == EM_OP_CONV || op == EM_OP_CONV_WEIGHT || op == EM_OP_CONV_TRANSPOSE ? em_cuda_conv(op, in, n_in, a, got)
                                                                                     : em_cuda_run_movement(NULL, op, in, n_in, a, &got);
    }
    CHECK_MSG(sg == EM_OK && same(got, want), "%s: %s", what, sg == EM_OK ? "differs from the CPU's" : em_last_error());
    em_tensor_release(want);
    em_tensor_release(got);
}

/* topk (largest and smallest, sorted and in input order), kthvalue,
 * median and nanmedian (keepdim or not) composed from sort, against the
 * CPU's selection: the same values and indices, NaNs (lines of them too)
 * and ties included. */
static void selections(void) {
    int64_t shape[2] = {6, 11};
    em_dtype dts[2] = {EM_DTYPE_F32, EM_DTYPE_I64};
    for (int t = 0; t < 2; t++) {
        em_tensor *x = filled(dts[t], shape, 2, 5);
        if (t == 0)
            for (int64_t j = 0; j < x->numel; j += 7) ((float *)em_tensor_data(x))[j] = j % 2 ? 1.0f : NAN;
        if (t == 0) /* (a line of NaNs along dim 1, and one along dim 0) */
            for (int64_t j = 0; j < 11; j++) ((float *)em_tensor_data(x))[2 * 11 + j] = NAN;
        if (t == 0)
            for (int64_t j = 0; j < 6; j++) ((float *)em_tensor_data(x))[j * 11 + 4] = NAN;
        for (int dim = 0; dim < 2; dim++)
            for (int form = 0; form < 10; form++) {
                em_attrs a;
                memset(&a, 0, sizeof a);
                a.n_dims = 1;
                a.dims[0] = dim;
                a.k = form < 4 ? 3 : 2;
                a.descending = form == 0 || form == 2;
                a.sorted = form < 2;
                a.keepdim = form == 5;
                em_op op = form < 4 ? EM_OP_TOPK : form < 6 ? EM_OP_KTHVALUE : form < 8 ? EM_OP_MEDIAN : EM_OP_NANMEDIAN;
                a.keepdim = form == 5 || form == 7 || form == 9;
                em_tensor *want[2] = {NULL, NULL};
                CHECK_MSG(em_op_run(op, &x, 1, &a, want, 2) == EM_OK, "%s on the CPU: %s", em_op_name(op),
                          em_last_error());
                if (!want[0]) continue;
                em_tensor *got[2] = {em_tensor_empty(want[0]->shape, want[0]->ndim, want[0]->dtype, em_cpu()),
                                     em_tensor_empty(want[1]->shape, want[1]->ndim, EM_DTYPE_I64, em_cpu())};
                em_status st = em_cuda_select(op, &x, &a, got);
                CHECK_MSG(st == EM_OK && same(got[0], want[0]) && same(got[1], want[1]),
                          "%s (form %d, dim %d, %s): %s", em_op_name(op), form, dim, em_dtype_name(dts[t]),
                          st == EM_OK ? "differs from the CPU's" : em_last_error());
                em_tensor *objs[] = {want[0], want[1], got[0], got[1]};
                for (int o = 0; o < 4; o++) em_tensor_release(objs[o]);
            }
        em_tensor_release(x);
    }
}

/* conv (groups 1 and 2, stride, padding, dilation, bias; a channels-last
 * input), its weight gradient, and conv_transpose (output padding), in
 * float64, 2-d and 1-d. */
static void convolutions(void) {
    tolerance = 1e-12;
    for (int groups = 1; groups <= 2; groups++)
        for (int last = 0; last < 2; last++) {
            int64_t xs[4] = {2, 4, 9, 8}, ws[4] = {6, 4 / groups, 3, 2}, bs[1] = {6};
            em_tensor *x = filled(EM_DTYPE_F64, xs, 4, 1), *w = filled(EM_DTYPE_F64, ws, 4, 2),
                      *b = filled(EM_DTYPE_F64, bs, 1, 3);
            if (last) { /* the same values, channels-last in memory */
                int64_t ls[4] = {2, 9, 8, 4}, perm[4] = {0, 3, 1, 2};
                em_tensor *base = em_tensor_empty(ls, 4, EM_DTYPE_F64, em_cpu()), *p = em_permute(base, perm, 4);
                em_copy_into(p, x);
                em_tensor_release(base);
                em_tensor_release(x);
                x = p;
            }
            em_attrs a;
            memset(&a, 0, sizeof a);
            a.n_stride = a.n_dilation = 2;
            a.n_padding = 4;
            a.stride[0] = 2, a.stride[1] = 1, a.dilation[0] = 1, a.dilation[1] = 2;
            a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = 1;
            a.groups = groups;
            em_tensor *in3[3] = {x, w, b};
            compare("conv", EM_OP_CONV, in3, 3, &a);
            compare("conv without bias", EM_OP_CONV, in3, 2, &a);
            em_tensor *y = NULL;
            CHECK(em_op_run(EM_OP_CONV, in3, 2, &a, &y, 1) == EM_OK);
            em_tensor *gy = y ? filled(EM_DTYPE_F64, y->shape, 4, 4) : NULL;
            em_attrs wa = a;
            wa.n_shape = 4;
            memcpy(wa.shape, ws, sizeof ws);
            em_tensor *pair[2] = {x, gy};
            if (gy) compare("conv_weight", EM_OP_CONV_WEIGHT, pair, 2, &wa);
            /* conv_transpose: gy back to x's shape through w (output padding 1 along dim 0) */
            em_attrs ta = a;
            ta.n_shape = 4;
            int64_t big[4] = {2, 4, 10, 8};
            memcpy(ta.shape, big, sizeof big);
            em_tensor *wt = filled(EM_DTYPE_F64, (int64_t[4]){6, 4 / groups, 3, 2}, 4, 5), *tin[3] = {gy, wt, NULL};
            em_tensor *tb = filled(EM_DTYPE_F64, (int64_t[1]){4}, 1, 6);
            tin[2] = tb;
            if (gy && gy->shape[1] == 6) {
                compare("conv_transpose", EM_OP_CONV_TRANSPOSE, tin, 3, &ta);
                compare("conv_transpose without bias", EM_OP_CONV_TRANSPOSE, tin, 2, &ta);
            }
            em_tensor *objs[] = {x, w, b, y, gy, wt, tb};
            for (int i = 0; i < 7; i++) em_tensor_release(objs[i]);
        }
    /* 1-d */
    int64_t xs[3] = {3, 2, 11}, ws[3] = {5, 2, 4};
    em_tensor *x = filled(EM_DTYPE_F64, xs, 3, 7), *w = filled(EM_DTYPE_F64, ws, 3, 8), *in2[2] = {x, w};
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_stride = a.n_dilation = 1;
    a.n_padding = 2;
    a.stride[0] = 3, a.dilation[0] = 1, a.padding[0] = a.padding[1] = 2;
    a.groups = 1;
    compare("conv1d", EM_OP_CONV, in2, 2, &a);
    em_tensor_release(x);
    em_tensor_release(w);
    tolerance = 0;
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
    convolutions();
    selections();
    printf("flip, roll, tril, triu, nonzero, masked_select, cat, one_hot, the convolutions, topk, kthvalue and the medians as the CUDA device "
           "composes them: the CPU's results\n");
    return check_report();
}
