/*
 * test_frontend.c - tracing eager ops into a graph, guards, and the compile
 * driver: a compiled graph gives the eager results on new data.
 */
#include <stdlib.h>

#include "check.h"
#include "ember/frontend.h"

static bool fake_loc(void *ctx, const char **file, int *line) {
    *file = "user.py";
    *line = ++*(int *)ctx;
    return true;
}

/* y = relu(x @ w + b) * 0.5, with w captured (not an argument). */
static em_tensor *model(em_tensor *x, em_tensor *w, em_tensor *b) {
    em_tensor *h = em_matmul(x, w), *a = em_add(h, b), *r = em_relu(a);
    em_tensor *half = em_tensor_scalar(0.5, EM_DTYPE_F32);
    half->is_wrapped_number = true;
    em_tensor *y = em_mul(r, half);
    em_tensor_release(h);
    em_tensor_release(a);
    em_tensor_release(r);
    em_tensor_release(half);
    return y;
}

static void test_trace_compile_run(void) {
    int64_t sx[2] = {4, 8}, sw[2] = {8, 3}, sb[1] = {3};
    em_tensor *x = em_randn(sx, 2, EM_DTYPE_F32), *w = em_randn(sw, 2, EM_DTYPE_F32);
    em_tensor *b = em_randn(sb, 1, EM_DTYPE_F32);
    int line = 0;
    em_tracer *tr = em_trace_begin("model", fake_loc, &line);
    CHECK(tr && em_trace_active());
    CHECK(em_trace_add_input(tr, x, "x", NULL) == EM_OK);
    CHECK(em_trace_add_input(tr, b, "b", NULL) == EM_OK);
    em_tensor *y = model(x, w, b);
    em_trace_result res;
    CHECK_MSG(em_trace_end(tr, &y, 1, &res) == EM_OK, "%s", em_last_error());
    CHECK(!em_trace_active());
    CHECK(res.n_args == 2 && res.n_captured == 1 && res.captured[0].tensor == w);
    char *text = em_ir_print(res.graph);
    CHECK_STR_CONTAINS(text, "graph @model(%x: f32[4,8], %b: f32[3], %captured0: f32[8,3])");
    CHECK_STR_CONTAINS(text, "matmul(%x, %captured0) : f32[4,3] loc(\"user.py\":1)");
    CHECK_STR_CONTAINS(text, "full() {value=0.5} : f32[]");
    free(text);

    em_tensor *examples[3] = {x, b, w};
    em_compile_opts opts = {0, NULL, NULL, NULL, NULL, NULL, false};
    em_compiled *c = NULL;
    CHECK_MSG(em_compile(res.graph, examples, 3, &opts, &c) == EM_OK, "%s", em_last_error());
    res.graph = NULL; /* owned by the compiled graph now */
    /* new data, same shapes: compiled == eager */
    em_tensor *x2 = em_randn(sx, 2, EM_DTYPE_F32);
    em_tensor *want = model(x2, w, b), *got = NULL;
    em_tensor *in[3] = {x2, b, w};
    CHECK_MSG(c && em_compiled_run(c, in, 3, &got, 1) == EM_OK, "%s", em_last_error());
    for (int64_t i = 0; got && i < got->numel; i++)
        CHECK(em_tensor_get_f64(got, i) == em_tensor_get_f64(want, i));
    em_tensor_release(got);
    em_tensor_release(want);
    em_tensor_release(x2);
    em_compiled_free(c);
    em_trace_result_clear(&res);
    em_tensor_release(y);
    em_tensor_release(b);
    em_tensor_release(w);
    em_tensor_release(x);
}

static void test_trace_failures(void) {
    int64_t s[1] = {4};
    em_tensor *x = em_ones(s, 1, EM_DTYPE_F32);
    /* a tensor born inside the trace without an op: a constant, a private
     * copy the graph takes as an input */
    em_tracer *tr = em_trace_begin("f", NULL, NULL);
    em_trace_add_input(tr, x, "x", NULL);
    em_tensor *fresh = em_tensor_scalar(3, EM_DTYPE_F32); /* like ember.tensor(3.) */
    em_tensor *y = em_add(x, fresh);
    em_trace_result res;
    CHECK(em_trace_end(tr, &y, 1, &res) == EM_OK);
    CHECK(res.n_captured == 1 && res.captured[0].tensor != fresh &&
          em_tensor_get_f64(res.captured[0].tensor, 0) == 3.0);
    char *ctext = em_ir_print(res.graph);
    CHECK_STR_CONTAINS(ctext, "%constant0: f32[]");
    free(ctext);
    em_trace_result_clear(&res);
    em_tensor_release(y);
    em_tensor_release(fresh);
    /* random ops are recorded (they draw from the global stream when the
     * graph runs); a draw from a swapped-in Generator stream is not */
    tr = em_trace_begin("g", NULL, NULL);
    em_tensor *r = em_randn(s, 1, EM_DTYPE_F32);
    CHECK(em_trace_end(tr, &r, 1, &res) == EM_OK);
    char *text = em_ir_print(res.graph);
    CHECK_STR_CONTAINS(text, "randn()");
    free(text);
    em_trace_result_clear(&res);
    em_tensor_release(r);
    tr = em_trace_begin("g2", NULL, NULL);
    em_note_event(EM_EVENT_RNG_SWAP, "generator=", NULL);
    r = em_randn(s, 1, EM_DTYPE_F32);
    CHECK(em_trace_end(tr, &r, 1, &res) == EM_ERR_NOT_IMPLEMENTED);
    CHECK_STR_CONTAINS(em_last_error(), "ember.Generator");
    em_tensor_release(r);
    /* host reads become value guards: extra results after the outputs */
    tr = em_trace_begin("h", NULL, NULL);
    em_tensor *sum = em_sum(x, NULL, 0, false);
    em_note_host_sync(".item()", sum);
    em_tensor_release(sum); /* (alive at the end, it would be state the function kept) */
    CHECK(em_trace_end(tr, &x, 1, &res) == EM_OK);
    CHECK(res.n_value_guards == 1 && res.value_guards[0]->numel == 1 &&
          em_tensor_get_f64(res.value_guards[0], 0) == 4.0);
    CHECK(strcmp(res.value_guard_what[0], ".item()") == 0 && res.graph->body->n_results == 2);
    em_trace_result_clear(&res);
    /* a tensor made in the trace and kept alive (optimizer state): retry */
    tr = em_trace_begin("k", NULL, NULL);
    em_tensor *kept = em_add(x, x);
    CHECK(em_trace_count_escapes(tr, &x, 1) == 1);
    CHECK(em_trace_end(tr, &x, 1, &res) == EM_ERR_NOT_IMPLEMENTED && res.retry);
    CHECK_STR_CONTAINS(em_last_error(), "keeps 1 tensor it created (f32 [4], made by add");
    em_tensor_release(kept);
    /* traces do not nest */
    tr = em_trace_begin("outer", NULL, NULL);
    CHECK(em_trace_begin("inner", NULL, NULL) == NULL);
    CHECK(em_trace_end(tr, &x, 1, &res) == EM_OK);
    CHECK(res.n_args == 0 && res.n_captured == 1); /* returning an outside tensor captures it */
    em_trace_result_clear(&res);
    em_tensor_release(x);
}

static void test_guards(void) {
    int64_t s[2] = {3, 4};
    em_tensor *a = em_ones(s, 2, EM_DTYPE_F32), *t = em_transpose(a, 0, 1);
    int64_t s2[2] = {4, 3};
    em_tensor *c = em_ones(s2, 2, EM_DTYPE_F32), *d = em_ones(s, 2, EM_DTYPE_F64);
    em_arg args[3] = {{EM_ARG_TENSOR, "x", a, 0, 0, NULL, 0},
                      {EM_ARG_FLOAT, "lr", NULL, 0, 0.1, NULL, 0},
                      {EM_ARG_STR, "mode", NULL, 0, 0, "fast", 4}};
    em_guards *g = em_guards_new(args, 3);
    char why[256];
    CHECK(em_guards_check(g, args, 3, why, sizeof why));
    em_arg other[3];
    memcpy(other, args, sizeof other);
    other[0].tensor = d;
    CHECK(!em_guards_check(g, other, 3, why, sizeof why));
    CHECK_STR_CONTAINS(why, "x: dtype f64 != f32");
    other[0].tensor = t; /* same shape as c but transposed strides */
    em_arg a2[3];
    memcpy(a2, args, sizeof a2);
    a2[0].tensor = c;
    em_guards *g2 = em_guards_new(a2, 3);
    CHECK(!em_guards_check(g2, other, 3, why, sizeof why));
    CHECK_STR_CONTAINS(why, "x: strides [1,4] != [3,1]");
    other[0].tensor = a;
    other[1].f = 0.2;
    CHECK(!em_guards_check(g, other, 3, why, sizeof why));
    CHECK_STR_CONTAINS(why, "lr: value 0.2 != 0.1");
    other[1].kind = EM_ARG_INT;
    CHECK(!em_guards_check(g, other, 3, why, sizeof why));
    CHECK_STR_CONTAINS(why, "lr: an int instead of a float");
    CHECK(!em_guards_check(g, other, 2, why, sizeof why));
    other[1].kind = EM_ARG_FLOAT;
    other[1].name = "momentum"; /* same kind and value, another keyword */
    other[1].f = 0.1;
    CHECK(!em_guards_check(g, other, 3, why, sizeof why));
    CHECK_STR_CONTAINS(why, "argument 2 is 'momentum' instead of 'lr'");
    char *text = em_guards_print(g);
    CHECK_STR_CONTAINS(text, "x: tensor dtype=f32 device=cpu shape=[3,4] strides=[4,1]");
    free(text);
    em_guards_free(g);
    em_guards_free(g2);
    em_tensor_release(a);
    em_tensor_release(t);
    em_tensor_release(c);
    em_tensor_release(d);
}

int main(void) {
    RUN(test_trace_compile_run);
    RUN(test_trace_failures);
    RUN(test_guards);
    CHECK(em_tensor_live_count() == 0);
    return check_report();
}
