/*
 * llvm_internal.h - shared by the files of codegen_llvm/ (not public).
 */
#ifndef EMBER_LLVM_INTERNAL_H
#define EMBER_LLVM_INTERNAL_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

#include "ember/disk_cache.h"
#include "ember/ir.h"
#include "../exec/program.h"

/* ---- jit.c ---- */

/* Starts the process-wide JIT on first use. EM_OK or an error. */
em_status em_llvm_init(void);
/* The host's target machine, for the optimisation pipeline. Borrowed. */
LLVMTargetMachineRef em_llvm_host_tm(void);
const char *em_llvm_host_cpu(void);
const char *em_llvm_host_features(void);
/* A fresh context-owning module holding declarations of the scalar
 * library's functions, ready for kernels to call them. *tsctx receives the
 * thread-safe context (the caller disposes it, em_llvm_code_get does). */
em_status em_llvm_new_module(const char *name, LLVMOrcThreadSafeContextRef *tsctx,
                             LLVMModuleRef *mod);
/* Links the scalar library into `mod` (its functions private and always
 * inlined: each kernel keeps what it uses, compiled for this CPU) and
 * optimises at O3 for the host. */
em_status em_llvm_optimize(LLVMModuleRef mod);
/* Address of a JIT-compiled symbol. */
em_status em_llvm_lookup(const char *name, void **addr);
/* Frees the code added under rt. */
void em_llvm_remove(LLVMOrcResourceTrackerRef rt);
const char *em_llvm_host_triple(void);
/* mod's object code for the host (malloc'd, *n bytes). */
em_status em_llvm_emit_object(LLVMModuleRef mod, void **obj, size_t *n);
/* Writes mod's position-independent object code (for a shared object) to
 * the file at path. */
em_status em_llvm_emit_object_file(LLVMModuleRef mod, const char *path);
/* Hands object code (copied) to the JIT under a new resource tracker. */
em_status em_llvm_add_object(const void *obj, size_t n, const char *name, LLVMOrcResourceTrackerRef *rt);

/* ---- code.c ---- */

/* The prefix of the names a graph's module is emitted with; em_llvm_code_key
 * renames them em_<key>_... */
#define EM_LLVM_PLACEHOLDER "em_P_"
#define EM_LLVM_KEY_LEN EM_CACHE_KEY_LEN
/* mod's key (hex), its placeholder names replaced by the key's. */
em_status em_llvm_code_key(LLVMModuleRef mod, char key[EM_LLVM_KEY_LEN + 1]);
/* The name placeholder_name has in the code of key. */
void em_llvm_code_name(const char *key, const char *placeholder_name, char *out, size_t n);

typedef struct em_llvm_code em_llvm_code;
typedef enum { EM_CODE_COMPILED, EM_CODE_SHARED, EM_CODE_FROM_DISK } em_llvm_code_source;
/* The machine code of mod (keyed by em_llvm_code_key): the copy this
 * process has loaded already, else the disk cache's (use_cache), else mod
 * optimised (unless `optimized`) and compiled here, and stored. `symbols`
 * are the names the caller will look up: a stored object in which one is
 * missing or fails to link is unusable, so it is compiled again and
 * replaced (one warning). Consumes mod and tsctx. Release with
 * em_llvm_code_release. */
em_status em_llvm_code_get(const char *key, LLVMOrcThreadSafeContextRef tsctx, LLVMModuleRef mod, bool use_cache,
                           bool optimized, const char *const *symbols, int n_symbols, em_llvm_code **code,
                           em_llvm_code_source *source);
void em_llvm_code_release(em_llvm_code *code);

/* ---- kernel.c ---- */

/* The size table of a kernel compiled for sizes read at run time: the
 * values, in the order the code reads them (em_llvm_size), of one graph. */
typedef struct em_llvm_sizes {
    int64_t *v;
    int n, cap;
    bool nomem;
} em_llvm_sizes;

/* Can fused node `node` be compiled for inputs with these strides, and how
 * does its launch split? EM_OK, or EM_ERR_NOT_IMPLEMENTED saying why (the
 * node then runs op by op on the eager kernels). */
em_status em_llvm_kernel_split(const em_ir_node *node, int64_t (*const in_strides)[EM_MAX_DIMS],
                               em_llvm_split *split);
/* Does the kernel of this split walk EM_LLVM_TILE x EM_LLVM_TILE tiles (an
 * operand read transposed, kernel.c)? */
#define EM_LLVM_TILE 32
bool em_llvm_split_is_tiled(const em_ir_node *node, const em_llvm_split *split);

/* off[k] += operand k's offset (strides[k], in elements) of position pos of
 * the row-major space shape[0..upto) (the outermost index is what is left
 * of pos); sizes and strides through em_llvm_size. */
struct em_llvm_emitter;
void em_llvm_emit_offsets(struct em_llvm_emitter *e, const int64_t *shape, const int64_t (*strides)[EM_MAX_DIMS],
                          int n_ops, int upto, LLVMValueRef pos, LLVMValueRef *off);

/* What the kernel files share to emit per-element code. */
typedef struct em_llvm_emitter {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b; /* created by em_llvm_emitter_init; the caller disposes it */
    LLVMTypeRef i64, i32, i16, i1, i8, f32, f64, ptr;
    /* Sizes read at run time (em_llvm_size): NULL when the kernel is
     * compiled for its sizes; else the table being built, which the launch
     * passes as ptrs[n_ops], loaded in block `entry` of the function whose
     * ptrs parameter is `ptrs`. */
    em_llvm_sizes *sizes;
    int n_ops;
    LLVMValueRef ptrs, table;
    LLVMBasicBlockRef entry;
} em_llvm_emitter;
/* sizes: NULL, or the table of a kernel compiled for sizes read at run
 * time (em_llvm_size). */
void em_llvm_emitter_init(em_llvm_emitter *e, LLVMModuleRef mod, em_llvm_sizes *sizes);
/* Where a kernel function's code starts: its entry block, its operand
 * pointers (n_ops of them, then the size table). */
void em_llvm_emitter_enter(em_llvm_emitter *e, LLVMValueRef fn, LLVMBasicBlockRef entry, int n_ops);
/* A size of the iteration space (a dim's size, a row's length, a stride
 * between rows): the constant itself, or, when sizes are read at run time,
 * the next entry of the size table (loaded once, in the entry block) with
 * v recorded as its value for this graph. Code emitted the same way for
 * graphs that differ only in their sizes is then the same code. */
LLVMValueRef em_llvm_size(em_llvm_emitter *e, int64_t v);
/* A stride inside the innermost loop: 0 and +-1 stay constants (what lets
 * the loop vectorise), others are sizes. */
LLVMValueRef em_llvm_stride(em_llvm_emitter *e, int64_t v);
/* A new kernel function `name` (em_llvm_kernel_fn) tuned for the host. */
LLVMValueRef em_llvm_kernel_function(const em_llvm_emitter *e, const char *name);
/* A dtype's type in registers (bool: i1, 16-bit floats: their bits) and in
 * memory (bool: i8); loads and stores between the two. */
LLVMTypeRef em_llvm_reg_type(const em_llvm_emitter *e, em_dtype dt);
LLVMTypeRef em_llvm_mem_type(const em_llvm_emitter *e, em_dtype dt);
LLVMValueRef em_llvm_load(const em_llvm_emitter *e, em_dtype dt, LLVMValueRef addr);
void em_llvm_store(const em_llvm_emitter *e, em_dtype dt, LLVMValueRef v, LLVMValueRef addr);
LLVMValueRef em_llvm_i64(const em_llvm_emitter *e, int64_t v);
/* Emits region node n (elementwise op, cast, broadcast or scalar constant)
 * for one element: reads its operands from vals[] (by value id), sets its
 * result there. */
em_status em_llvm_emit_element(const em_llvm_emitter *e, const em_ir_node *n, LLVMValueRef *vals);

/* ---- row_kernel.c ---- */

/* Does the fused node's region hold a reduction (a row kernel)? */
bool em_llvm_is_row_kernel(const em_ir_node *node);
/* em_llvm_kernel_split for a row kernel. */
em_status em_llvm_row_split(const em_ir_node *node, int64_t (*const in_strides)[EM_MAX_DIMS],
                            em_llvm_split *split);
/* Emits a row kernel (see row_kernel.c); em_llvm_emit_kernel calls it. */
em_status em_llvm_emit_row_kernel(LLVMModuleRef mod, const char *name, const em_ir_node *node,
                                  int64_t (*const in_strides)[EM_MAX_DIMS], em_llvm_sizes *sizes);

/* Emits the fused node `node` as function `name` into `mod`, for inputs with
 * the given tensor strides (an elementwise kernel, or a row kernel when the
 * region holds reductions: row_kernel.c). shares (NULL: none; row kernels
 * take none) names per output the input
 * whose memory it is written into, or -1: that output's pointer is the
 * input's (same index, same layout), and the loop reads each element before
 * writing it. sizes: NULL (the sizes are constants), or an empty table the
 * sizes are read from at run time (em_llvm_size). */
em_status em_llvm_emit_kernel(LLVMModuleRef mod, const char *name, const em_ir_node *node,
                              int64_t (*const in_strides)[EM_MAX_DIMS], const int *shares, em_llvm_sizes *sizes);

/* ---- graph.c ---- */

/* Emits graph g as function `name` into mod, running its nodes in the
 * plan's order: per node id, kernel_of[id] >= 0 is the index of the kernel
 * it launches (em_llvm_launch), other fused nodes run their regions op by
 * op, other nodes their eager kernels (em_op_run_planned). The code holds
 * no address: every object and runtime function it uses (the graph, its
 * nodes, the kernels, spec's expected values and effects, the callees) is
 * an entry of a table it reads from run->refs, so the same machine code
 * serves another process (or a shared object) given that process's table.
 * op_donation (per node id, or NULL): the donation an eager node's result
 * 0 goes into its input 0's memory under (EM_CALLEE_OP_DONATING), or -1.
 * *refs receives what each entry stands for (malloc'd, *n_refs entries;
 * em_llvm_program_resolve makes the table from them). */
em_status em_llvm_emit_graph(LLVMModuleRef mod, const char *name, const em_ir_graph *g,
                             const em_llvm_plan *plan, const em_run_spec *spec, const int *kernel_of,
                             const int *op_donation, em_llvm_ref **refs, int *n_refs);

#endif
