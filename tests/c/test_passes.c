/*
 * test_passes.c - passes keep meaning: each graph gives the same results on
 * the interpreter before and after the default pipeline.
 */
#include <stdlib.h>

#include "check.h"
#include "ember/passes.h"

static const char *GRAPHS[] = {
    "graph @gelu(%x: f32[5,7]) -> (f32[5,7]) {\n"
    "  %0 = full() {value=0.5} : f32[]\n  %1 = mul(%x, %0) : f32[5,7]\n"
    "  %2 = mul(%x, %x) : f32[5,7]\n  %3 = mul(%2, %x) : f32[5,7]\n"
    "  %4 = full() {value=0.044715} : f32[]\n  %5 = mul(%3, %4) : f32[5,7]\n"
    "  %6 = add(%x, %5) : f32[5,7]\n  %7 = full() {value=0.7978845608} : f32[]\n"
    "  %8 = mul(%6, %7) : f32[5,7]\n  %9 = tanh(%8) : f32[5,7]\n"
    "  %10 = full() {value=1} : f32[]\n  %11 = add(%9, %10) : f32[5,7]\n"
    "  %12 = mul(%1, %11) : f32[5,7]\n  return %12\n}\n",
    "graph @mixed(%x: f32[5,7], %y: f32[7]) -> (f32[5,7], f32[7]) {\n"
    "  %0 = exp(%x) : f32[5,7]\n  %1 = sum(%0) {dims=[0], keepdim=false} : f32[7]\n"
    "  %2 = div(%0, %1) : f32[5,7]\n  %3 = add(%2, %y) : f32[5,7]\n"
    "  %4 = sigmoid(%y) : f32[7]\n  %5 = maximum(%4, %1) : f32[7]\n  return %3, %5\n}\n",
    "graph @views(%x: f32[5,7]) -> (f32[7,5]) {\n"
    "  %0 = neg(%x) : f32[5,7]\n  %1 = permute(%0) {dims=[1,0]} : f32[7,5]\n"
    "  %2 = relu(%1) : f32[7,5]\n  %3 = expand(%2) : f32[7,5]\n  %4 = log(%3) : f32[7,5]\n"
    "  return %4\n}\n",
};

static void run(const em_ir_graph *g, em_tensor **in, em_tensor **out) {
    em_interp *it = em_interp_new(g, NULL);
    CHECK(it != NULL);
    CHECK_MSG(em_interp_run(it, NULL, in, g->body->n_params, out, g->body->n_results) == EM_OK, "%s",
              em_last_error());
    em_interp_free(it);
}

static void test_pipeline_preserves_results(void) {
    for (size_t k = 0; k < sizeof GRAPHS / sizeof *GRAPHS; k++) {
        em_ir_graph *g = em_ir_parse(GRAPHS[k], "g.ir");
        CHECK_MSG(g != NULL, "%s", em_last_error());
        if (!g) continue;
        em_tensor *in[4], *before[4] = {0}, *after[4] = {0};
        for (int i = 0; i < g->body->n_params; i++) {
            const em_type *t = &g->body->params[i]->type;
            in[i] = em_randn(t->shape, t->ndim, t->dtype);
        }
        run(g, in, before);
        int n = 0;
        while (em_default_pipeline[n]) n++;
        CHECK_MSG(em_pass_run_pipeline(g, em_default_pipeline, n, true, NULL, NULL, NULL) == EM_OK, "%s",
                  em_last_error());
        char *text = em_ir_print(g);
        CHECK(text && strstr(text, "fused("));
        free(text);
        run(g, in, after);
        for (int r = 0; r < g->body->n_results; r++) {
            int same = before[r] && after[r] && before[r]->numel == after[r]->numel;
            for (int64_t i = 0; same && i < before[r]->numel; i++) {
                double a = em_tensor_get_f64(before[r], i), b = em_tensor_get_f64(after[r], i);
                same = a == b || (a != a && b != b);
            }
            CHECK_MSG(same, "graph %zu result %d differs after the pipeline", k, r);
            em_tensor_release(before[r]);
            em_tensor_release(after[r]);
        }
        for (int i = 0; i < g->body->n_params; i++) em_tensor_release(in[i]);
        em_ir_graph_free(g);
    }
}

static void test_unknown_pass(void) {
    em_ir_graph *g = em_ir_parse(GRAPHS[0], "g.ir");
    const char *names[] = {"dce", "nonsense"};
    CHECK(em_pass_run_pipeline(g, names, 2, true, NULL, NULL, NULL) != EM_OK);
    CHECK_STR_CONTAINS(em_last_error(), "unknown pass 'nonsense'");
    em_ir_graph_free(g);
}

int main(void) {
    RUN(test_pipeline_preserves_results);
    RUN(test_unknown_pass);
    CHECK(em_tensor_live_count() == 0);
    return check_report();
}
