/*
 * backend.h - the one interface between the compile driver and a code
 * generator: compile a graph into an executable, run it, free it.
 *
 * Backends: the IR interpreter (always there; ir/interp.c, wrapped in
 * driver/compile.c) and LLVM (codegen_llvm/, when built: one generated
 * function per graph). A backend may keep pointers into the graph: the
 * caller keeps the graph alive as long as the executable. An executable may
 * be run from several threads at once.
 */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "ember/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_backend_opts {
    /* Example inputs of the traced call, one per graph input, borrowed and
     * valid during compile only. Backends specialise on their strides; the
     * guards make sure later calls have the same geometry. */
    em_tensor *const *examples;
    int n_examples;
    /* Receives generated code for dumps (NULL: no dumps). `name` is a file
     * name such as "kernel0.ll". */
    void (*dump)(void *ctx, const char *name, const char *text);
    void *dump_ctx;
    /* How the graph runs (NULL: every body result is returned, nothing
     * else): which results the caller gets, the value guards, the effects
     * (em_run_spec). A backend may compute a write-back's result in its
     * input's own memory ("donation") when nobody can tell: the input is
     * read nowhere later, no other input shares its memory, the result is
     * no other result, and every value guard has held. Borrowed during
     * compile only: a backend copies what it keeps. */
    const em_run_spec *spec;
    /* Compile for sizes read at run time, not baked into the code: graphs
     * that differ only in their values' sizes then compile to the same
     * code, which a backend shares between them (dynamic shapes). */
    bool dynamic_sizes;
} em_backend_opts;

typedef struct em_backend {
    const char *name;
    /* Prepares `g` to run; *state receives the executable. */
    em_status (*compile)(const em_ir_graph *g, const em_backend_opts *opts, void **state);
    /* Runs: in[] borrowed, out[] receives new references to the spec's
     * outputs, and the spec's effects are applied. EM_ERR_GUARD: a value
     * guard failed, and no input was written. */
    em_status (*run)(void *state, em_tensor *const *in, int n_in, em_tensor **out, int n_out);
    /* Describes what was built (kernels, how each node runs) for explain(). */
    char *(*describe)(void *state);
    /* Per-node times of the profiled runs (em_interp_profile), or NULL. */
    char *(*profile)(void *state);
    void (*free)(void *state);
    /* What identifies the executable's machine code (NULL: the backend
     * generates none): executables of equal ids run the same code. */
    const char *(*code_id)(void *state);
    /* Empties the backend's on-disk cache of compiled code (NULL: it has
     * none). */
    em_status (*clear_cache)(void);
    /* Ahead of time (NULL: the backend cannot): compiles g as `compile`
     * would, into position-independent object code written to obj_path
     * for a shared object, with its functions in a table named `table`;
     * *description receives (malloc'd) the text the shared object's
     * runtime rebuilds the executable from, given g's text parsed back. */
    em_status (*compile_object)(const em_ir_graph *g, const em_backend_opts *opts, const char *obj_path,
                                const char *table, char **description);
} em_backend;

/* Every backend, best first (the driver takes the first one built unless
 * asked for another by name): X(name, the function that returns it, NULL
 * where this build lacks it). The one registry: a new backend is a row
 * here and its function. ORDER BACKEND */
#define EM_BACKEND_LIST(X)                                                                         \
    X(llvm, em_llvm_backend)                                                                       \
    X(interp, em_interp_backend)

#define EM_BACKEND_DECLARE(name, fn) const em_backend *fn(void);
EM_BACKEND_LIST(EM_BACKEND_DECLARE)
#undef EM_BACKEND_DECLARE

/* The backend called `name` (NULL: the best built): NULL when the list has
 * no such name or this build lacks it; *known says which. */
const em_backend *em_backend_named(const char *name, bool *known);

#ifdef __cplusplus
}
#endif
#endif
