/*
 * aot_format.h - what a shared object made ahead of time holds besides its
 * machine code (not public): the writer is aot.c, the reader aot_model.c.
 *
 * Two symbols, both hidden:
 *   ember_aot_description  NUL-terminated text, below
 *   ember_aot_data         the bytes of the embedded tensors (64-aligned each)
 *   ember_aot_functions    the graph function, then the kernels (the LLVM
 *                          backend's table: backend.h compile_object)
 *   ember_aot_cpu          the CPU features the code may use (below)
 *
 * The description, words separated by white space:
 *   ember-aot <format>
 *   name <function name>
 *   inputs <graph inputs> <arguments>
 *   input <role> <name> <owner> <data offset> <bytes>   (per graph input; its type is the graph's)
 *   outputs <n>
 *   output <name>                                   (types: the graph's results)
 *   effects <n>
 *   effect <kind> <input> <result>
 *   guards <n>
 *   guard <result> <data offset> <bytes> <what>     (a value guard's expected value)
 *   slots <n>
 *   slot <owner> <initial> <final>                  (em_grad_slot)
 *   random <0|1>
 *   weights <embedded|external>
 *   data <bytes>                                    (of ember_aot_data)
 *   ir <bytes>\n<the graph's text>
 *   program <bytes>\n<the program's description (program_io.c)>
 * An input's data offset is -1 when it has no embedded bytes (arguments;
 * gradients absent when traced; every state in external mode, which comes
 * from the .safetensors file by name).
 */
#ifndef EMBER_AOT_FORMAT_H
#define EMBER_AOT_FORMAT_H

#define EM_AOT_FORMAT 1
#define EM_AOT_TABLE "ember_aot_functions"
#define EM_AOT_DESCRIPTION "ember_aot_description"
#define EM_AOT_DATA "ember_aot_data"
#define EM_AOT_ALIGN 64
#define EM_AOT_CPU "ember_aot_cpu"

/* The x86 features a model's code may use because the machine that made it
 * has them (its kernels and the static runtime are compiled for that CPU):
 * the export lists those present in ember_aot_cpu (words), and creating an
 * instance checks the running CPU has each, so a model moved to an older
 * CPU fails with a message instead of an illegal instruction. */
#define EM_AOT_CPU_FEATURES(X)                                                                                        \
    X("sse4.2") X("avx") X("avx2") X("fma") X("bmi") X("bmi2") X("avx512f") X("avx512vl") X("avx512bw")             \
        X("avx512dq") X("avx512cd") X("avx512vnni") X("avx512bf16") X("avx512vbmi") X("avx512vbmi2")             \
            X("avx512bitalg") X("avx512vpopcntdq") X("avx512ifma")

/* What a graph input is to the model. ORDER ROLE: role_names. */
typedef enum em_aot_role {
    EM_AOT_ARG,    /* the caller passes it at every run */
    EM_AOT_WEIGHT, /* state the graph reads only (weights, buffers) */
    EM_AOT_STATE,  /* state the graph updates (parameters, optimizer state) */
    EM_AOT_GRAD,   /* the .grad of input `owner` as it is at the run */
    EM_AOT_N_ROLES
} em_aot_role;

static const char *const em_aot_role_names[EM_AOT_N_ROLES] = {"arg", "weight", "state", "grad"};

#endif
