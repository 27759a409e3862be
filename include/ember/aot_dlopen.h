/*
 * aot_dlopen.h - the C ABI of ember/aot.h through dlopen: every model
 * exports the same function names, so a program that loads several (or
 * picks one at run time) reaches each through its own table.
 *
 *     ember_aot_api api;
 *     if (!ember_aot_open("out/model.so", &api)) { puts(dlerror()); return 1; }
 *     ember_model *m;
 *     if (api.create(NULL, &m) != EMBER_OK) { puts(api.last_error()); return 1; }
 *
 * Header only; link with -ldl (glibc 2.34 and later need nothing).
 */
#ifndef EMBER_AOT_DLOPEN_H
#define EMBER_AOT_DLOPEN_H

#include <dlfcn.h>
#include <stdbool.h>

#include "aot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ember_aot_api {
    void *handle; /* dlopen's: dlclose it when every instance is destroyed */
    int (*abi_version)(void);
    const char *(*model_name)(void);
    const char *(*last_error)(void);
    ember_status (*create)(const char *weights_path, ember_model **out);
    void (*destroy)(ember_model *m);
    int (*num_inputs)(const ember_model *m);
    int (*num_outputs)(const ember_model *m);
    ember_status (*input)(const ember_model *m, int i, ember_tensor_info *info);
    ember_status (*output)(const ember_model *m, int i, ember_tensor_info *info);
    ember_status (*run)(ember_model *m, const DLTensor *inputs, int n_inputs, const DLTensor *outputs, int n_outputs);
    ember_status (*run_alloc)(ember_model *m, const DLTensor *inputs, int n_inputs, DLManagedTensor **outputs,
                              int n_outputs);
    int (*num_states)(const ember_model *m);
    ember_status (*state)(const ember_model *m, int i, ember_tensor_info *info);
    ember_status (*save_state)(ember_model *m, const char *path);
    ember_status (*load_state)(ember_model *m, const char *path);
    int (*draws_random)(const ember_model *m);
    void (*set_rng)(ember_model *m, uint64_t seed, uint64_t offset);
    void (*get_rng)(const ember_model *m, uint64_t *seed, uint64_t *offset);
} ember_aot_api;

/* Opens the model's shared object at path and fills *api. False (see
 * dlerror()) when it cannot be loaded, lacks a function, or was made for
 * another version of the ABI. */
static inline bool ember_aot_open(const char *path, ember_aot_api *api) {
    api->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api->handle) return false;
    static const char *const names[] = {
        "ember_abi_version",      "ember_model_name",      "ember_last_error",     "ember_model_create",
        "ember_model_destroy",    "ember_model_num_inputs", "ember_model_num_outputs", "ember_model_input",
        "ember_model_output",     "ember_model_run",       "ember_model_run_alloc", "ember_model_num_states",
        "ember_model_state",      "ember_model_save_state", "ember_model_load_state", "ember_model_draws_random",
        "ember_model_set_rng",    "ember_model_get_rng"};
    void **slots = (void **)&api->abi_version; /* (the fields above, in this order) */
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(slots[i] = dlsym(api->handle, names[i]))) {
            dlclose(api->handle);
            return false;
        }
    if (api->abi_version() != EMBER_AOT_ABI_VERSION) {
        dlclose(api->handle);
        return false;
    }
    return true;
}

#ifdef __cplusplus
}
#endif
#endif
