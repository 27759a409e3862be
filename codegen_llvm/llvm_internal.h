/*
 * llvm_internal.h - shared by the files of codegen_llvm/ (not public).
 */
#ifndef EMBER_LLVM_INTERNAL_H
#define EMBER_LLVM_INTERNAL_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

#include "ember/ir.h"

/* ---- jit.c ---- */

/* Starts the process-wide JIT on first use. EM_OK or an error. */
em_status em_llvm_init(void);
/* The host's target machine, for the optimisation pipeline. Borrowed. */
LLVMTargetMachineRef em_llvm_host_tm(void);
const char *em_llvm_host_cpu(void);
const char *em_llvm_host_features(void);
/* A fresh context-owning module with the scalar library linked in, ready
 * for kernels. *tsctx receives the thread-safe context to hand back with
 * em_llvm_add_module (or dispose). */
em_status em_llvm_new_module(const char *name, LLVMOrcThreadSafeContextRef *tsctx,
                             LLVMModuleRef *mod);
/* Optimises `mod` at O3 for the host. */
em_status em_llvm_optimize(LLVMModuleRef mod);
/* Hands `mod` to the JIT under a new resource tracker (*rt, release it with
 * em_llvm_remove); the module and the context are consumed. */
em_status em_llvm_add_module(LLVMOrcThreadSafeContextRef tsctx, LLVMModuleRef mod,
                             LLVMOrcResourceTrackerRef *rt);
/* Address of a JIT-compiled symbol. */
em_status em_llvm_lookup(const char *name, void **addr);
/* Frees the code added under rt. */
void em_llvm_remove(LLVMOrcResourceTrackerRef rt);

/* ---- kernel.c ---- */

/* Signature of every generated kernel: processes the elements [begin, end)
 * of the (row-major) iteration space; ptrs = outputs then inputs. */
typedef void (*em_llvm_kernel_fn)(int64_t begin, int64_t end, char **ptrs);

/* Emits the fused node `node` as function `name` into `mod`, for inputs with
 * the given tensor strides. shares (NULL: none) names per output the input
 * whose memory it is written into, or -1: that output's pointer is the
 * input's (same index, same layout), and the loop reads each element before
 * writing it. */
em_status em_llvm_emit_kernel(LLVMModuleRef mod, const char *name, const em_ir_node *node,
                              int64_t (*const in_strides)[EM_MAX_DIMS], const int *shares);

#endif
