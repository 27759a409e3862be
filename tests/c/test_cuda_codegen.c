/*
 * test_cuda_codegen.c - every eager elementwise kernel the CUDA code
 * generator writes (each op and compute dtype of the op table, both
 * layouts) compiles with NVRTC to PTX for sm_90, and ptxas accepts the PTX.
 * No GPU is needed. Without NVRTC (no CUDA Toolkit) the test is skipped
 * (exit 77) with the reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember/codegen_cuda.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* ptxas from $CUDA_HOME or /usr/local/cuda, or NULL. */
static const char *ptxas(char *buf, size_t n) {
    const char *home = getenv("CUDA_HOME");
    snprintf(buf, n, "%s/bin/ptxas", home && *home ? home : "/usr/local/cuda");
    return access(buf, X_OK) == 0 ? buf : NULL;
}

/* Does ptxas accept `ptx` for sm_90? */
static int ptxas_accepts(const char *tool, const char *ptx, const char *what) {
    char path[] = "/tmp/ember-ptx-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    FILE *f = fdopen(fd, "w");
    fputs(ptx, f);
    fclose(f);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90 -o /dev/null '%s' 2>&1", tool, path);
    FILE *p = popen(cmd, "r");
    char out[2048] = "";
    size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[got] = '\0';
    int rc = p ? pclose(p) : -1;
    unlink(path);
    if (rc != 0) fprintf(stderr, "ptxas rejects the PTX of %s:\n%s\n", what, out);
    return rc == 0;
}

static const em_dtype compute_dtypes[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_I64, EM_DTYPE_I32,
                                          EM_DTYPE_I16, EM_DTYPE_I8,  EM_DTYPE_U8,  EM_DTYPE_BOOL};

static void every_kernel_compiles(const char *tool) {
    int kernels = 0;
    for (size_t d = 0; d < sizeof compute_dtypes / sizeof *compute_dtypes; d++) {
        em_dtype dt = compute_dtypes[d];
        em_op ops[EM_OP_COUNT];
        int n = em_cuda_ew_ops(dt, ops, EM_OP_COUNT);
        CHECK(n > 0, "no elementwise ops for %s", em_dtype_name(dt));
        char *ptx = NULL;
        em_status st = em_cuda_ew_ptx(ops, n, dt, 90, &ptx);
        CHECK(st == EM_OK, "%s: %s", em_dtype_name(dt), em_last_error());
        if (st != EM_OK) continue;
        for (int i = 0; i < n; i++)
            for (int l = 0; l < 2; l++) {
                char name[128], entry[160];
                em_cuda_ew_name(ops[i], dt, (em_cuda_layout)l, name, sizeof name);
                snprintf(entry, sizeof entry, ".entry %s(", name);
                CHECK(strstr(ptx, entry) != NULL, "the PTX for %s has no %s", em_dtype_name(dt), name);
                kernels++;
            }
        if (tool) CHECK(ptxas_accepts(tool, ptx, em_dtype_name(dt)), "ptxas: %s", em_dtype_name(dt));
        free(ptx);
    }
    CHECK(kernels > 400, "only %d kernels", kernels);
    printf("%d eager elementwise kernels compiled to PTX for sm_90%s\n", kernels,
           tool ? " and checked by ptxas" : " (no ptxas: not checked)");
}

static void the_source_uses_the_shared_definitions(void) {
    em_op ops[2] = {EM_OP_ADD, EM_OP_LT};
    char *src = em_cuda_ew_source(ops, 2, EM_DTYPE_F32);
    CHECK(src != NULL, "%s", em_last_error());
    if (!src) return;
    CHECK(strstr(src, "#include \"ember/ops_math.h\"") != NULL, "the source does not include ops_math.h");
    CHECK(strstr(src, "sc_add_f32(x1.e[j], x2.e[j])") != NULL, "add does not call sc_add_f32 per vector lane");
    CHECK(strstr(src, "bool *__restrict__ out") != NULL, "lt's result is not bool");
    CHECK(strstr(src, "struct __align__(16) em_cuda_add_f32_contig_v1 { float e[4]; }") != NULL,
          "add's float operands are not loaded as 16-byte vectors");
    free(src);
}

static void errors_name_what_failed(void) {
    em_op mm = EM_OP_MATMUL;
    CHECK(em_cuda_ew_source(&mm, 1, EM_DTYPE_F32) == NULL, "matmul has an elementwise kernel?");
    CHECK(strstr(em_last_error(), "matmul has no scalar definition for float32") != NULL, "%s", em_last_error());
    em_op add = EM_OP_ADD;
    CHECK(em_cuda_ew_source(&add, 1, EM_DTYPE_F16) == NULL, "float16 computes in float32");
    char *ptx = NULL, *log = NULL;
    em_status st = em_nvrtc_compile("__global__ void k() { undefined_thing(); }", "bad.cu", 0, NULL, NULL, 90, &ptx,
                                    &log);
    CHECK(st != EM_OK && ptx == NULL, "bad source compiled");
    CHECK(strstr(em_last_error(), "bad.cu did not compile for sm_90") != NULL, "%s", em_last_error());
    CHECK(strstr(em_last_error(), "undefined_thing") != NULL, "the error does not quote NVRTC's log: %s",
          em_last_error());
    CHECK(log && strstr(log, "undefined_thing"), "no log");
    free(log);
}

int main(void) {
    char why[512];
    if (!em_nvrtc_available(why, sizeof why)) {
        printf("skipped: %s\n", why);
        return 77;
    }
    int major = 0, minor = 0;
    em_nvrtc_version(&major, &minor);
    char buf[1024];
    const char *tool = ptxas(buf, sizeof buf);
    printf("NVRTC %d.%d; ptxas %s\n", major, minor, tool ? tool : "not found");
    the_source_uses_the_shared_definitions();
    errors_name_what_failed();
    every_kernel_compiles(tool);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
