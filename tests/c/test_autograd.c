/*
 * test_autograd.c - the autograd C API (autograd.h) without Python: a
 * backward through a small graph, autograd.grad with create_graph, the
 * errors, and that every node, tensor and storage is freed afterwards (the
 * sanitizer build runs this with leak checking).
 */
#include "check.h"
#include "ember/autograd.h"
#include "ember/ops.h"

static void check_counts(const char *what, int64_t tensors, int64_t storages, int64_t nodes) {
    CHECK_MSG(em_tensor_live_count() == tensors, "%s: %lld tensors leaked", what,
              (long long)(em_tensor_live_count() - tensors));
    CHECK_MSG(em_storage_live_count() == storages, "%s: %lld storages leaked", what,
              (long long)(em_storage_live_count() - storages));
    CHECK_MSG(em_node_live_count() == nodes, "%s: %lld nodes leaked", what,
              (long long)(em_node_live_count() - nodes));
}

/* loss = sum(tanh(x @ w) * x[:, :1]); dloss/dw and dloss/dx by hand. */
static void test_backward(void) {
    int64_t t0 = em_tensor_live_count(), s0 = em_storage_live_count(), n0 = em_node_live_count();
    int64_t xs[2] = {2, 3}, ws[2] = {3, 2};
    em_tensor *x0 = em_arange(0, 6, 1, EM_DTYPE_F64), *w0 = em_arange(-3, 3, 1, EM_DTYPE_F64);
    em_tensor *x = em_reshape(x0, xs, 2), *w = em_reshape(w0, ws, 2);
    em_tensor *scale = em_full(NULL, 0, 0.1, EM_DTYPE_F64);
    em_tensor *ws_ = em_mul(w, scale);
    em_tensor_release(w);
    w = ws_;
    CHECK(em_set_requires_grad(x, true) == EM_OK && em_set_requires_grad(w, true) == EM_OK);
    em_tensor *h = em_matmul(x, w), *t = em_tanh(h), *col = em_slice(x, 1, 0, 1, 1);
    em_tensor *p = em_mul(t, col), *loss = em_sum(p, NULL, 0, false);
    CHECK(loss && em_requires_grad(loss) && em_grad_fn(loss));
    char name[64];
    CHECK(strcmp(em_node_name(em_grad_fn(loss), name, sizeof name), "SumBackward0") == 0);
    CHECK(em_backward(&loss, NULL, 1, false, false) == EM_OK);
    CHECK(em_tensor_grad(x) && em_tensor_grad(w));
    /* dL/dw[k][j] = sum_i x[i][k] (1 - t[i][j]^2) x[i][0] */
    for (int k = 0; k < 3 && em_tensor_grad(w); k++)
        for (int j = 0; j < 2; j++) {
            double want = 0;
            for (int i = 0; i < 2; i++) {
                double ti = em_tensor_get_f64(t, i * 2 + j);
                want += em_tensor_get_f64(x, i * 3 + k) * (1 - ti * ti) * em_tensor_get_f64(x, i * 3);
            }
            CHECK_NEAR(em_tensor_get_f64(em_tensor_grad(w), k * 2 + j), want, 1e-12);
        }
    /* a second backward without retain_graph is an error, not a crash */
    CHECK(em_backward(&loss, NULL, 1, false, false) == EM_ERR_RUNTIME);
    CHECK(check_contains(em_last_error(), "second time"));
    em_tensor *all[] = {x0, w0, x, w, scale, h, t, col, p, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
    check_counts("backward", t0, s0, n0);
}

/* d2/dx2 of x^3 is 6x, through autograd.grad with create_graph. */
static void test_double_backward(void) {
    int64_t t0 = em_tensor_live_count(), s0 = em_storage_live_count(), n0 = em_node_live_count();
    em_tensor *x = em_full(NULL, 0, 1.5, EM_DTYPE_F64);
    em_set_requires_grad(x, true);
    em_tensor *three = em_full(NULL, 0, 3, EM_DTYPE_F64), *y = em_pow(x, three);
    em_tensor *g = NULL, *h = NULL;
    CHECK(em_autograd_grad(&y, NULL, 1, &x, 1, false, true, false, &g) == EM_OK);
    CHECK(g && em_requires_grad(g));
    if (g) CHECK_NEAR(em_tensor_get_f64(g, 0), 3 * 1.5 * 1.5, 1e-12);
    CHECK(g && em_autograd_grad(&g, NULL, 1, &x, 1, false, false, false, &h) == EM_OK);
    if (h) CHECK_NEAR(em_tensor_get_f64(h, 0), 6 * 1.5, 1e-12);
    CHECK(em_tensor_grad(x) == NULL); /* autograd.grad leaves .grad alone */
    em_tensor *all[] = {x, three, y, g, h};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
    check_counts("double backward", t0, s0, n0);
}

static void test_errors(void) {
    int64_t t0 = em_tensor_live_count(), s0 = em_storage_live_count(), n0 = em_node_live_count();
    int64_t shape[1] = {3};
    em_tensor *i = em_zeros(shape, 1, EM_DTYPE_I64);
    CHECK(em_set_requires_grad(i, true) == EM_ERR_RUNTIME);
    em_tensor *x = em_ones(shape, 1, EM_DTYPE_F32);
    em_set_requires_grad(x, true);
    em_tensor *y = em_exp(x);
    CHECK(em_backward(&y, NULL, 1, false, false) == EM_ERR_RUNTIME); /* not a scalar */
    CHECK(check_contains(em_last_error(), "scalar"));
    /* exp saved its result; writing into it invalidates the graph */
    em_tensor *ops[2] = {y, y};
    em_attrs at;
    memset(&at, 0, sizeof at);
    CHECK(em_op_run_inplace(EM_OP_ADD, ops, 2, &at, y) == EM_OK);
    em_tensor *s = em_sum(y, NULL, 0, false);
    CHECK(em_backward(&s, NULL, 1, false, false) == EM_ERR_RUNTIME);
    CHECK(check_contains(em_last_error(), "modified by an inplace operation"));
    /* grad mode off: nothing recorded */
    bool was = em_set_grad_enabled(false);
    em_tensor *z = em_exp(x);
    CHECK(was && z && !em_requires_grad(z) && !em_grad_fn(z));
    em_set_grad_enabled(true);
    em_tensor *all[] = {i, x, y, s, z};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) em_tensor_release(all[k]);
    check_counts("errors", t0, s0, n0);
}

int main(void) {
    test_backward();
    test_double_backward();
    test_errors();
    return check_report();
}
