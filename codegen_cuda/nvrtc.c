/*
 * nvrtc.c - NVRTC, loaded at run time: CUDA C source -> PTX.
 *
 * ember is built without linking any CUDA library (DESIGN.md: one build
 * runs with and without the toolkit and a driver), so NVRTC is found with
 * dlopen the first time it is needed: libnvrtc.so.13, .12 or .so by the
 * loader's search, then under $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
 * Its entry points are declared here by their documented C ABI (nvrtc.h:
 * nvrtcResult is an int, nvrtcProgram an opaque pointer), not by
 * including the toolkit's header.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"

typedef void *nvrtc_program;
static struct {
    int (*create)(nvrtc_program *, const char *src, const char *name, int n_headers, const char *const *headers,
                  const char *const *include_names);
    int (*compile)(nvrtc_program, int n_options, const char *const *options);
    int (*ptx_size)(nvrtc_program, size_t *);
    int (*ptx)(nvrtc_program, char *);
    int (*log_size)(nvrtc_program, size_t *);
    int (*log)(nvrtc_program, char *);
    int (*destroy)(nvrtc_program *);
    const char *(*error_string)(int);
    int (*version)(int *major, int *minor);
    char why[512]; /* why it could not be loaded ("" when it was) */
    void *lib;
} nv;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *open_library(char *tried, size_t n) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    const char *home = getenv("CUDA_HOME");
    const char *dirs[] = {home && *home ? home : NULL, "/usr/local/cuda"};
    for (size_t i = 0; i < 2; i++) {
        if (!dirs[i]) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", dirs[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    const char *err = dlerror();
    snprintf(tried, n, "NVRTC could not be loaded (libnvrtc.so.13, .12, .so, $CUDA_HOME/lib64, "
                       "/usr/local/cuda/lib64): %s; install the CUDA Toolkit",
             err ? err : "not found");
    return NULL;
}

static void load(void) {
    if (!(nv.lib = open_library(nv.why, sizeof nv.why))) return;
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&nv.create, "nvrtcCreateProgram"},     {(void **)&nv.compile, "nvrtcCompileProgram"},
        {(void **)&nv.ptx_size, "nvrtcGetPTXSize"},      {(void **)&nv.ptx, "nvrtcGetPTX"},
        {(void **)&nv.log_size, "nvrtcGetProgramLogSize"}, {(void **)&nv.log, "nvrtcGetProgramLog"},
        {(void **)&nv.destroy, "nvrtcDestroyProgram"},   {(void **)&nv.error_string, "nvrtcGetErrorString"},
        {(void **)&nv.version, "nvrtcVersion"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].slot = dlsym(nv.lib, syms[i].name))) {
            snprintf(nv.why, sizeof nv.why, "NVRTC has no %s: a CUDA Toolkit this old is not supported",
                     syms[i].name);
            return;
        }
}

bool em_nvrtc_available(char *why, size_t n) {
    pthread_once(&once, load);
    if (why && n) snprintf(why, n, "%s", nv.why);
    return nv.why[0] == '\0';
}

em_status em_nvrtc_version(int *major, int *minor) {
    char why[512];
    if (!em_nvrtc_available(why, sizeof why)) return em_error(EM_ERR_NOT_IMPLEMENTED, "%s", why);
    if (nv.version(major, minor) != 0) return em_error(EM_ERR_INTERNAL, "nvrtcVersion failed");
    return EM_OK;
}

em_status em_nvrtc_compile(const char *source, const char *name, int n_headers, const char *const *headers,
                           const char *const *header_names, int sm, char **ptx, char **log) {
    *ptx = NULL;
    if (log) *log = NULL;
    char why[512];
    if (!em_nvrtc_available(why, sizeof why)) return em_error(EM_ERR_NOT_IMPLEMENTED, "%s", why);
    nvrtc_program prog = NULL;
    int rc = nv.create(&prog, source, name, n_headers, headers, header_names);
    if (rc != 0) return em_error(EM_ERR_INTERNAL, "nvrtc: %s: %s", name, nv.error_string(rc));
    char arch[32];
    snprintf(arch, sizeof arch, "--gpu-architecture=compute_%d", sm);
    /* -fmad=false: no contraction of a*b+c into one rounding, as the CPU
     * kernels (ops_math.h: the results must not depend on the compiler) */
    const char *opts[] = {arch, "--fmad=false", "--std=c++17", "-default-device", "--diag-suppress=186"};
    rc = nv.compile(prog, (int)(sizeof opts / sizeof *opts), opts);
    size_t n = 0;
    char *text = NULL;
    if (nv.log_size(prog, &n) == 0 && n > 1 && (text = malloc(n)) && nv.log(prog, text) != 0) text[0] = '\0';
    em_status st = EM_OK;
    if (rc != 0) {
        st = em_error(EM_ERR_INTERNAL, "nvrtc: %s did not compile for sm_%d: %s%s%.1500s", name, sm,
                      nv.error_string(rc), text ? "\n" : "", text ? text : "");
    } else if (nv.ptx_size(prog, &n) != 0 || !(*ptx = malloc(n ? n : 1)) || nv.ptx(prog, *ptx) != 0) {
        free(*ptx);
        *ptx = NULL;
        st = em_error(EM_ERR_NOMEM, "nvrtc: %s: no PTX (out of memory?)", name);
    }
    if (log)
        *log = text;
    else
        free(text);
    nv.destroy(&prog);
    return st;
}
