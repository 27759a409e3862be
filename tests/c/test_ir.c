/*
 * test_ir.c - the IR: building, printing, parsing (round trip and errors),
 * verifying, and interpreting against eager execution.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ember/ir.h"

static const char *MLP =
    "graph @mlp(%x: f32[4,8], %w: f32[8,3], %b: f32[3]) -> (f32[4,3], f32[]) {\n"
    "  %0 = matmul(%x, %w) : f32[4,3] loc(\"mlp.py\":10)\n"
    "  %1 = add(%0, %b) : f32[4,3] loc(\"mlp.py\":10)\n"
    "  %2 = relu(%1) : f32[4,3] loc(\"mlp.py\":11)\n"
    "  %3 = sum(%2) {dims=[0,1], keepdim=false} : f32[] loc(\"mlp.py\":12)\n"
    "  return %2, %3\n"
    "}\n";

static const char *FUSED =
    "graph @k(%x: f32[2,3], %y: f32[3]) -> (f32[2,3]) {\n"
    "  %0 = fused(%x, %y) : f32[2,3] loc(\"k.py\":3-5) {\n"
    "  ^(%1: f32[2,3], %2: f32[3]):\n"
    "    %3 = full() {value=0.5} : f32[] loc(\"k.py\":3)\n"
    "    %4 = mul(%1, %3) : f32[2,3] loc(\"k.py\":3)\n"
    "    %5 = add(%4, %2) : f32[2,3] loc(\"k.py\":4)\n"
    "    %6 = tanh(%5) : f32[2,3] loc(\"k.py\":5)\n"
    "    yield %6\n"
    "  }\n"
    "  return %0\n"
    "}\n";

static void round_trip(const char *text) {
    em_ir_graph *g = em_ir_parse(text, "t.ir");
    CHECK_MSG(g != NULL, "%s", em_last_error());
    if (!g) return;
    CHECK_MSG(em_ir_verify(g) == EM_OK, "%s", em_last_error());
    char *out = em_ir_print(g);
    CHECK_MSG(out && strcmp(out, text) == 0, "printed:\n%s", out ? out : "(null)");
    free(out);
    em_ir_graph_free(g);
}

static void test_round_trip(void) {
    round_trip(MLP);
    round_trip(FUSED);
    round_trip("graph @c() -> (i64[5], f64[2,2]) {\n"
               "  %0 = arange() {start=0, end=5, step=1} : i64[5]\n"
               "  %1 = full() {value=-inf} : f64[2,2]\n"
               "  return %0, %1\n"
               "}\n");
    round_trip("graph @v(%a: f32[2,3,4]) -> (f32[4,3,2], f32[6,4], f32[5,2,3,4]) {\n"
               "  %0 = permute(%a) {dims=[2,1,0]} : f32[4,3,2]\n"
               "  %1 = reshape(%a) : f32[6,4]\n"
               "  %2 = expand(%a) : f32[5,2,3,4]\n"
               "  return %0, %1, %2\n"
               "}\n");
    round_trip("graph @m(%x: f32[2,3]@meta) -> (f32[2,3]@meta) {\n" /* the meta device's types */
               "  %0 = relu(%x) : f32[2,3]@meta\n"
               "  return %0\n"
               "}\n");
}

static void parse_error(const char *text, const char *want) {
    em_ir_graph *g = em_ir_parse(text, "bad.ir");
    CHECK(g == NULL);
    CHECK(em_last_status() == EM_ERR_PARSE);
    CHECK_STR_CONTAINS(em_last_error(), want);
    em_ir_graph_free(g);
}

static void test_parse_errors(void) {
    parse_error("graph @f(%x: f32[2]) -> (f32[2]) {\n  %0 = frobnicate(%x) : f32[2]\n  return %0\n}\n",
                "bad.ir:2:8: error: unknown op 'frobnicate'\n  %0 = frobnicate(%x) : f32[2]\n       ^");
    parse_error("graph @f(%x: f32[2]) -> (f32[2]) {\n  %0 = neg(%y) : f32[2]\n  return %0\n}\n",
                "bad.ir:2:12: error: use of undefined value %y");
    parse_error("graph @f(%x: f32[2]) -> (f32[2]) {\n  %0 = add(%x) : f32[2]\n  return %0\n}\n",
                "add takes 2 operands, got 1");
    parse_error("graph @f(%x: f32[2]) -> (f32[2]) {\n  %0 = sum(%x) : f32[]\n  return %0\n}\n",
                "sum is missing attribute 'dims'");
    parse_error("graph @f(%x: f32[2]) -> (f32[2]) {\n  %0 = neg(%x) : f32[2]\n", "expected 'return'");
    parse_error("graph @f(%x: f33[2]) -> () {\n  return\n}\n", "expected a type");
    parse_error("graph @f(%x: f32[2]) -> (f32[2]) {\n"
                "  %0 = fused(%x) : f32[2] {\n  ^(%1: f32[2]):\n    %2 = neg(%x) : f32[2]\n"
                "    yield %2\n  }\n  return %0\n}\n",
                "defined outside this fused region");
    parse_error("graph @f(%x: f32[2]) -> (f32[3]) {\n  return %x\n}\n",
                "result 0 is declared f32[3] but returns a f32[2]");
}

static void verify_error(const char *text, const char *want) {
    em_ir_graph *g = em_ir_parse(text, "v.ir");
    CHECK_MSG(g != NULL, "%s", em_last_error());
    if (!g) return;
    CHECK(em_ir_verify(g) != EM_OK);
    CHECK_STR_CONTAINS(em_last_error(), want);
    em_ir_graph_free(g);
}

static void test_verifier(void) {
    verify_error("graph @f(%x: f32[2], %y: f32[3]) -> (f32[2]) {\n"
                 "  %0 = add(%x, %y) : f32[2] loc(\"a.py\":7)\n  return %0\n}\n",
                 "verify @f: %0 = add (a.py:7): add: cannot broadcast f32[2] with f32[3]");
    verify_error("graph @f(%x: f32[2]) -> (f64[2]) {\n  %0 = neg(%x) : f64[2]\n  return %0\n}\n",
                 "result 0 has type f64[2] but the operands give f32[2]");
    verify_error("graph @f(%x: f32[2,2]) -> (f32[2,2]) {\n"
                 "  %0 = fused(%x) : f32[2,2] {\n  ^(%1: f32[2,2]):\n"
                 "    %2 = matmul(%1, %1) : f32[2,2]\n    %3 = matmul(%2, %1) : f32[2,2]\n    yield %3\n  }\n"
                 "  return %0\n}\n",
                 "a fused region holds at most one matmul");
    verify_error("graph @f(%x: f32[2,2]) -> (f32[2,2]) {\n"
                 "  %0 = fused(%x) : f32[2,2] {\n  ^(%1: f32[2,2]):\n"
                 "    %2 = neg(%1) : f32[2,2]\n    %3 = matmul(%2, %1) : f32[2,2]\n    yield %3\n  }\n"
                 "  return %0\n}\n",
                 "a fused matmul's operands must be region parameters");
    verify_error("graph @f(%x: f32[2,2]) -> (f32[2,2]) {\n"
                 "  %0 = fused(%x) : f32[2,2] {\n  ^(%1: f32[2,2]):\n"
                 "    %2 = permute(%1) {dims=[1,0]} : f32[2,2]\n    yield %2\n  }\n"
                 "  return %0\n}\n",
                 "only elementwise ops, broadcasts, scalar constants, reductions and one matmul may be fused");
}

static void test_builder_and_interpreter(void) {
    em_ir_graph *g = em_ir_parse(FUSED, "k.ir");
    CHECK(g != NULL);
    if (!g) return;
    int64_t s[2] = {2, 3};
    em_tensor *flat = em_arange(0, 6, 1, EM_DTYPE_F32);
    em_tensor *x = em_reshape(flat, s, 2);
    em_tensor_release(flat);
    em_tensor *y = em_arange(-1, 2, 1, EM_DTYPE_F32);
    /* the same computation eagerly */
    em_tensor *half = em_tensor_scalar(0.5, EM_DTYPE_F32);
    em_tensor *m = em_mul(x, half), *a = em_add(m, y), *want = em_tanh(a);
    em_interp *it = em_interp_new(g, NULL);
    em_tensor *in[2] = {x, y}, *got = NULL;
    CHECK(it && em_interp_run(it, NULL, in, 2, &got, 1) == EM_OK);
    CHECK(got && got->numel == 6);
    for (int i = 0; got && i < 6; i++) CHECK(em_tensor_get_f64(got, i) == em_tensor_get_f64(want, i));
    /* not profiled: no report; profiled: one line per node, by the printer's names */
    CHECK(it && em_interp_profile(it) == NULL);
    em_interp_set_profiling(true);
    em_tensor *again = NULL;
    CHECK(it && em_interp_run(it, NULL, in, 2, &again, 1) == EM_OK);
    em_interp_set_profiling(false);
    em_tensor_release(again);
    char *prof = it ? em_interp_profile(it) : NULL;
    CHECK(prof != NULL);
    if (prof) {
        CHECK_STR_CONTAINS(prof, "1 profiled runs");
        CHECK_STR_CONTAINS(prof, "%0 = fused of 4 ops -> f32[2,3], op by op, k.py:3");
    }
    free(prof);
    /* wrong input types are refused, not misread */
    em_tensor *bad[2] = {y, x}, *o2 = NULL;
    CHECK(em_interp_run(it, NULL, bad, 2, &o2, 1) != EM_OK);
    CHECK_STR_CONTAINS(em_last_error(), "input 0 is f32[3], the graph expects f32[2,3]");
    em_interp_free(it);
    em_tensor_release(got);
    em_tensor_release(want);
    em_tensor_release(a);
    em_tensor_release(m);
    em_tensor_release(half);
    em_tensor_release(y);
    em_tensor_release(x);
    em_ir_graph_free(g);

    /* building with inference */
    em_ir_graph *b = em_ir_graph_new("my.fn<locals>");
    CHECK(b && strcmp(b->name, "my.fn_locals_") == 0);
    em_type t = {EM_DTYPE_F32, {EM_DEVICE_CPU, -1}, 2, {3, 4}};
    em_ir_value *p = em_ir_add_param(b->body, &t, "x");
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.n_dims = 1;
    at.dims[0] = 1;
    em_ir_loc nowhere = {NULL, 0, 0};
    em_ir_node *n = em_ir_build(b->body, EM_OP_SUM, &p, 1, &at, nowhere);
    CHECK(n && n->out[0]->type.ndim == 1 && n->out[0]->type.shape[0] == 3);
    em_ir_value *bad_in[2] = {p, n->out[0]};
    CHECK(em_ir_build(b->body, EM_OP_ADD, bad_in, 2, NULL, nowhere) == NULL);
    CHECK_STR_CONTAINS(em_last_error(), "cannot broadcast f32[3,4] with f32[3]");
    em_ir_set_results(b->body, &n->out[0], 1);
    CHECK(em_ir_verify(b) == EM_OK);
    em_ir_graph_free(b);
}

/* A node keeps the attributes its op's schema names, packed: none for an
 * elementwise op, a reduction's dims and keepdim; the rest of em_attrs
 * (what callers fill for a family of ops) is not the op's and is dropped;
 * em_ir_set_attrs replaces them. */
static void test_attrs_by_schema(void) {
    em_ir_graph *g = em_ir_graph_new("a");
    em_type t = {EM_DTYPE_F32, {EM_DEVICE_CPU, -1}, 2, {3, 4}};
    em_ir_value *x = em_ir_add_param(g->body, &t, "x");
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = 1;
    a.keepdim = true;
    a.ord = 2.0; /* (em_reduce fills it for every reduction: sum's schema has none) */
    em_ir_node *sum = em_ir_build(g->body, EM_OP_SUM, &x, 1, &a, (em_ir_loc){0});
    em_ir_node *neg = em_ir_build(g->body, EM_OP_NEG, &x, 1, &a, (em_ir_loc){0});
    CHECK(sum && neg);
    if (!sum || !neg) return;
    CHECK(neg->attr_data == NULL && neg->attr_size == 0);
    CHECK(sum->attr_size == sizeof(int32_t) + sizeof(int64_t) + 1); /* dims, keepdim */
    em_attrs back;
    em_ir_attrs(sum, &back);
    CHECK(back.n_dims == 1 && back.dims[0] == 1 && back.keepdim && back.ord == 0);
    a.keepdim = false;
    CHECK(em_ir_set_attrs(g, sum, &a) == EM_OK && !EM_IR_ATTRS(sum)->keepdim && EM_IR_ATTRS(sum)->n_dims == 1);
    CHECK(sizeof(em_ir_node) < 128); /* (not the 700-odd bytes of em_attrs) */
    em_ir_graph_free(g);
}

/* Parameter names from a tracer (Python argument paths) become names the
 * text form reads back, one per parameter. */
static void test_param_names(void) {
    em_ir_graph *g = em_ir_graph_new("f");
    em_type t;
    memset(&t, 0, sizeof t);
    t.dtype = EM_DTYPE_F32;
    const char *names[] = {"*args", "*args", "xs[1]", "d['lr']", "0"};
    em_ir_value *p[5];
    for (int i = 0; i < 5; i++) p[i] = em_ir_add_param(g->body, &t, names[i]);
    CHECK(strcmp(p[0]->name, "_args") == 0 && strcmp(p[1]->name, "_args.1") == 0);
    CHECK(strcmp(p[2]->name, "xs_1_") == 0 && strcmp(p[3]->name, "d__lr__") == 0 && strcmp(p[4]->name, "_0") == 0);
    em_ir_set_results(g->body, p, 5);
    char *text = em_ir_print(g);
    em_ir_graph *back = text ? em_ir_parse(text, "names.ir") : NULL;
    char *again = back ? em_ir_print(back) : NULL;
    CHECK_MSG(again && strcmp(text, again) == 0, "%s", back ? text : em_last_error());
    free(text);
    free(again);
    em_ir_graph_free(back);
    em_ir_graph_free(g);
}

int main(void) {
    RUN(test_round_trip);
    RUN(test_parse_errors);
    RUN(test_verifier);
    RUN(test_builder_and_interpreter);
    RUN(test_param_names);
    RUN(test_attrs_by_schema);
    CHECK(em_tensor_live_count() == 0);
    return check_report();
}
