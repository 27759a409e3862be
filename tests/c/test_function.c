/*
 * test_function.c - a compiled function driven from C with no Python at
 * all: the host protocol of em_function (trace, compile, run, explain),
 * guards and misses, write-backs, host state and data, the cache limit and
 * the compile switch.
 */
#include <stdlib.h>

#include "check.h"
#include "ember/frontend.h"

/* ---- a host: C functions instead of Python ones ---- */

typedef struct {
    int holds;    /* what state_holds answers */
    int released; /* how often release ran */
} host_state;

static host_state state;

static bool loc(void *ctx, const char **file, int *line) {
    (void)ctx;
    *file = "model.c";
    *line = 7;
    return true;
}
static int holds(void *data) { return ((host_state *)data)->holds; }
static char *describe(void *data, int first) {
    (void)data;
    char *s = malloc(64);
    if (s) snprintf(s, 64, "host state from input %d\n", first);
    return s;
}
static void release(void *data) { ((host_state *)data)->released++; }

static const em_function_host host = {loc, NULL, holds, NULL, describe, release, NULL, NULL, NULL, NULL};

/* y = relu(x @ w + b) * 0.5, w captured. */
static em_tensor *model(em_tensor *x, em_tensor *w, em_tensor *b) {
    em_tensor *h = em_matmul(x, w), *a = em_add(h, b), *r = em_relu(a);
    em_tensor *half = em_tensor_scalar(0.5, EM_DTYPE_F32);
    half->is_wrapped_number = true;
    em_tensor *y = em_mul(r, half);
    em_tensor *drop[] = {h, a, r, half};
    for (int i = 0; i < 4; i++) em_tensor_release(drop[i]);
    return y;
}

static bool same_values(const em_tensor *a, const em_tensor *b) {
    if (a->numel != b->numel) return false;
    for (int64_t i = 0; i < a->numel; i++)
        if (em_tensor_get_f64(a, i) != em_tensor_get_f64(b, i)) return false;
    return true;
}

static em_arg tensor_arg(const char *name, em_tensor *t) {
    em_arg a = {EM_ARG_TENSOR, name, t, 0, 0, NULL, 0};
    return a;
}

/* One call as a host makes it: the driver decides, the host runs the model
 * when told to (eagerly, or on proxies while the trace records). Returns the
 * result (a new reference) and the kind of call it was. */
static em_tensor *call(em_function *f, em_tensor *x, em_tensor *w, em_tensor *b, em_call_kind *kind) {
    em_arg args[2] = {tensor_arg("x", x), tensor_arg("b", b)};
    em_call c;
    CHECK_MSG(em_function_call(f, args, 2, &c) == EM_OK, "%s", em_last_error());
    *kind = c.kind;
    if (c.kind == EM_CALL_COMPILED) {
        CHECK(c.n_out == 1 && c.data == &state);
        return c.outs[0];
    }
    if (c.kind == EM_CALL_EAGER) return model(x, w, b);
    em_tensor *y = model(c.proxies[0], w, c.proxies[1]);
    CHECK_MSG(em_function_trace_end(f, &c, &y, 1, &state, NULL) == EM_OK, "%s", em_last_error());
    return y;
}

static void test_trace_run_explain(void) {
    int64_t sx[2] = {4, 8}, sw[2] = {8, 3}, sb[1] = {3};
    em_tensor *x = em_randn(sx, 2, EM_DTYPE_F32), *w = em_randn(sw, 2, EM_DTYPE_F32);
    em_tensor *b = em_randn(sb, 1, EM_DTYPE_F32), *x2 = em_randn(sx, 2, EM_DTYPE_F32);
    state = (host_state){1, 0};
    em_function *f = em_function_new("model", -1, &host);
    em_call_kind kind;
    em_tensor *y = call(f, x, w, b, &kind), *want = model(x, w, b);
    CHECK(kind == EM_CALL_TRACE && same_values(y, want));
    em_tensor_release(y);
    em_tensor_release(want);
    /* new data, same guards: the compiled graph runs and equals eager */
    y = call(f, x2, w, b, &kind);
    want = model(x2, w, b);
    CHECK(kind == EM_CALL_COMPILED && same_values(y, want));
    em_tensor_release(y);
    em_tensor_release(want);
    /* the host state no longer holds: a miss, a new trace */
    state.holds = 0;
    y = call(f, x2, w, b, &kind);
    CHECK(kind == EM_CALL_TRACE);
    em_tensor_release(y);
    /* checking the host state fails: the call fails, saying the host's error is pending */
    state.holds = -1;
    em_call c;
    CHECK(em_function_call(f, (em_arg[]){tensor_arg("x", x2), tensor_arg("b", b)}, 2, &c) == EM_ERR_HOST);
    state.holds = 1;
    /* explain, from the C data */
    em_function_stats st;
    em_function_stats_get(f, &st);
    CHECK(st.compiled_calls == 1 && st.traces == 2 && st.misses == 2 && st.specializations == 2);
    em_last_call lc;
    em_function_last_call(f, &lc);
    CHECK(strcmp(lc.event, "traced") == 0 && lc.specialization == 1);
    em_spec_info info;
    CHECK(em_function_spec(f, 0, &info) == EM_OK);
    CHECK(strcmp(info.backend, em_llvm_backend() ? "llvm" : "interp") == 0 && info.n_captured == 1);
    CHECK_STR_CONTAINS(info.guards, "x: tensor dtype=f32 device=cpu shape=[4,8]");
    CHECK_STR_CONTAINS(info.guards, "(grad mode): bool == True");
    CHECK_STR_CONTAINS(info.traced_ir, "matmul(%x, %captured0) : f32[4,3] loc(\"model.c\":7)");
    CHECK_STR_CONTAINS(info.graph, "fused(");
    CHECK_STR_CONTAINS(info.state, "host state from input 2"); /* (two tensor arguments) */
    CHECK(info.kernels != NULL && info.trace_ms > 0);
    em_spec_info_clear(&info);
    CHECK(em_function_spec(f, 2, &info) == EM_ERR_INDEX);
    CHECK(em_function_check(f, 0, (em_arg[]){tensor_arg("x", x), tensor_arg("b", b)}, 2) == 1);
    CHECK(em_function_check(f, 0, (em_arg[]){tensor_arg("x", b), tensor_arg("b", b)}, 2) == 0);
    em_function_free(f);
    CHECK(state.released == 2); /* each specialisation's host data, once */
    em_tensor *ts[] = {x, w, b, x2};
    for (int i = 0; i < 4; i++) em_tensor_release(ts[i]);
}

/* buf.add_(x) * 2 returned with buf: the write-back reaches the caller's
 * buffer, and a returned written input is that input itself. */
static void test_write_back(void) {
    int64_t s[1] = {3000};
    em_tensor *buf = em_zeros(s, 1, EM_DTYPE_F32), *x = em_ones(s, 1, EM_DTYPE_F32);
    em_function *f = em_function_new("acc", -1, NULL);
    for (int i = 1; i <= 3; i++) {
        em_arg args[2] = {tensor_arg("buf", buf), tensor_arg("x", x)};
        em_call c;
        CHECK(em_function_call(f, args, 2, &c) == EM_OK);
        em_tensor *b = c.kind == EM_CALL_TRACE ? c.proxies[0] : buf, *xx = c.kind == EM_CALL_TRACE ? c.proxies[1] : x;
        em_tensor *ops[2] = {b, xx}, *outs[2];
        em_attrs at;
        memset(&at, 0, sizeof at);
        if (c.kind != EM_CALL_COMPILED) {
            CHECK(em_op_run_inplace(EM_OP_ADD, ops, 2, &at, b) == EM_OK);
            outs[0] = b;
            outs[1] = em_mul(b, xx);
        }
        if (c.kind == EM_CALL_TRACE) CHECK(em_function_trace_end(f, &c, outs, 2, NULL, NULL) == EM_OK);
        if (c.kind == EM_CALL_COMPILED) {
            CHECK(c.n_out == 2 && c.outs[0] == buf); /* the written input itself */
            em_tensor_release(c.outs[0]);
            outs[1] = c.outs[1];
        }
        CHECK(i == 1 ? c.kind == EM_CALL_TRACE : c.kind == EM_CALL_COMPILED);
        CHECK(em_tensor_get_f64(buf, 2999) == i && em_tensor_get_f64(outs[1], 0) == i);
        em_tensor_release(outs[1]);
    }
    em_spec_info info;
    em_function_spec(f, 0, &info);
    CHECK_STR_CONTAINS(info.state, "write-backs: 1\n  input 0 (argument) <- result 2");
    em_spec_info_clear(&info);
    em_function_free(f);
    em_tensor_release(buf);
    em_tensor_release(x);
}

/* The cache limit, the compile switch, a host-decided eager call and a
 * trace whose function failed. */
static void test_fallbacks(void) {
    int64_t s1[1] = {2}, s2[1] = {5};
    em_tensor *a = em_ones(s1, 1, EM_DTYPE_F32), *b = em_ones(s2, 1, EM_DTYPE_F32);
    em_function *f = em_function_new("neg", 1, NULL);
    em_call c;
    em_arg arg = tensor_arg("x", a);
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_TRACE);
    em_tensor *y = em_neg(c.proxies[0]);
    CHECK(em_function_trace_end(f, &c, &y, 1, NULL, NULL) == EM_OK);
    em_tensor_release(y);
    arg.tensor = b; /* another shape, at the limit */
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_EAGER);
    CHECK_STR_CONTAINS(c.warning, "ember.compile(neg): cache limit of 1 specialisations reached");
    CHECK_STR_CONTAINS(c.warning, "x: shape [5] != [2]");
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_EAGER && !c.warning);
    em_compile_set_enabled(false);
    arg.tensor = a;
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_EAGER);
    CHECK_STR_CONTAINS(c.reason, "compilation is disabled");
    em_compile_set_enabled(true);
    em_function_eager(f, "argument 'm' is a module", &c);
    CHECK(c.kind == EM_CALL_EAGER);
    CHECK_STR_CONTAINS(c.warning, "ember.compile(neg): argument 'm' is a module; running eagerly");
    em_function_stats st;
    em_function_stats_get(f, &st);
    CHECK(st.eager_calls == 4 && st.n_fallbacks == 3);
    int64_t count;
    CHECK(strcmp(em_function_fallback(f, 0, &count), "cache limit of 1 specialisations reached") == 0 &&
          count == 2);
    /* a trace whose function failed caches nothing, and leaves no tracer */
    em_function_reset(f);
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_TRACE && em_trace_active());
    em_function_trace_abort(f, &c);
    CHECK(!em_trace_active());
    em_function_stats_get(f, &st);
    CHECK(st.specializations == 0 && st.traces == 1);
    /* a result a graph cannot give: the specialisation runs eagerly */
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_TRACE);
    CHECK(em_function_trace_end(f, &c, NULL, 0, NULL, "it returns a set") == EM_OK);
    CHECK_STR_CONTAINS(c.warning, "running eagerly: it returns a set");
    CHECK(em_function_call(f, &arg, 1, &c) == EM_OK && c.kind == EM_CALL_EAGER);
    CHECK_STR_CONTAINS(c.reason, "it returns a set");
    em_function_free(f);
    em_tensor_release(a);
    em_tensor_release(b);
}

int main(void) {
    RUN(test_trace_run_explain);
    RUN(test_write_back);
    RUN(test_fallbacks);
    CHECK(em_tensor_live_count() == 0);
    return check_report();
}
