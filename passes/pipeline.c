/*
 * pipeline.c - the pass registry and the pipeline runner.
 */
#include <string.h>

#include "ember/passes.h"

static const em_pass_info passes[] = {
#define X(fn, name, help) {name, em_pass_##fn, help},
    EM_PASS_LIST(X)
#undef X
};

/* Rewrites first (each may expose work for the next), layouts once the
 * graph is simplified, then dead code goes before fusion sees the graph;
 * the schedule is settled on the fused graph. */
const char *const em_default_pipeline[] = {"canonicalize", "cse", "const-fold", "layout", "dce",
                                           "fuse",         "dce", "memplan",    NULL};

const em_pass_info *em_pass_all(int *n) {
    *n = (int)(sizeof passes / sizeof passes[0]);
    return passes;
}

const em_pass_info *em_pass_find(const char *name) {
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
        if (strcmp(passes[i].name, name) == 0) return &passes[i];
    return NULL;
}

em_status em_pass_run_pipeline(em_ir_graph *g, const char *const *names, int n, bool verify,
                               em_pass_observer observer, void *ctx, em_strbuf *report) {
    for (int i = 0; i < n; i++) {
        const em_pass_info *p = em_pass_find(names[i]);
        if (!p) return em_error(EM_ERR_VALUE, "unknown pass '%s'", names[i]);
        em_status st = p->run(g, report);
        if (st != EM_OK) return em_error_prefix(st, "pass %s", p->name);
        if (verify && (st = em_ir_verify(g)) != EM_OK)
            return em_error_prefix(st, "after pass %s", p->name);
        if (observer) observer(ctx, i, p->name, g);
    }
    return EM_OK;
}
