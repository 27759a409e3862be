/*
 * program.h - what a compiled graph is at run time, with no LLVM in it: the
 * graph function and its kernels (machine code, wherever it came from),
 * the graph they run, the memory plan's buffers, the donations, the value
 * guards and effects, and the table of addresses the code reads.
 *
 * Two makers build a program: the LLVM backend (codegen_llvm/backend.c),
 * from a module it compiles in this process, and an ahead-of-time model
 * (aot/aot_model.c), from what a shared object holds. Both run it with em_llvm_program_run.
 * This header and the files behind it (program.c, plan.c) use the runtime
 * and the IR only, so a shared object links them without LLVM.
 */
#ifndef EMBER_LLVM_PROGRAM_H
#define EMBER_LLVM_PROGRAM_H

#include "ember/ir.h"

/* Signature of every generated kernel: processes the units [begin, end) of
 * its iteration space (elements of an elementwise kernel, rows of a row
 * kernel); ptrs = outputs then inputs. */
typedef void (*em_llvm_kernel_fn)(int64_t begin, int64_t end, char **ptrs);

/* How a kernel's launch splits: units [0, units), at least grain a task. */
typedef struct em_llvm_split {
    int64_t units, grain;
} em_llvm_split;

/* The matmul of a fused node holding a GEMM epilogue (the rest of its
 * region, applied to each block of the product in the memory of result 0),
 * or NULL. Its launch runs em_matmul_epilogue with the kernel as the
 * epilogue. */
const em_ir_node *em_llvm_gemm_of(const em_ir_node *node);

/* ---- plan.c ---- */

/* How a whole-graph function runs its graph (see plan.c). Positions count
 * body nodes in order. A program made from a shared object has the buffers
 * only (the rest is in its code). */
typedef struct em_llvm_plan {
    const em_ir_graph *g;
    int n_nodes;
    const em_ir_node **order; /* the body's nodes */
    int *pos;                 /* per value: its node's position; -1: a graph input */
    int *last;                /* per value: position of its last use (n_nodes: a result) */
    int *slot;                /* per value: its frame slot; -1: a graph input */
    int n_slots;
    int *release_start, *release_ids; /* values dying after position k:
                                         release_ids[release_start[k]..[k+1]) */
    int *check_start, *check_ids;     /* results whose value guard is compared at
                                         position + 1 (0: on entry), likewise */
    int checked_by; /* position after which every value guard is compared */
    int *buffer;    /* per value: its buffer in the arena, or -1 */
    int *in_place;  /* per value, or NULL: the dying input whose memory a kernel computes it in, or -1 */
    struct em_llvm_buffer {
        int value;              /* whose */
        const em_type *type;    /* the value's */
        const em_ir_value *def; /* the value */
        int64_t offset, nbytes;
    } *buffers;
    int n_buffers;
    int64_t arena_bytes;
} em_llvm_plan;

/* The schedule: order, positions, slots, releases and value-guard checks.
 * spec may be NULL. */
em_status em_llvm_plan_schedule(const em_ir_graph *g, const em_run_spec *spec, em_llvm_plan *p);
/* The memory plan, given per node id whether its results may share memory
 * with its inputs (views, copies, regions run op by op, donated kernels). */
em_status em_llvm_plan_buffers(em_llvm_plan *p, const bool *aliases_inputs);
void em_llvm_plan_free(em_llvm_plan *p);

/* ---- program.c ---- */

/* What a whole-graph function gets per run besides its inputs and outputs. */
typedef struct em_llvm_run {
    uint64_t allowed;        /* bit d: donation d may write its input this run */
    em_tensor **planned;     /* per buffer of the plan: its tensor in this run's arena */
    const void *const *refs; /* the program's table (em_llvm_program.refs) */
} em_llvm_run;

/* The function a graph compiles to: in[] the graph inputs (borrowed),
 * out[] receives the spec's outputs (new references); applies the effects.
 * Returns an em_status. */
typedef int32_t (*em_llvm_graph_fn)(em_tensor *const *in, em_tensor **out, em_llvm_run *run);

/* What an entry of the table a graph function reads stands for (graph.c
 * emits the reads, em_llvm_program_resolve fills the table): the address of
 * a runtime function, of the graph, of body node `index` (by id), of kernel
 * `index`, of the expected value of body result `index`, of the effects.
 * The pairs are what a shared object stores: the addresses are this
 * process's. */
typedef enum em_llvm_ref_kind {
    EM_REF_CALLEE,
    EM_REF_GRAPH,
    EM_REF_NODE,
    EM_REF_KERNEL,
    EM_REF_EXPECTED,
    EM_REF_EFFECTS,
} em_llvm_ref_kind;

/* The runtime functions generated code calls (program.c defines them;
 * graph.c gives their types). ORDER CALLEE: program.c's table. */
typedef enum em_llvm_callee {
    EM_CALLEE_OP,          /* i32 (node, in, out): an eager kernel into planned memory */
    EM_CALLEE_REGION,      /* i32 (node, in, out): a fused node's region, op by op */
    EM_CALLEE_CHECK,       /* i32 (got, want, graph, result): a value guard */
    EM_CALLEE_RETAIN,      /* void (tensor) */
    EM_CALLEE_RELEASE,     /* void (tensor) */
    EM_CALLEE_RELEASE_ALL, /* void (tensors, n) */
    EM_CALLEE_EFFECTS,     /* i32 (effects, n, in, values) */
    EM_CALLEE_LAUNCH,      /* i32 (kernel, in, out, run): em_llvm_launch */
    EM_CALLEE_OP_DONATING, /* i32 (node, in, out, run, donation): an eager kernel whose result
                              0 goes into its input 0's memory (a graph input's) when the
                              donation may write it this run */
    EM_N_CALLEES
} em_llvm_callee;

typedef struct em_llvm_ref {
    int32_t kind, index;
} em_llvm_ref;

#define EM_LLVM_MAX_DONATIONS 64 /* per graph: a bit each in the per-call mask */

/* A compiled kernel and how it is launched. */
typedef struct em_llvm_kernel {
    const em_ir_node *node;
    em_llvm_kernel_fn fn;
    char name[64];                      /* its function's name in the code */
    int64_t (*in_strides)[EM_MAX_DIMS]; /* compiled-for strides, per input */
    int *shares;   /* per output: the node input whose memory it is written into, or -1 */
    int *donation; /* per output: its index among the program's donations, or -1 */
    em_llvm_split split; /* how a launch splits across threads */
    /* The sizes a kernel compiled for sizes read at run time reads (the
     * launch passes them after the operands), or NULL: its sizes are in
     * its code. */
    int64_t *sizes;
    int n_sizes;
    int64_t eager_runs;  /* launches that fell back (strides differed) */
} em_llvm_kernel;

typedef struct em_llvm_frame em_llvm_frame;

typedef struct em_llvm_program {
    const em_ir_graph *g;
    em_llvm_graph_fn fn;
    int n_kernels;
    em_llvm_kernel *kernels;
    int n_donations;
    int donated_input[EM_LLVM_MAX_DONATIONS]; /* graph input index of each donation */
    /* the run spec, owned: the graph function refers to these */
    em_run_spec spec;
    em_tensor **expected;
    em_effect *effects;
    em_llvm_plan plan;
    em_llvm_ref *ref_kinds; /* what each entry of refs stands for */
    const void **refs;
    int n_refs;
    em_llvm_frame *frame; /* the program's own, when no run has it (atomic) */
} em_llvm_program;

/* p->spec: a copy of `spec` (every body result returned when NULL) whose
 * arrays the program owns, the expected values retained. */
em_status em_llvm_program_copy_spec(em_llvm_program *p, const em_run_spec *spec);
/* Fills p->refs from p->ref_kinds (the kernels, graph and spec set). */
em_status em_llvm_program_resolve(em_llvm_program *p);
/* The donations a run with these inputs may make (em_llvm_run.allowed). */
uint64_t em_llvm_program_allowed(const em_llvm_program *p, em_tensor *const *in, int n_in);
/* Runs p->fn: in[] the graph inputs (borrowed, as many as the graph has),
 * out[] receives new references to the spec's outputs. */
em_status em_llvm_program_run(em_llvm_program *p, em_tensor *const *in, em_tensor **out);
/* Launches kernel `kernel` (an em_llvm_kernel): out[i] NULL or a planned
 * tensor to compute result i into; out[] receives new references. A
 * kernel whose inputs are not laid out as compiled for runs its region on
 * the eager kernels. */
int32_t em_llvm_launch(void *kernel, em_tensor *const *in, em_tensor **out, const em_llvm_run *run);
/* Frees what p owns (not the graph, not the code). */
void em_llvm_program_clear(em_llvm_program *p);

/* ---- program_io.c ---- */

/* p's description as text (malloc'd; NULL when memory runs out): its
 * kernels' launches, donations, memory plan and table, without addresses. */
char *em_llvm_program_save(const em_llvm_program *p);
/* The program text[0..len) describes, for graph g (parsed from the text the
 * described program was compiled from) and the code's graph function and
 * kernels (in the description's order; n_kernels < 0: as many as it
 * describes, the table being the code's own). Checks everything against g. The
 * spec is not part of it: set it (em_llvm_program_copy_spec), then
 * em_llvm_program_resolve. On failure p holds what was loaded: clear it. */
em_status em_llvm_program_load(const char *text, size_t len, const em_ir_graph *g, em_llvm_graph_fn fn,
                               const em_llvm_kernel_fn *kernels, int n_kernels, em_llvm_program *p);

#endif
