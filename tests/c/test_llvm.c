/*
 * test_llvm.c - the LLVM backend gives bit-identical results to the
 * interpreter (eager kernels) on fused graphs of every shape class, and its
 * kernels vectorise; its whole-graph function plans memory, runs from
 * several threads at once and stops cleanly at a failing node.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "ember/frontend.h"
#include "ember/passes.h"

static char *dumped_opt;

static void grab(void *ctx, const char *name, const char *text) {
    (void)ctx;
    if (strcmp(name, "kernels.opt.ll") == 0) {
        free(dumped_opt);
        dumped_opt = strdup(text);
    }
}

static em_tensor *input_for(const em_type *t, int k) {
    em_tensor *x = em_randn(t->shape, t->ndim, EM_DTYPE_F64);
    em_tensor *s = em_tensor_scalar(3.0, EM_DTYPE_F64);
    em_tensor *y = em_mul(x, s); /* values in about [-10, 10]: exercises every branch */
    em_tensor *c = em_cast(y, t->dtype);
    em_tensor_release(x);
    em_tensor_release(s);
    em_tensor_release(y);
    (void)k;
    return c;
}

/* Runs `text` (after the default pipeline) on both backends with the given
 * inputs and checks every result bit for bit. */
static void same_on_both(const char *text, em_tensor **in) {
    const em_backend *llvm = em_llvm_backend(), *interp = em_interp_backend();
    CHECK(llvm != NULL);
    if (!llvm) return;
    em_ir_graph *g = em_ir_parse(text, "t.ir");
    CHECK_MSG(g != NULL, "%s", em_last_error());
    if (!g) return;
    const char *pipe[] = {"dce", "fuse", "dce"};
    CHECK(em_pass_run_pipeline(g, pipe, 3, true, NULL, NULL, NULL) == EM_OK);
    int n_in = g->body->n_params, n_out = g->body->n_results;
    em_backend_opts bo = {in, n_in, grab, NULL, NULL, false};
    void *ls = NULL, *is = NULL;
    CHECK_MSG(llvm->compile(g, &bo, &ls) == EM_OK, "%s", em_last_error());
    CHECK(interp->compile(g, &bo, &is) == EM_OK);
    em_tensor *a[8] = {0}, *b[8] = {0};
    CHECK_MSG(ls && llvm->run(ls, in, n_in, a, n_out) == EM_OK, "%s", em_last_error());
    CHECK(interp->run(is, in, n_in, b, n_out) == EM_OK);
    for (int r = 0; r < n_out; r++) {
        int same = a[r] && b[r] && a[r]->numel == b[r]->numel && a[r]->dtype == b[r]->dtype;
        int64_t bad = -1;
        for (int64_t i = 0; same && i < a[r]->numel; i++) {
            double x = em_tensor_get_f64(a[r], i), y = em_tensor_get_f64(b[r], i);
            if (!(x == y || (x != x && y != y))) {
                same = 0;
                bad = i;
            }
        }
        CHECK_MSG(same, "@%s result %d differs at %lld: %.9g vs %.9g", g->name, r, (long long)bad,
                  bad >= 0 ? em_tensor_get_f64(a[r], bad) : 0.0,
                  bad >= 0 ? em_tensor_get_f64(b[r], bad) : 0.0);
        em_tensor_release(a[r]);
        em_tensor_release(b[r]);
    }
    if (ls) llvm->free(ls);
    interp->free(is);
    em_ir_graph_free(g);
}

static void run_case(const char *text) {
    em_ir_graph *g = em_ir_parse(text, "t.ir");
    CHECK_MSG(g != NULL, "%s", em_last_error());
    if (!g) return;
    em_tensor *in[8];
    int n = g->body->n_params;
    for (int i = 0; i < n; i++) in[i] = input_for(&g->body->params[i]->type, i);
    em_ir_graph_free(g);
    same_on_both(text, in);
    for (int i = 0; i < n; i++) em_tensor_release(in[i]);
}

static void test_gelu_vectorises(void) {
    run_case("graph @gelu(%x: f32[100003]) -> (f32[100003]) {\n"
             "  %0 = full() {value=0.5} : f32[]\n  %1 = mul(%0, %x) : f32[100003]\n"
             "  %2 = mul(%x, %x) : f32[100003]\n  %3 = mul(%2, %x) : f32[100003]\n"
             "  %4 = full() {value=0.044715} : f32[]\n  %5 = mul(%4, %3) : f32[100003]\n"
             "  %6 = add(%x, %5) : f32[100003]\n  %7 = full() {value=0.7978845608} : f32[]\n"
             "  %8 = mul(%7, %6) : f32[100003]\n  %9 = tanh(%8) : f32[100003]\n"
             "  %10 = full() {value=1} : f32[]\n  %11 = add(%10, %9) : f32[100003]\n"
             "  %12 = mul(%1, %11) : f32[100003]\n  return %12\n}\n");
    CHECK_STR_CONTAINS(dumped_opt, "x float>"); /* a vector loop was made */
    CHECK(dumped_opt && !strstr(dumped_opt, "call float @em_scalar")); /* all inlined */
}

static void test_shapes_and_dtypes(void) {
    /* broadcasting on both sides, several rows */
    run_case("graph @bc(%a: f32[37,1,5], %b: f32[4,1]) -> (f32[37,4,5]) {\n"
             "  %0 = exp(%b) : f32[4,1]\n  %1 = sub(%a, %0) : f32[37,4,5]\n"
             "  %2 = sigmoid(%1) : f32[37,4,5]\n  return %2\n}\n");
    /* transcendental edge cases and every f32 op */
    run_case("graph @ops(%a: f32[3000], %b: f32[3000]) -> (f32[3000], f32[3000]) {\n"
             "  %0 = log(%a) : f32[3000]\n  %1 = maximum(%0, %b) : f32[3000]\n"
             "  %2 = div(%1, %a) : f32[3000]\n  %3 = relu(%2) : f32[3000]\n"
             "  %4 = neg(%3) : f32[3000]\n  %5 = full() {value=3} : f32[]\n"
             "  %6 = pow(%b, %5) : f32[3000]\n  %7 = full() {value=1.7} : f32[]\n"
             "  %8 = pow(%b, %7) : f32[3000]\n  %9 = tanh(%6) : f32[3000]\n"
             "  %10 = add(%9, %8) : f32[3000]\n  return %4, %10\n}\n");
    /* float64, int64 and bool, with promotion and casts */
    run_case("graph @dt(%a: f64[50], %i: i64[50], %m: bool[50]) -> (f64[50], i64[50], bool[50]) {\n"
             "  %0 = add(%a, %i) : f64[50]\n  %1 = tanh(%0) : f64[50]\n"
             "  %2 = mul(%i, %i) : i64[50]\n  %3 = relu(%2) : i64[50]\n"
             "  %4 = cast(%a) : i64[50]\n  %5 = sub(%3, %4) : i64[50]\n"
             "  %6 = add(%m, %m) : bool[50]\n  %7 = cast(%5) : bool[50]\n"
             "  %8 = mul(%6, %7) : bool[50]\n  return %1, %5, %8\n}\n");
    /* 0-d and empty tensors */
    run_case("graph @tiny(%s: f32[], %e: f32[0,4]) -> (f32[], f32[0,4]) {\n"
             "  %0 = exp(%s) : f32[]\n  %1 = neg(%0) : f32[]\n"
             "  %2 = add(%e, %s) : f32[0,4]\n  %3 = exp(%2) : f32[0,4]\n  return %1, %3\n}\n");
    /* an intermediate used after the kernel: a second output */
    run_case("graph @two(%x: f32[8,9]) -> (f32[8,9], f32[9]) {\n"
             "  %0 = exp(%x) : f32[8,9]\n  %1 = neg(%0) : f32[8,9]\n"
             "  %2 = sum(%0) {dims=[0], keepdim=false} : f32[9]\n  return %1, %2\n}\n");
}

static void test_strided_inputs(void) {
    /* a transposed input: the kernel reads it through its strides */
    const char *text = "graph @t(%x: f32[6,5], %y: f32[6,5]) -> (f32[6,5]) {\n"
                       "  %0 = mul(%x, %y) : f32[6,5]\n  %1 = tanh(%0) : f32[6,5]\n"
                       "  return %1\n}\n";
    int64_t s[2] = {5, 6}, s2[2] = {6, 5};
    em_tensor *base = em_randn(s, 2, EM_DTYPE_F32), *x = em_transpose(base, 0, 1);
    em_tensor *y = em_randn(s2, 2, EM_DTYPE_F32);
    em_tensor *in[2] = {x, y};
    same_on_both(text, in);
    /* a view made inside the graph (permute) feeding a kernel */
    const char *text2 = "graph @p(%x: f32[5,6]) -> (f32[6,5]) {\n"
                        "  %0 = permute(%x) {dims=[1,0]} : f32[6,5]\n  %1 = exp(%0) : f32[6,5]\n"
                        "  return %1\n}\n";
    em_tensor *in2[1] = {base};
    same_on_both(text2, in2);
    em_tensor_release(y);
    em_tensor_release(x);
    em_tensor_release(base);
}

static bool all_equal(em_tensor *t, em_tensor *want) {
    for (int64_t i = 0; i < want->numel; i++)
        if (em_tensor_get_f64(t, i) != em_tensor_get_f64(want, i)) return false;
    return true;
}

/* A write-back computed in its input's memory (donation): when every value
 * guard held and no other input shares that memory; otherwise in a new
 * buffer, the input untouched. */
static void test_write_back_in_place(void) {
    const char *text = "graph @sgd(%p: f32[4096], %g: f32[4096], %s: f32[]) -> (f32[], f32[4096]) {\n"
                       "  %0 = full() {value=0.5} : f32[]\n  %1 = mul(%g, %0) : f32[4096]\n"
                       "  %2 = sub(%p, %1) : f32[4096]\n  return %s, %2\n}\n";
    em_ir_graph *g = em_ir_parse(text, "t.ir");
    const char *pipe[] = {"dce", "fuse", "dce"};
    CHECK(g && em_pass_run_pipeline(g, pipe, 3, true, NULL, NULL, NULL) == EM_OK);
    int64_t n = 4096;
    em_tensor *p = em_randn(&n, 1, EM_DTYPE_F32), *grad = em_randn(&n, 1, EM_DTYPE_F32);
    em_tensor *seen = em_tensor_scalar(1.0, EM_DTYPE_F32), *other = em_tensor_scalar(2.0, EM_DTYPE_F32);
    em_tensor *half = em_tensor_scalar(0.5, EM_DTYPE_F32), *step = em_mul(grad, half);
    em_tensor *want = em_sub(p, step), *p_old = em_clone(p), *self = em_mul(p, half);
    em_tensor *want_self = em_sub(p, self);
    em_tensor *expected[2] = {seen, NULL};
    em_effect writes[1] = {{EM_EFFECT_WRITE, 0, 1, false}}; /* p <- result 1 */
    em_run_spec spec = {0, expected, writes, 1};
    em_tensor *in[3] = {p, grad, seen};
    em_backend_opts bo = {in, 3, NULL, NULL, &spec, false};
    const em_backend *llvm = em_llvm_backend();
    void *x = NULL;
    CHECK_MSG(llvm->compile(g, &bo, &x) == EM_OK, "%s", em_last_error());
    char *desc = llvm->describe(x);
    CHECK_STR_CONTAINS(desc, "written in place into graph input 0");
    free(desc);
    uint64_t v0 = p->storage->version;
    /* a guard fails: the run stops before the kernel, p is as it was */
    em_tensor *bad[3] = {p, grad, other};
    CHECK(llvm->run(x, bad, 3, NULL, 0) == EM_ERR_GUARD);
    CHECK(all_equal(p, p_old) && p->storage->version == v0);
    /* g shares p's memory: computed in a new buffer, then written back */
    em_tensor *shared[3] = {p, p, seen};
    CHECK(llvm->run(x, shared, 3, NULL, 0) == EM_OK);
    CHECK(all_equal(p, want_self) && p->storage->version > v0);
    em_tensor *p_restored = em_clone(p_old);
    CHECK(em_assign(p, p_restored) == EM_OK && all_equal(p, p_old));
    em_tensor_release(p_restored);
    /* donated: computed in p's own memory (a new buffer would be adopted:
     * p's memory would move) */
    void *p_mem = em_tensor_data(p);
    CHECK(llvm->run(x, in, 3, NULL, 0) == EM_OK);
    CHECK(all_equal(p, want) && em_tensor_data(p) == p_mem);
    llvm->free(x);
    em_ir_graph_free(g);
    em_tensor *ts[] = {p, grad, seen, other, half, step, want, p_old, self, want_self};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) em_tensor_release(ts[i]);
}

/* Compiles `text` (no passes) on LLVM; *x the executable. */
static em_ir_graph *compile_llvm(const char *text, em_tensor **in, void **x) {
    em_ir_graph *g = em_ir_parse(text, "t.ir");
    CHECK_MSG(g != NULL, "%s", em_last_error());
    em_backend_opts bo = {in, g ? g->body->n_params : 0, NULL, NULL, NULL, false};
    *x = NULL;
    if (g) CHECK_MSG(em_llvm_backend()->compile(g, &bo, x) == EM_OK, "%s", em_last_error());
    return g;
}

static const char *chain = "graph @chain(%x: f32[64,64], %w: f32[64,64]) -> (f32[64,64]) {\n"
                           "  %0 = matmul(%x, %w) : f32[64,64]\n  %1 = matmul(%0, %w) : f32[64,64]\n"
                           "  %2 = matmul(%1, %w) : f32[64,64]\n  %3 = matmul(%2, %w) : f32[64,64]\n"
                           "  return %3\n}\n";

typedef struct {
    void *x;
    em_tensor **in, *want;
    int bad;
} runner;

static void *run_many(void *arg) {
    runner *r = arg;
    for (int i = 0; i < 200; i++) {
        em_tensor *got = NULL;
        if (em_llvm_backend()->run(r->x, r->in, 2, &got, 1) != EM_OK || !all_equal(got, r->want)) r->bad++;
        em_tensor_release(got);
    }
    return NULL;
}

/* The three intermediate products live in an arena, the first and the
 * third in the same bytes (their lifetimes do not overlap); two threads
 * running the graph at once (one of them on a frame of its own) get the
 * interpreter's results every time. */
static void test_memory_plan(void) {
    int64_t s[2] = {64, 64};
    em_tensor *x = em_randn(s, 2, EM_DTYPE_F32), *w = em_randn(s, 2, EM_DTYPE_F32);
    em_tensor *in[2] = {x, w};
    same_on_both(chain, in);
    void *ex = NULL;
    em_ir_graph *g = compile_llvm(chain, in, &ex);
    if (!ex) return;
    char *desc = em_llvm_backend()->describe(ex);
    CHECK_STR_CONTAINS(desc, "one compiled function runs the graph's 4 nodes; memory plan: 3 "
                             "intermediate values in one 32768-byte arena per run");
    free(desc);
    em_tensor *want = NULL;
    void *it = NULL;
    em_backend_opts bo = {in, 2, NULL, NULL, NULL, false};
    CHECK(em_interp_backend()->compile(g, &bo, &it) == EM_OK && em_interp_backend()->run(it, in, 2, &want, 1) == EM_OK);
    runner r[2] = {{ex, in, want, 0}, {ex, in, want, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run_many, &r[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(r[0].bad == 0 && r[1].bad == 0);
    em_interp_backend()->free(it);
    em_llvm_backend()->free(ex);
    em_ir_graph_free(g);
    em_tensor_release(want);
    em_tensor_release(x);
    em_tensor_release(w);
}

/* A node failing at run time stops the run with its error, naming the op;
 * the values made before it are released (the leak check in main). */
static void test_failing_node(void) {
    const char *text = "graph @pick(%x: f32[5000], %i: i64[3]) -> (f32[3]) {\n"
                       "  %0 = exp(%x) : f32[5000]\n  %1 = neg(%0) : f32[5000]\n"
                       "  %2 = index_select(%1, %i) {dims=[0]} : f32[3]\n  return %2\n}\n";
    int64_t n = 5000, k = 3;
    em_tensor *x = em_randn(&n, 1, EM_DTYPE_F32), *idx = em_full_i64(&k, 1, 7, EM_DTYPE_I64);
    em_tensor *in[2] = {x, idx};
    void *ex = NULL;
    em_ir_graph *g = em_ir_parse(text, "t.ir");
    const char *pipe[] = {"dce", "fuse", "dce"};
    CHECK(g && em_pass_run_pipeline(g, pipe, 3, true, NULL, NULL, NULL) == EM_OK);
    em_backend_opts bo = {in, 2, NULL, NULL, NULL, false};
    CHECK(g && em_llvm_backend()->compile(g, &bo, &ex) == EM_OK);
    em_tensor *got = NULL, *e = em_exp(x), *ne = em_neg(e), *want = em_index_select(ne, 0, idx);
    CHECK(em_llvm_backend()->run(ex, in, 2, &got, 1) == EM_OK && got && all_equal(got, want));
    em_tensor_release(got);
    em_tensor_release(want);
    em_tensor_release(ne);
    em_tensor_release(e);
    got = NULL;
    em_tensor *bad = em_full_i64(&k, 1, 9000, EM_DTYPE_I64), *in2[2] = {x, bad};
    CHECK(em_llvm_backend()->run(ex, in2, 2, &got, 1) != EM_OK && got == NULL);
    CHECK_STR_CONTAINS(em_last_error(), "index_select");
    em_llvm_backend()->free(ex);
    em_ir_graph_free(g);
    em_tensor_release(bad);
    em_tensor_release(idx);
    em_tensor_release(x);
}

int main(void) {
    RUN(test_gelu_vectorises);
    RUN(test_memory_plan);
    RUN(test_failing_node);
    RUN(test_write_back_in_place);
    RUN(test_shapes_and_dtypes);
    RUN(test_strided_inputs);
    free(dumped_opt);
    CHECK(em_tensor_live_count() == 0);
    return check_report();
}
