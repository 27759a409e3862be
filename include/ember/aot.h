/*
 * aot.h - the C ABI of every model ember compiles ahead of time.
 *
 * ember.aot.compile(fn_or_module, example_inputs, "out/model.so") writes a
 * shared object holding one traced graph after the passes: its compiled
 * kernels, the calls in order (BLAS included), the memory plan, and the
 * model's state (weights, buffers; for a training step, parameters,
 * optimizer state and gradients), embedded or, with weights="external",
 * in out/model.safetensors. It depends on libc, libm and the BLAS ember
 * was built with, nothing else: no Python, no libember, no LLVM.
 *
 * Every model exports the same functions, declared here; out/model.h adds
 * typed wrappers for that model. Load one with dlopen (or link it):
 *
 *     ember_model *m;
 *     if (ember_model_create(NULL, &m) != EMBER_OK) fail(ember_last_error());
 *     DLTensor x = {data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
 *     DLTensor y = {out, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, out_shape, NULL, 0};
 *     if (ember_model_run(m, &x, 1, &y, 1) != EMBER_OK) fail(ember_last_error());
 *     ember_model_destroy(m);
 *
 * Tensors go in and out as DLPack DLTensors on the CPU (device kDLCPU),
 * in any strides. Every input is checked against what the model was
 * compiled for (dtype, ndim, shape, device, a data pointer): a mismatch
 * returns an error code and a message naming the input and what was
 * expected, never a read or write past the buffers handed in.
 *
 * Threads: any number of threads may call one instance: its calls take
 * turns (each holds the instance's lock while it runs, since a run uses
 * the instance's scratch memory and a training step updates its state).
 * For runs in parallel, create an instance per thread: instances share
 * the model's read-only weights and nothing they write. Only
 * ember_model_destroy must not race with another call on its instance.
 * Errors: each function returns an ember_status; ember_last_error() is the
 * message of this thread's latest failure. A call that fails changes
 * nothing: every argument is checked before the model runs.
 *
 * A training step's instance holds its state and updates it in place at
 * every run; ember_model_save_state / ember_model_load_state exchange it
 * as safetensors (the names are those of the module's state_dict and the
 * optimizer's state, as ember.aot.compile found them).
 */
#ifndef EMBER_AOT_H
#define EMBER_AOT_H

#include <stddef.h>
#include <stdint.h>

#include "dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_AOT_ABI_VERSION 1

#if defined(EMBER_AOT_BUILDING)
#define EMBER_AOT_API __attribute__((visibility("default")))
#else
#define EMBER_AOT_API
#endif

typedef enum ember_status {
    EMBER_OK = 0,
    EMBER_ERR_ARGUMENT = 1,  /* a NULL handle or array, an index or count out of range */
    EMBER_ERR_DTYPE = 2,     /* an input or output of the wrong dtype */
    EMBER_ERR_SHAPE = 3,     /* wrong ndim, shape or strides */
    EMBER_ERR_DEVICE = 4,    /* not on the CPU */
    EMBER_ERR_NULL_DATA = 5, /* a tensor whose data pointer is NULL */
    EMBER_ERR_GUARD = 6,     /* a value the trace relied on differs: the result
                                would not be the traced function's, so the run
                                stopped before writing anything (run the
                                function in Python for this input) */
    EMBER_ERR_IO = 7,        /* a weights or state file unreadable or malformed */
    EMBER_ERR_NOMEM = 8,     /* out of memory */
    EMBER_ERR_RUNTIME = 9,   /* an op failed while running */
} ember_status;

typedef struct ember_model ember_model;

/* What the model expects of one input, returns as one output, or holds as
 * one tensor of state. Borrowed from the instance. */
typedef struct ember_tensor_info {
    const char *name;
    DLDataType dtype;
    int32_t ndim;
    const int64_t *shape;
} ember_tensor_info;

/* EMBER_AOT_ABI_VERSION of the shared object. */
EMBER_AOT_API int ember_abi_version(void);
/* The compiled function's name. */
EMBER_AOT_API const char *ember_model_name(void);
/* The message of this thread's latest failure ("" if none). */
EMBER_AOT_API const char *ember_last_error(void);

/* A new instance in *out. weights_path: a .safetensors file with the
 * model's state (as ember_model_save_state writes it), or NULL for the
 * state embedded in the shared object (or, for a model compiled with
 * weights="external", the .safetensors file written beside it). */
EMBER_AOT_API ember_status ember_model_create(const char *weights_path, ember_model **out);
/* Frees an instance (NULL: nothing). */
EMBER_AOT_API void ember_model_destroy(ember_model *m);

EMBER_AOT_API int ember_model_num_inputs(const ember_model *m);
EMBER_AOT_API int ember_model_num_outputs(const ember_model *m);
EMBER_AOT_API ember_status ember_model_input(const ember_model *m, int i, ember_tensor_info *info);
EMBER_AOT_API ember_status ember_model_output(const ember_model *m, int i, ember_tensor_info *info);

/* Runs the model on inputs[0..n_inputs) and writes its results into the
 * caller's buffers outputs[0..n_outputs) (each of the output's dtype and
 * shape, any strides that give each element its own address). The
 * outputs may not overlap the inputs or each other. */
EMBER_AOT_API ember_status ember_model_run(ember_model *m, const DLTensor *inputs, int n_inputs,
                                           const DLTensor *outputs, int n_outputs);
/* The same, with outputs the model allocates: outputs[i] receives a
 * managed tensor the caller frees with outputs[i]->deleter(outputs[i]). */
EMBER_AOT_API ember_status ember_model_run_alloc(ember_model *m, const DLTensor *inputs, int n_inputs,
                                                 DLManagedTensor **outputs, int n_outputs);

/* The tensors of state the instance holds (weights, buffers, parameters,
 * optimizer state, gradients). A state may be absent (a gradient not
 * computed yet): its info then has ndim -1. */
EMBER_AOT_API int ember_model_num_states(const ember_model *m);
EMBER_AOT_API ember_status ember_model_state(const ember_model *m, int i, ember_tensor_info *info);
/* Writes the state as safetensors (absent gradients left out). */
EMBER_AOT_API ember_status ember_model_save_state(ember_model *m, const char *path);
/* Reads state from a safetensors file: every tensor of the model's state
 * that the file names (of the same dtype and shape) is replaced; the file
 * may hold others. */
EMBER_AOT_API ember_status ember_model_load_state(ember_model *m, const char *path);

/* Random numbers: a model whose graph draws them (dropout, randn) takes
 * them from a Philox stream at (seed, offset), as ember.manual_seed(seed)
 * and its draws set it in Python, so C and Python draw the same numbers.
 * Each run moves the offset past what it drew. */
EMBER_AOT_API int ember_model_draws_random(const ember_model *m);
EMBER_AOT_API void ember_model_set_rng(ember_model *m, uint64_t seed, uint64_t offset);
EMBER_AOT_API void ember_model_get_rng(const ember_model *m, uint64_t *seed, uint64_t *offset);

#ifdef __cplusplus
}
#endif
#endif
