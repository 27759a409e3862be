/*
 * aot_export.h - between the compile driver (function.c) and the ahead-of-
 * time export (aot.c); not public.
 */
#ifndef EMBER_AOT_EXPORT_H
#define EMBER_AOT_EXPORT_H

#include "ember/frontend.h"

/* One traced specialisation, as function.c hands it to the export. */
typedef struct em_aot_trace {
    em_ir_graph *graph;        /* as traced (taken) */
    em_tensor *const *inputs;  /* per graph input: the tensor the trace saw (examples) */
    int n_inputs;
    int n_args;                /* inputs 0..n_args-1 are the call's arguments */
    const char *const *arg_names;
    const em_capture *captured; /* inputs n_args.., with their snapshots */
    int n_captured;
    int n_out;
    const em_grad_slot *slots;
    int n_slots;
    const char *const *value_guard_what; /* per value guard (results n_out..) */
    const em_run_spec *spec;   /* value guards and effects */
    const char *const *passes; /* NULL: the default pipeline */
} em_aot_trace;

/* Writes the shared object opts->path (and its header; its weights file)
 * for the trace. */
em_status em_aot_export(const em_aot_opts *opts, const em_aot_trace *t);
/* Puts the state the trace changed back as it was before the call: every
 * captured tensor's values from its snapshot, the .grads of the slots. */
void em_aot_restore(const em_aot_trace *t);

#endif
