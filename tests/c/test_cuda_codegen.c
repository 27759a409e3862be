/*
 * test_cuda_codegen.c - every eager elementwise kernel the CUDA code
 * generator writes compiles with NVRTC to PTX for sm_90, and ptxas accepts
 * the PTX: each op of the op table in each compute dtype, the float ops
 * in float16 and bfloat16, every cast, and mixed dtypes; both layouts.
 * No GPU is needed. Without NVRTC (no CUDA Toolkit) the test is skipped
 * (exit 77) with the reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <stdbool.h>

#include "check.h"
#include "ember/codegen_cuda.h"
#include "ember/disk_cache.h"

static int run(const char *dir);

/* EMBER_CUDA_CODEGEN_QUICK=1 (the CI's sanitizer and second-compiler
 * builds, where the generated text is the same as the release build's,
 * which compiles it all): every source is still generated, and checked to
 * define each kernel, but only float32's are compiled, and not by ptxas. */
static bool quick;


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
static const em_dtype stored_dtypes[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_I64, EM_DTYPE_I32, EM_DTYPE_I16,
                                         EM_DTYPE_I8,  EM_DTYPE_U8,  EM_DTYPE_BOOL, EM_DTYPE_F16, EM_DTYPE_BF16};
#define N_STORED ((int)(sizeof stored_dtypes / sizeof *stored_dtypes))

/* Compiles ks[0..n) (one source), checks every kernel is in the PTX and
 * that ptxas accepts it; returns how many kernels. */
static int compile_all(const char *tool, const em_cuda_ew_kernel *ks, int n, const char *what) {
    if (quick && strcmp(what, "float32") != 0) {
        char *src = em_cuda_ew_source(ks, n);
        CHECK_MSG(src != NULL, "%s: %s", what, em_last_error());
        for (int i = 0; src && i < n; i++) {
            char name[160];
            em_cuda_ew_name(&ks[i], EM_CUDA_STRIDED, name, sizeof name);
            CHECK_MSG(strstr(src, name) != NULL, "the source of %s has no %s", what, name);
        }
        free(src);
        return src ? 2 * n : 0;
    }
    char *ptx = NULL;
    em_status st = em_cuda_ew_ptx(ks, n, 90, &ptx);
    CHECK_MSG(st == EM_OK, "%s: %s", what, em_last_error());
    if (st != EM_OK) return 0;
    int kernels = 0;
    for (int i = 0; i < n; i++)
        for (int l = 0; l < 2; l++) {
            char name[160], entry[200];
            em_cuda_ew_name(&ks[i], (em_cuda_layout)l, name, sizeof name);
            snprintf(entry, sizeof entry, ".entry %s(", name);
            CHECK_MSG(strstr(ptx, entry) != NULL, "the PTX of %s has no %s", what, name);
            kernels++;
        }
    if (tool) CHECK_MSG(ptxas_accepts(tool, ptx, what), "ptxas: %s", what);
    free(ptx);
    return kernels;
}

/* Every op in every compute dtype; every float op in float16 and
 * bfloat16 (computed in float32); every cast; mixed dtypes as type
 * promotion makes them. */
static void every_kernel_compiles(const char *tool) {
    int kernels = 0;
    em_cuda_ew_kernel ks[4 * EM_OP_COUNT];
    for (size_t d = 0; d < sizeof compute_dtypes / sizeof *compute_dtypes; d++) {
        int n = em_cuda_ew_uniform(compute_dtypes[d], ks, 4 * EM_OP_COUNT);
        CHECK_MSG(n > 0, "no elementwise ops for %s", em_dtype_name(compute_dtypes[d]));
        kernels += compile_all(tool, ks, n, em_dtype_name(compute_dtypes[d]));
    }
    em_dtype halves[2] = {EM_DTYPE_F16, EM_DTYPE_BF16};
    for (int h = 0; h < 2; h++) {
        int n = em_cuda_ew_uniform(EM_DTYPE_F32, ks, 4 * EM_OP_COUNT);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < ks[i].n_in; j++)
                if (ks[i].in[j] == EM_DTYPE_F32) ks[i].in[j] = halves[h];
            if (ks[i].out == EM_DTYPE_F32) ks[i].out = halves[h];
        }
        kernels += compile_all(tool, ks, n, em_dtype_name(halves[h]));
    }
    int n = 0;
    for (int a = 0; a < N_STORED; a++)
        for (int b = 0; b < N_STORED; b++)
            ks[n++] = (em_cuda_ew_kernel){EM_OP_CAST, 1, {stored_dtypes[a]}, stored_dtypes[b]};
    kernels += compile_all(tool, ks, n, "casts");
    em_cuda_ew_kernel mixed[] = {
        {EM_OP_ADD, 2, {EM_DTYPE_I32, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_MUL, 2, {EM_DTYPE_F16, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_MUL, 2, {EM_DTYPE_BF16, EM_DTYPE_F32}, EM_DTYPE_BF16}, /* (a wrapped number: bf16(y) first) */
        {EM_OP_LT, 2, {EM_DTYPE_BF16, EM_DTYPE_F32}, EM_DTYPE_BOOL},
        {EM_OP_WHERE, 3, {EM_DTYPE_BOOL, EM_DTYPE_F16, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_ADD, 2, {EM_DTYPE_U8, EM_DTYPE_I8}, EM_DTYPE_I16},
        {EM_OP_DIV, 2, {EM_DTYPE_I64, EM_DTYPE_I64}, EM_DTYPE_F32},
        {EM_OP_EXP, 1, {EM_DTYPE_I32}, EM_DTYPE_F32},
    };
    kernels += compile_all(tool, mixed, (int)(sizeof mixed / sizeof *mixed), "mixed dtypes");
    CHECK_MSG(kernels > 900, "only %d kernels", kernels);
    printf("%d eager elementwise kernels %s%s\n", kernels,
           quick ? "generated (float32's compiled)" : "compiled to PTX for sm_90",
           tool ? " and checked by ptxas" : " (no ptxas: not checked)");
}

static void the_source_uses_the_shared_definitions(void) {
    em_cuda_ew_kernel ks[] = {
        {EM_OP_ADD, 2, {EM_DTYPE_F32, EM_DTYPE_F32}, EM_DTYPE_F32},
        {EM_OP_LT, 2, {EM_DTYPE_F32, EM_DTYPE_F32}, EM_DTYPE_BOOL},
        {EM_OP_ADD, 2, {EM_DTYPE_F16, EM_DTYPE_F16}, EM_DTYPE_F16},
        {EM_OP_CAST, 1, {EM_DTYPE_F64}, EM_DTYPE_BF16},
    };
    char *src = em_cuda_ew_source(ks, 4);
    CHECK_MSG(src != NULL, "%s", em_last_error());
    if (!src) return;
    CHECK_MSG(strstr(src, "#include \"ember/ops_math.h\"") != NULL, "the source does not include ops_math.h");
    CHECK_MSG(strstr(src, "y.e[j] = sc_add_f32(x1.e[j], x2.e[j])") != NULL, "add does not call sc_add_f32 per lane");
    CHECK_MSG(strstr(src, "em_cuda_lt_f32_f32_to_b8_contig(long long n, bool *__restrict__ out") != NULL,
          "lt's result is not bool");
    CHECK_MSG(strstr(src, "struct __align__(16) em_cuda_add_f32_f32_to_f32_contig_v1 { float e[4]; }") != NULL,
          "add's float operands are not loaded as 16-byte vectors");
    CHECK_MSG(strstr(src, "sc_cast_f32_f16(sc_add_f32(sc_cast_f16_f32(x1.e[j]), sc_cast_f16_f32(x2.e[j])))") != NULL,
          "float16 does not compute in float32 and round back");
    CHECK_MSG(strstr(src, "struct __align__(16) em_cuda_add_f16_f16_to_f16_contig_v1 { em_sc_f16 e[8]; }") != NULL,
          "float16 is not loaded 8 at a time");
    CHECK_MSG(strstr(src, "out[o[0]] = sc_cast_f64_bf16(in1[o[1]])") != NULL, "a cast is not sc_cast_<from>_<to>");
    free(src);
}

static void errors_name_what_failed(void) {
    em_cuda_ew_kernel mm = {EM_OP_MATMUL, 2, {EM_DTYPE_F32, EM_DTYPE_F32}, EM_DTYPE_F32};
    CHECK_MSG(em_cuda_ew_source(&mm, 1) == NULL, "matmul has an elementwise kernel?");
    CHECK_MSG(strstr(em_last_error(), "matmul is not an elementwise op") != NULL, "%s", em_last_error());
    em_cuda_ew_kernel bad = {EM_OP_BITWISE_AND, 2, {EM_DTYPE_F32, EM_DTYPE_F32}, EM_DTYPE_F32};
    CHECK_MSG(em_cuda_ew_source(&bad, 1) == NULL, "bitwise_and of floats?");
    CHECK_MSG(strstr(em_last_error(), "bitwise_and has no scalar definition for (float32, float32) -> float32") != NULL,
          "%s", em_last_error());
    char *ptx = NULL, *log = NULL;
    em_status st = em_nvrtc_compile("__global__ void k() { undefined_thing(); }", "bad.cu", 0, NULL, NULL, 90, &ptx,
                                    &log);
    CHECK_MSG(st != EM_OK && ptx == NULL, "bad source compiled");
    CHECK_MSG(strstr(em_last_error(), "bad.cu did not compile for sm_90") != NULL, "%s", em_last_error());
    CHECK_MSG(strstr(em_last_error(), "undefined_thing") != NULL, "the error does not quote NVRTC's log: %s",
          em_last_error());
    CHECK_MSG(log && strstr(log, "undefined_thing"), "no log");
    free(log);
}

/* rand and randn from ops_random.h, the CPU's arithmetic. */
static void random_kernels_compile(const char *tool) {
    char *src = em_cuda_random_source(), *ptx = NULL;
    CHECK_MSG(src && strstr(src, "em_sc_philox(seed, offset + (unsigned long long)blk, w)"), "no Philox call");
    em_status st = src ? em_cuda_ptx(src, "random.cu", 90, &ptx, NULL) : EM_ERR_NOMEM;
    CHECK_MSG(st == EM_OK, "%s", em_last_error());
    const char *names[8];
    int n = em_cuda_random_kernels(names, 8);
    CHECK_MSG(n == 4, "%d random kernels", n);
    for (int i = 0; ptx && i < n; i++) {
        char entry[96];
        snprintf(entry, sizeof entry, ".entry em_cuda_%s(", names[i]);
        CHECK_MSG(strstr(ptx, entry) != NULL, "no %s in the PTX", entry);
    }
    if (ptx && tool) CHECK_MSG(ptxas_accepts(tool, ptx, "random kernels"), "ptxas: random kernels");
    free(ptx);
    free(src);
}

/* Every gather and scatter kernel (each dtype, int64 and int32 indices,
 * scatter_add's atomics) in one source, through ptxas; refusals by name. */
static void index_kernels_compile(const char *tool) {
    em_cuda_index_kernel ks[128];
    int n = em_cuda_index_all(ks, 128);
    CHECK_MSG(n == 48, "%d gather/scatter kernels", n);
    char *ptx = NULL;
    CHECK_MSG(em_cuda_index_ptx(ks, n, 90, &ptx) == EM_OK, "%s", em_last_error());
    for (int i = 0; ptx && i < n; i++) {
        char name[96], entry[120];
        em_cuda_index_name(&ks[i], name, sizeof name);
        snprintf(entry, sizeof entry, ".entry %s(", name);
        CHECK_MSG(strstr(ptx, entry) != NULL, "no %s in the PTX", entry);
    }
    if (ptx && tool) CHECK_MSG(ptxas_accepts(tool, ptx, "gather/scatter"), "ptxas: gather/scatter");
    free(ptx);
    em_cuda_index_kernel half_add = {EM_OP_SCATTER, EM_DTYPE_F16, EM_DTYPE_I64, true};
    CHECK(em_cuda_index_check(&half_add) == EM_ERR_NOT_IMPLEMENTED && strstr(em_last_error(), "float16"));
    em_cuda_index_kernel float_index = {EM_OP_GATHER, EM_DTYPE_F32, EM_DTYPE_F32, false};
    CHECK(em_cuda_index_check(&float_index) == EM_ERR_DTYPE);
}

/* Every reduction in every dtype it accepts, both layouts, through ptxas;
 * the source folds with ops_math.h's math and the rules' texts. */
static void every_reduction_compiles(const char *tool) {
    int kernels = 0;
    em_cuda_reduce_kernel ks[4 * EM_OP_COUNT];
    for (int d = 0; d < N_STORED; d++) {
        int n = em_cuda_reduce_all(stored_dtypes[d], ks, 4 * EM_OP_COUNT);
        CHECK_MSG(n >= 8 && n <= 4 * EM_OP_COUNT, "%d reductions of %s", n, em_dtype_name(stored_dtypes[d]));
        char *ptx = NULL;
        if (quick && stored_dtypes[d] != EM_DTYPE_F32) {
            char *src = em_cuda_reduce_source(ks, n);
            CHECK_MSG(src != NULL, "reductions of %s: %s", em_dtype_name(stored_dtypes[d]), em_last_error());
            kernels += src ? 4 * n : 0; /* (block, thread, split, join) */
            free(src);
            continue;
        }
        if (em_cuda_reduce_ptx(ks, n, 90, &ptx) != EM_OK) {
            CHECK_MSG(0, "reductions of %s: %s", em_dtype_name(stored_dtypes[d]), em_last_error());
            continue;
        }
        for (int i = 0; i < n; i++)
            for (int l = 0; l < 4; l++) { /* (block, thread, split, join) */
                char name[160], entry[200];
                em_cuda_reduce_name(&ks[i], (em_cuda_reduce_layout)l, name, sizeof name);
                snprintf(entry, sizeof entry, ".entry %s(", name);
                CHECK_MSG(strstr(ptx, entry) != NULL, "the PTX has no %s", name);
                kernels++;
            }
        if (tool) CHECK_MSG(ptxas_accepts(tool, ptx, em_dtype_name(stored_dtypes[d])), "ptxas: reductions");
        free(ptx);
    }
    CHECK_MSG(kernels > 500, "only %d reduction kernels", kernels);
    printf("%d eager reduction kernels %s\n", kernels,
           quick ? "generated (float32's compiled)" : "compiled to PTX for sm_90");

    em_cuda_reduce_kernel some[] = {
        {EM_OP_SUM, EM_DTYPE_F16, EM_DTYPE_F16, 0},     {EM_OP_SUM, EM_DTYPE_I32, EM_DTYPE_I64, 0},
        {EM_OP_NORM, EM_DTYPE_F32, EM_DTYPE_F32, 3.0},  {EM_OP_ARGMAX, EM_DTYPE_BF16, EM_DTYPE_I64, 0},
        {EM_OP_LOGSUMEXP, EM_DTYPE_I8, EM_DTYPE_F32, 0},
    };
    char *src = em_cuda_reduce_source(some, 5);
    CHECK_MSG(src != NULL, "%s", em_last_error());
    if (src) {
        CHECK_MSG(strstr(src, "namespace em_cuda_sum_f16_to_f16_ns {\ntypedef double V;") != NULL,
              "float16 does not sum in double (the CPU's accumulator)");
        CHECK_MSG(strstr(src, "V x = sc_cast_f16_f64(in[at]);") != NULL, "float16 is not read through sc_cast");
        CHECK_MSG(strstr(src, "namespace em_cuda_sum_i32_to_i64_ns {\ntypedef em_sc_i64 V;") != NULL,
              "int32 does not sum in int64");
        CHECK_MSG(strstr(src, "b.v = em_pow(em_abs(x), (V)p);") != NULL, "norm 3 does not fold |x|^p");
        CHECK_MSG(strstr(src, "em_cuda_normp_f32_to_f32_block(") != NULL, "norm 3's kernel is not normp");
        CHECK_MSG(strstr(src, "if (em_arg_takes(a.v, a.i, b.v, b.i, false)) a = b;") != NULL, "argmax's rule");
        CHECK_MSG(strstr(src, "y = em_isinf(c) ? c : c + em_log(a.v);") != NULL, "logsumexp's finish");
        CHECK_MSG(strstr(src, "V x = sc_cast_i8_f64(in[at]);") != NULL, "logsumexp of int8 is not in double");
        free(src);
    }
    em_cuda_reduce_kernel mean_int = {EM_OP_MEAN, EM_DTYPE_I64, EM_DTYPE_I64, 0};
    CHECK_MSG(em_cuda_reduce_source(&mean_int, 1) == NULL, "mean of int64 has a kernel?");
    CHECK_MSG(strstr(em_last_error(), "cuda: mean has no kernel for int64") != NULL, "%s", em_last_error());
    em_cuda_reduce_kernel sum_f16_f32 = {EM_OP_SUM, EM_DTYPE_F16, EM_DTYPE_F32, 0};
    CHECK_MSG(em_cuda_reduce_source(&sum_f16_f32, 1) == NULL, "sum float16 -> float32?");
    CHECK_MSG(strstr(em_last_error(), "sum of float16 gives float16, not float32") != NULL, "%s", em_last_error());
    em_cuda_reduce_kernel add = {EM_OP_ADD, EM_DTYPE_F32, EM_DTYPE_F32, 0};
    CHECK_MSG(em_cuda_reduce_source(&add, 1) == NULL && strstr(em_last_error(), "cuda: add is not a reduction"),
          "%s", em_last_error());
}

/* Every op along lines (cumsum, cumprod, softmax, log_softmax, layer_norm)
 * in every dtype it accepts, both layouts, through ptxas. */
static void every_line_op_compiles(const char *tool) {
    int kernels = 0;
    em_cuda_line_kernel ks[16];
    for (int d = 0; d < N_STORED; d++) {
        int n = em_cuda_line_all(stored_dtypes[d], ks, 16);
        bool fl = em_dtype_is_float(stored_dtypes[d]);
        CHECK_MSG(n == (fl ? 7 : 2), "%d ops along lines for %s", n, em_dtype_name(stored_dtypes[d]));
        if (quick && stored_dtypes[d] != EM_DTYPE_F32) {
            char *src = em_cuda_line_source(ks, n);
            CHECK_MSG(src != NULL, "%s", em_last_error());
            kernels += src ? 4 * n : 0; /* (block, thread, split, join) */
            free(src);
            continue;
        }
        char *ptx = NULL;
        if (em_cuda_line_ptx(ks, n, 90, &ptx) != EM_OK) {
            CHECK_MSG(0, "ops along lines of %s: %s", em_dtype_name(stored_dtypes[d]), em_last_error());
            continue;
        }
        for (int i = 0; i < n; i++)
            for (int l = 0; l < 2; l++) {
                char name[160], entry[200];
                em_cuda_line_name(&ks[i], (em_cuda_line_layout)l, name, sizeof name);
                snprintf(entry, sizeof entry, ".entry %s(", name);
                CHECK_MSG(strstr(ptx, entry) != NULL, "the PTX has no %s", name);
                kernels++;
            }
        if (tool) CHECK_MSG(ptxas_accepts(tool, ptx, em_dtype_name(stored_dtypes[d])), "ptxas: ops along lines");
        free(ptx);
    }
    printf("%d eager kernels along lines %s\n", kernels, quick ? "generated (float32's compiled)" : "compiled to PTX");
    em_cuda_line_kernel sm_int = {EM_OP_SOFTMAX, EM_DTYPE_I32, EM_DTYPE_I32, 1};
    CHECK_MSG(em_cuda_line_source(&sm_int, 1) == NULL && strstr(em_last_error(), "cuda: softmax has no kernel for int32"),
          "%s", em_last_error());
    em_cuda_line_kernel ln4 = {EM_OP_LAYER_NORM, EM_DTYPE_F32, EM_DTYPE_F32, 4};
    CHECK_MSG(em_cuda_line_source(&ln4, 1) == NULL && strstr(em_last_error(), "layer_norm takes 1 to 3"), "%s",
          em_last_error());
    em_cuda_line_kernel cs = {EM_OP_CUMSUM, EM_DTYPE_BOOL, EM_DTYPE_I64, 1};
    char *src = em_cuda_line_source(&cs, 1);
    CHECK_MSG(src && strstr(src, "acc = j ? em_add(acc, x(j)) : x(j)") && strstr(src, "sc_cast_b8_i64(in[j * is])"),
          "cumsum of bool does not scan in int64 from its first element");
    CHECK_MSG(src && strstr(src, "put(j, at ? em_add(carry, v) : v)"),
              "the block scan adds its carry to the first chunk (a leading -0 would become +0)");
    free(src);
}

/* The one .ptx entry in dir, or false. */
static bool ptx_entry(const char *dir, char *path, size_t n) {
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".ptx") == 0) {
            snprintf(path, n, "%s/%s", dir, e->d_name);
            found = true;
        }
    }
    if (d) closedir(d);
    return found;
}

/* PTX is compiled once: kept in the process, then on disk; a damaged entry
 * is compiled again; another compute capability is another entry. */
static void ptx_is_compiled_once(const char *dir) {
    em_cuda_ew_kernel k = {EM_OP_NEG, 1, {EM_DTYPE_F32}, EM_DTYPE_F32};
    char *src = em_cuda_ew_source(&k, 1), *p[5] = {NULL};
    em_cuda_ptx_source from[5];
    CHECK_MSG(src != NULL, "%s", em_last_error());
    if (!src) return;
    em_cuda_ptx_forget();
    CHECK_MSG(em_cuda_ptx(src, "neg.cu", 90, &p[0], &from[0]) == EM_OK, "%s", em_last_error());
    CHECK_MSG(em_cuda_ptx(src, "neg.cu", 90, &p[1], &from[1]) == EM_OK, "%s", em_last_error());
    em_cuda_ptx_forget();
    CHECK_MSG(em_cuda_ptx(src, "neg.cu", 90, &p[2], &from[2]) == EM_OK, "%s", em_last_error());
    CHECK_MSG(from[0] == EM_PTX_COMPILED && from[1] == EM_PTX_FROM_MEMORY && from[2] == EM_PTX_FROM_DISK,
          "sources %d %d %d", (int)from[0], (int)from[1], (int)from[2]);
    CHECK_MSG(p[0] && p[1] && p[2] && !strcmp(p[0], p[1]) && !strcmp(p[0], p[2]), "the PTX differs");
    char path[1200], folder[1100];
    snprintf(folder, sizeof folder, "%s/ember-cache-v1", dir); /* (the cache's own folder in it) */
    CHECK_MSG(ptx_entry(folder, path, sizeof path), "no .ptx entry in %s", folder);
    FILE *f = fopen(path, "wb"); /* damaged: a compile again, not garbage */
    if (f) {
        fputs("not an entry", f);
        fclose(f);
    }
    em_cuda_ptx_forget();
    CHECK_MSG(em_cuda_ptx(src, "neg.cu", 90, &p[3], &from[3]) == EM_OK && from[3] == EM_PTX_COMPILED,
          "a damaged entry was used");
    CHECK_MSG(p[3] && p[0] && !strcmp(p[3], p[0]), "the PTX differs after a recompile");
    CHECK_MSG(em_cuda_ptx(src, "neg.cu", 80, &p[4], &from[4]) == EM_OK && from[4] == EM_PTX_COMPILED,
          "sm_80 was served sm_90's PTX");
    CHECK_MSG(p[4] && strstr(p[4], ".target sm_80"), "no sm_80 target");
    for (int i = 0; i < 5; i++) free(p[i]);
    free(src);
}

/* The reductions' layouts: a whole tensor's sum splits across the GPU; a
 * few outputs too short to split (2000 elements: a column sum of a
 * [2000, 40] tensor) take a block each, never zero chunks (which launched
 * nothing: every such reduction read uninitialised memory on the H200). */
static void reduce_plans(void) {
    static const struct {
        long long n_out, n_red;
        em_cuda_reduce_layout layout;
        long long chunks;
    } cases[] = {
        {1, 1LL << 26, EM_CUDA_REDUCE_SPLIT, 528}, /* 132 SMs x 4 blocks */
        {1, 80000, EM_CUDA_REDUCE_SPLIT, 39},     /* 80000 / (256 x 8) */
        {40, 2000, EM_CUDA_REDUCE_BLOCK, 1},
        {1, 4095, EM_CUDA_REDUCE_BLOCK, 1},       /* one chunk's worth only */
        {16, 1, EM_CUDA_REDUCE_BLOCK, 1},
        {100000, 16, EM_CUDA_REDUCE_THREAD, 1},
        {100000, 4096, EM_CUDA_REDUCE_BLOCK, 1},
        {264, 1 << 20, EM_CUDA_REDUCE_SPLIT, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long long chunks = -1;
        em_cuda_reduce_layout l = em_cuda_reduce_plan(cases[i].n_out, cases[i].n_red, 132, 256, &chunks);
        CHECK_MSG(l == cases[i].layout && chunks == cases[i].chunks,
                  "reduce plan of %lld outputs of %lld: layout %d, %lld chunks (want %d, %lld)", cases[i].n_out,
                  cases[i].n_red, (int)l, chunks, (int)cases[i].layout, cases[i].chunks);
    }
}

int main(void) {
    reduce_plans();
    /* a cache of the test's own, so that every kernel is compiled here */
    char dir[] = "/tmp/ember-cuda-test-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("EMBER_CACHE_DIR", dir, 1);
    int rc = run(dir);
    em_disk_cache_clear();
    char path[600];
    snprintf(path, sizeof path, "%s/ember-cache-v1/secret", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/ember-cache-v1", dir);
    rmdir(path);
    rmdir(dir);
    return rc;
}

static int run(const char *dir) {
    char why[512];
    if (!em_nvrtc_available(why, sizeof why)) {
        printf("skipped: %s\n", why);
        return 77;
    }
    int major = 0, minor = 0;
    em_nvrtc_version(&major, &minor);
    char buf[1024];
    const char *quick_env = getenv("EMBER_CUDA_CODEGEN_QUICK");
    quick = quick_env && *quick_env && strcmp(quick_env, "0") != 0;
    const char *tool = quick ? NULL : ptxas(buf, sizeof buf);
    printf("NVRTC %d.%d; ptxas %s%s\n", major, minor, tool ? tool : quick ? "not run" : "not found",
           quick ? " (EMBER_CUDA_CODEGEN_QUICK: every source generated, float32's compiled)" : "");
    the_source_uses_the_shared_definitions();
    errors_name_what_failed();
    ptx_is_compiled_once(dir);
    random_kernels_compile(tool);
    index_kernels_compile(tool);
    every_reduction_compiles(tool);
    every_line_op_compiles(tool);
    every_kernel_compiles(tool);
    return check_report();
}
