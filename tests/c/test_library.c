/*
 * test_library.c - the C API of the eager library (ops.h): every data
 * movement, indexing and factory entry point with its values and error
 * paths, each releasing everything it made. The sanitizer build runs this
 * with leak checking, and every test also checks the live tensor and
 * storage counts return to where they started, errors included.
 */
#include "check.h"
#include "ember/ops.h"
#include "ember/random.h"

static int64_t base_tensors, base_storages;

static void begin(void) {
    base_tensors = em_tensor_live_count();
    base_storages = em_storage_live_count();
}
static void end(const char *name) {
    CHECK_MSG(em_tensor_live_count() == base_tensors, "%s leaked %lld tensors", name,
              (long long)(em_tensor_live_count() - base_tensors));
    CHECK_MSG(em_storage_live_count() == base_storages, "%s leaked %lld storages", name,
              (long long)(em_storage_live_count() - base_storages));
}

/* 0, 1, 2, ... as a float32 tensor of the given shape. */
static em_tensor *iota(const int64_t *shape, int n) {
    int64_t numel = 1;
    for (int i = 0; i < n; i++) numel *= shape[i];
    em_tensor *a = em_arange(0, (double)numel, 1, EM_DTYPE_F32);
    em_tensor *r = em_reshape(a, shape, n);
    em_tensor_release(a);
    return r;
}

static double at(const em_tensor *t, int64_t i) { return em_tensor_get_f64(t, i); }

/* Checks t's values (row-major) against want[]. */
static void check_values(const char *what, const em_tensor *t, const double *want, int64_t n) {
    CHECK_MSG(t != NULL, "%s: NULL (%s)", what, em_last_error());
    if (!t) return;
    CHECK_MSG(t->numel == n, "%s: %lld elements, want %lld", what, (long long)t->numel, (long long)n);
    for (int64_t i = 0; i < n && i < t->numel; i++)
        CHECK_MSG(at(t, i) == want[i], "%s[%lld] = %g, want %g", what, (long long)i, at(t, i), want[i]);
}

static void expect_error(const char *what, em_tensor *t, em_status st, const char *needle) {
    CHECK_MSG(t == NULL, "%s: expected an error", what);
    em_tensor_release(t);
    CHECK_MSG(em_last_status() == st, "%s: status %d, want %d (%s)", what, em_last_status(), st,
              em_last_error());
    CHECK_MSG(check_contains(em_last_error(), needle), "%s: message '%s' lacks '%s'", what,
              em_last_error(), needle);
}

static void test_movement(void) {
    begin();
    int64_t s23[2] = {2, 3};
    em_tensor *x = iota(s23, 2);
    int64_t d1[1] = {1}, d01[2] = {0, 1}, sh[1] = {1};

    em_tensor *f = em_flip(x, d1, 1);
    check_values("flip", f, (double[]){2, 1, 0, 5, 4, 3}, 6);
    em_tensor *f2 = em_flip(x, d01, 2);
    check_values("flip both", f2, (double[]){5, 4, 3, 2, 1, 0}, 6);
    em_tensor *r = em_roll(x, sh, d1, 1);
    check_values("roll", r, (double[]){2, 0, 1, 5, 3, 4}, 6);
    em_tensor *parts[2] = {x, f};
    em_tensor *c0 = em_cat(parts, 2, 0), *c1 = em_cat(parts, 2, -1);
    CHECK(c0 && c0->shape[0] == 4 && c0->shape[1] == 3);
    CHECK(c1 && c1->shape[0] == 2 && c1->shape[1] == 6);
    check_values("cat dim 1", c1, (double[]){0, 1, 2, 2, 1, 0, 3, 4, 5, 5, 4, 3}, 12);
    em_tensor *lo = em_tril(x, 0), *up = em_triu(x, 1);
    check_values("tril", lo, (double[]){0, 0, 0, 3, 4, 0}, 6);
    check_values("triu 1", up, (double[]){0, 1, 2, 0, 0, 5}, 6);
    em_tensor *sl = em_slice(x, 1, 0, 3, 2), *se = em_select(x, 0, -1);
    check_values("slice", sl, (double[]){0, 2, 3, 5}, 4);
    check_values("select", se, (double[]){3, 4, 5}, 3);
    CHECK(sl && sl->storage == x->storage && se && se->storage == x->storage);
    em_tensor *u = em_unsqueeze(x, 1), *sq = u ? em_squeeze(u, NULL, 0) : NULL;
    CHECK(u && u->ndim == 3 && u->shape[1] == 1 && sq && sq->ndim == 2);

    int64_t bad[1] = {2};
    expect_error("flip dim", em_flip(x, bad, 1), EM_ERR_INDEX, "flip");
    em_tensor *odd = em_arange(0, 3, 1, EM_DTYPE_F32), *mixed[2] = {x, odd};
    expect_error("cat shapes", em_cat(mixed, 2, 0), EM_ERR_SHAPE, "cat");
    expect_error("tril 1-d", em_tril(odd, 0), EM_ERR_SHAPE, "tril");
    expect_error("select range", em_select(x, 0, 2), EM_ERR_INDEX, "select");

    em_tensor *all[] = {f, f2, r, c0, c1, lo, up, sl, se, u, sq, odd, x};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
    end("movement");
}

static void test_indexing(void) {
    begin();
    int64_t s34[2] = {3, 4};
    em_tensor *x = iota(s34, 2);
    em_tensor *idx = em_arange(2, -1, -2, EM_DTYPE_I64); /* [2, 0] */

    em_tensor *is = em_index_select(x, 0, idx);
    check_values("index_select", is, (double[]){8, 9, 10, 11, 0, 1, 2, 3}, 8);
    int64_t s21[2] = {2, 1};
    em_tensor *gi = em_reshape(idx, s21, 2);
    em_tensor *g = em_gather(x, 1, gi);
    check_values("gather", g, (double[]){2, 4}, 2);
    em_tensor *src = em_full(s21, 2, 100, EM_DTYPE_F32);
    em_tensor *sc = em_scatter(x, 1, gi, src, false), *sa = em_scatter(x, 1, gi, src, true);
    CHECK(sc && at(sc, 2) == 100 && at(sc, 4) == 100 && at(sc, 0) == 0);
    CHECK(sa && at(sa, 2) == 102 && at(sa, 4) == 104);
    CHECK(at(x, 2) == 2); /* out of place */

    int64_t d0[1] = {0}, d01[2] = {0, 1};
    em_tensor *ix[2] = {idx, idx};
    em_tensor *i1 = em_index(x, ix, d0, 1), *i2 = em_index(x, ix, d01, 2);
    CHECK(i1 && i1->ndim == 2 && i1->shape[0] == 2 && i1->shape[1] == 4);
    check_values("index 2", i2, (double[]){10, 0}, 2);
    em_tensor *v = em_full(NULL, 0, -1, EM_DTYPE_F32);
    em_tensor *ip = em_index_put(x, ix, d01, 2, v, false), *ia = em_index_put(x, ix, d01, 2, v, true);
    CHECK(ip && at(ip, 10) == -1 && at(ip, 0) == -1 && at(ip, 1) == 1);
    CHECK(ia && at(ia, 10) == 9 && at(ia, 0) == -1);

    em_tensor *cls = em_arange(0, 3, 1, EM_DTYPE_I64), *oh = em_one_hot(cls, 4);
    check_values("one_hot", oh, (double[]){1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, 12);
    em_tensor *half = em_full(NULL, 0, 5.5, EM_DTYPE_F32);
    em_tensor *mask = em_binary(EM_OP_GT, x, half);
    em_tensor *nz = em_nonzero(mask), *ms = em_masked_select(x, mask);
    CHECK(nz && nz->ndim == 2 && nz->shape[0] == 6 && nz->shape[1] == 2);
    check_values("masked_select", ms, (double[]){6, 7, 8, 9, 10, 11}, 6);

    em_tensor *far = em_arange(3, 4, 1, EM_DTYPE_I64); /* [3] */
    expect_error("index_select range", em_index_select(x, 0, far), EM_ERR_INDEX, "out of bounds");
    int64_t s11[2] = {1, 1};
    em_tensor *far2 = em_reshape(far, s11, 2);
    expect_error("gather range", em_gather(x, 0, far2), EM_ERR_RUNTIME, "out of bounds");
    expect_error("scatter range", em_scatter(x, 0, far2, src, false), EM_ERR_RUNTIME, "out of bounds");
    expect_error("index range", em_index(x, &far, d0, 1), EM_ERR_INDEX, "out of bounds");
    expect_error("one_hot range", em_one_hot(cls, 2), EM_ERR_VALUE, "one_hot");
    expect_error("index_select float", em_index_select(x, 0, x), EM_ERR_DTYPE, "integer");
    expect_error("masked_select mask", em_masked_select(x, x), EM_ERR_DTYPE, "bool");

    em_tensor *all[] = {is, gi, g, src, sc, sa, i1, i2, v, ip, ia, cls, oh, half, mask, nz, ms,
                        far, far2, idx, x};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
    end("indexing");
}

static void test_factories(void) {
    begin();
    em_tensor *l = em_linspace(0, 1, 5, EM_DTYPE_F64);
    check_values("linspace", l, (double[]){0, 0.25, 0.5, 0.75, 1}, 5);
    em_tensor *l1 = em_linspace(2, 3, 1, EM_DTYPE_F32);
    check_values("linspace 1", l1, (double[]){2}, 1);
    em_tensor *e = em_eye(2, 3, EM_DTYPE_I32);
    check_values("eye", e, (double[]){1, 0, 0, 0, 1, 0}, 6);
    int64_t s[1] = {1000};
    em_manual_seed(3);
    em_tensor *ri = em_randint(-2, 3, s, 1, EM_DTYPE_I8);
    bool in_range = ri != NULL;
    for (int64_t i = 0; ri && i < ri->numel; i++) in_range &= at(ri, i) >= -2 && at(ri, i) < 3;
    CHECK(in_range && ri->dtype == EM_DTYPE_I8);
    em_tensor *p = em_randperm(100, EM_DTYPE_I64);
    double seen = 0;
    for (int64_t i = 0; p && i < 100; i++) seen += at(p, i);
    CHECK(p && seen == 4950);
    em_tensor *em = em_empty(s, 1, EM_DTYPE_BF16);
    CHECK(em && em->numel == 1000 && em->dtype == EM_DTYPE_BF16);
    em_tensor *big = em_full_i64(s, 1, (int64_t)1 << 60, EM_DTYPE_I64);
    CHECK(big && (int64_t)at(big, 999) == (int64_t)1 << 60);

    expect_error("randint bounds", em_randint(3, 3, s, 1, EM_DTYPE_I64), EM_ERR_VALUE, "randint");
    expect_error("randperm n", em_randperm(-1, EM_DTYPE_I64), EM_ERR_VALUE, "randperm");
    expect_error("eye n", em_eye(-1, 2, EM_DTYPE_F32), EM_ERR_VALUE, "eye");

    em_tensor *all[] = {l, l1, e, ri, p, em, big};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
    end("factories");
}

static void test_inplace_and_errors(void) {
    begin();
    int64_t s[2] = {2, 3}, s3[1] = {3};
    em_tensor *x = iota(s, 2), *row = em_full(s3, 1, 10, EM_DTYPE_F32);
    em_tensor *in[2] = {x, row};
    em_attrs at0;
    memset(&at0, 0, sizeof at0);
    uint64_t v0 = x->storage->version;
    CHECK(em_op_run_inplace(EM_OP_ADD, in, 2, &at0, x) == EM_OK);
    check_values("add_", x, (double[]){10, 11, 12, 13, 14, 15}, 6);
    CHECK(x->storage->version > v0);
    em_tensor *i64 = em_full(s3, 1, 1, EM_DTYPE_I64), *in2[2] = {i64, row};
    CHECK(em_op_run_inplace(EM_OP_ADD, in2, 2, &at0, i64) != EM_OK); /* float into int64 */
    CHECK(check_contains(em_last_error(), "can't be cast"));
    em_tensor *one = em_full(NULL, 0, 0, EM_DTYPE_I64);
    em_tensor *q = em_binary(EM_OP_FLOOR_DIVIDE, i64, one);
    expect_error("integer // 0", q, EM_ERR_RUNTIME, "ZeroDivisionError");
    em_tensor *all[] = {x, row, i64, one};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
    end("in place");
}

int main(void) {
    test_movement();
    test_indexing();
    test_factories();
    test_inplace_and_errors();
    return check_report();
}
