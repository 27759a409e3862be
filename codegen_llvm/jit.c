/*
 * jit.c - the process-wide ORC LLJIT, the host target machine, and modules
 * prepared with the scalar library.
 *
 * One LLJIT serves every compiled function; each compiled graph's code lives
 * under its own resource tracker, so freeing a compiled function frees its
 * machine code. A mutex serialises JIT access (compiles are rare).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "ember/ops.h"
#include "llvm_internal.h"

extern const unsigned char em_scalar_bitcode[];
extern const size_t em_scalar_bitcode_size;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static LLVMOrcLLJITRef jit;
static LLVMTargetMachineRef host_tm;
static char *host_cpu, *host_features, *host_triple, *host_layout;
static em_status init_status = EM_OK;
static bool initialised;
static LLVMTargetMachineRef pic_tm;

static em_status llvm_error(const char *what, LLVMErrorRef err) {
    char *msg = LLVMGetErrorMessage(err);
    em_status st = em_error(EM_ERR_RUNTIME, "llvm: %s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return st;
}

static em_status init_locked(void) {
    if (initialised) return init_status;
    initialised = true;
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
        return init_status = em_error(EM_ERR_RUNTIME, "llvm: no native target");
    host_triple = LLVMGetDefaultTargetTriple();
    host_cpu = LLVMGetHostCPUName();
    host_features = LLVMGetHostCPUFeatures();
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(host_triple, &target, &msg)) {
        init_status = em_error(EM_ERR_RUNTIME, "llvm: %s", msg);
        LLVMDisposeMessage(msg);
        return init_status;
    }
    host_tm = LLVMCreateTargetMachine(target, host_triple, host_cpu, host_features,
                                      LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                      LLVMCodeModelJITDefault);
    /* Code for shared objects (ahead of time): position independent. */
    pic_tm = LLVMCreateTargetMachine(target, host_triple, host_cpu, host_features, LLVMCodeGenLevelAggressive,
                                     LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(host_tm);
    host_layout = LLVMCopyStringRepOfTargetData(td);
    LLVMDisposeTargetData(td);
    /* The JIT compiles for the same machine (detected host, O3 codegen). */
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMTargetMachineRef jit_tm = LLVMCreateTargetMachine(target, host_triple, host_cpu, host_features,
                                                          LLVMCodeGenLevelAggressive,
                                                          LLVMRelocDefault, LLVMCodeModelJITDefault);
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_tm));
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit, builder);
    if (err) return init_status = llvm_error("creating the JIT", err);
    /* Let kernels call libm (powf, exp for float64, ...) from this process. */
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(jit),
                                                               NULL, NULL);
    if (err) return init_status = llvm_error("process symbols", err);
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit), gen);
    /* The runtime functions generated code calls by name (ember's own
     * symbols are hidden, so the process search above cannot find them). */
    static const struct {
        const char *name;
        const void *fn;
    } runtime[] = {{"em_reduce_row", (const void *)(uintptr_t)em_reduce_row}};
    enum { N_RUNTIME = sizeof runtime / sizeof runtime[0] };
    LLVMOrcCSymbolMapPair pairs[N_RUNTIME];
    for (int i = 0; i < N_RUNTIME; i++) {
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(jit, runtime[i].name);
        pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)runtime[i].fn;
        pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[i].Sym.Flags.TargetFlags = 0;
    }
    err = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(jit), LLVMOrcAbsoluteSymbols(pairs, N_RUNTIME));
    if (err) return init_status = llvm_error("runtime symbols", err);
    return init_status = EM_OK;
}

em_status em_llvm_init(void) {
    pthread_mutex_lock(&lock);
    em_status st = init_locked();
    pthread_mutex_unlock(&lock);
    if (st != EM_OK) em_error(st, "llvm backend unavailable");
    return st;
}

LLVMTargetMachineRef em_llvm_host_tm(void) { return host_tm; }
const char *em_llvm_host_cpu(void) { return host_cpu; }
const char *em_llvm_host_triple(void) { return host_triple; }
const char *em_llvm_host_features(void) { return host_features; }

/* The scalar library, parsed in ctx: lazily (prototypes only, which is
 * what kernels need to call it) or whole (to link and compile). */
static em_status parse_library(LLVMContextRef ctx, bool lazy, LLVMModuleRef *lib) {
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(
        (const char *)em_scalar_bitcode, em_scalar_bitcode_size, "scalar_library", 0);
    LLVMBool failed = lazy ? LLVMGetBitcodeModuleInContext2(ctx, buf, lib) : LLVMParseBitcodeInContext2(ctx, buf, lib);
    if (!lazy || failed) LLVMDisposeMemoryBuffer(buf); /* (a lazy module owns its buffer) */
    if (failed) return em_error(EM_ERR_INTERNAL, "llvm: cannot read the embedded scalar library");
    LLVMSetTarget(*lib, host_triple);
    LLVMSetDataLayout(*lib, host_layout);
    return EM_OK;
}

em_status em_llvm_new_module(const char *name, LLVMOrcThreadSafeContextRef *tsctx,
                             LLVMModuleRef *mod) {
    *tsctx = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextRef ctx = LLVMOrcThreadSafeContextGetContext(*tsctx);
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext(name, ctx), lib;
    LLVMSetTarget(m, host_triple);
    LLVMSetDataLayout(m, host_layout);
    /* Declarations only: the library's bodies are linked before O3, when
     * the code is compiled here (a cached compile never needs them; the
     * whole parse and link took 6 ms of its 14). */
    em_status st = parse_library(ctx, true, &lib);
    if (st != EM_OK) {
        LLVMDisposeModule(m);
        LLVMOrcDisposeThreadSafeContext(*tsctx);
        return st;
    }
    for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f)) {
        size_t len;
        const char *fname = LLVMGetValueName2(f, &len);
        if (LLVMGetLinkage(f) == LLVMExternalLinkage && !LLVMGetNamedFunction(m, fname))
            LLVMAddFunction(m, fname, LLVMGlobalGetValueType(f));
    }
    LLVMDisposeModule(lib);
    *mod = m;
    return EM_OK;
}

/* Links the whole library into m: its functions private and always
 * inlined (each kernel keeps what it uses), compiled for this CPU. */
static em_status link_library(LLVMModuleRef m) {
    LLVMContextRef ctx = LLVMGetModuleContext(m);
    LLVMModuleRef lib;
    em_status st = parse_library(ctx, false, &lib);
    if (st != EM_OK) return st;
    /* the library's own definitions, by name, before linking merges them */
    size_t n = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f)) n++;
    char **names = calloc(n ? n : 1, sizeof *names);
    size_t k = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(lib); names && f; f = LLVMGetNextFunction(f)) {
        size_t len;
        const char *fname = LLVMGetValueName2(f, &len);
        if (LLVMIsDeclaration(f) || !(names[k] = malloc(len + 1))) continue;
        memcpy(names[k++], fname, len + 1);
    }
    if (!names || LLVMLinkModules2(m, lib)) { /* (consumes lib) */
        if (!names) LLVMDisposeModule(lib);
        free(names);
        return em_error(EM_ERR_INTERNAL, "llvm: cannot link the scalar library");
    }
    unsigned inl = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    unsigned noinl = LLVMGetEnumAttributeKindForName("noinline", 8);
    for (size_t i = 0; i < k; i++) {
        LLVMValueRef f = LLVMGetNamedFunction(m, names[i]);
        free(names[i]);
        if (!f || LLVMIsDeclaration(f)) continue;
        LLVMSetLinkage(f, LLVMPrivateLinkage);
        LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, noinl);
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, inl, 0));
        LLVMRemoveStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, "target-cpu", 10);
        LLVMRemoveStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, "target-features", 15);
        LLVMRemoveStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, "tune-cpu", 8);
    }
    free(names);
    return EM_OK;
}

/* Deletes the scalar library's functions that no kernel calls, directly or
 * through other library functions. O3's early passes would otherwise work
 * through all ~400 of them before inlining leaves them dead: that was about
 * a third of a one-kernel graph's compile time. */
static void drop_unused_library(LLVMModuleRef mod) {
    for (bool changed = true; changed;) {
        changed = false;
        for (LLVMValueRef f = LLVMGetFirstFunction(mod), next; f; f = next) {
            next = LLVMGetNextFunction(f);
            if (LLVMGetLinkage(f) == LLVMPrivateLinkage && !LLVMGetFirstUse(f)) {
                LLVMDeleteFunction(f);
                changed = true;
            }
        }
    }
}

em_status em_llvm_optimize(LLVMModuleRef mod) {
    em_status st = link_library(mod);
    if (st != EM_OK) return st;
    drop_unused_library(mod);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
    LLVMErrorRef err = LLVMRunPasses(mod, "default<O3>", host_tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    return err ? llvm_error("optimising", err) : EM_OK;
}

em_status em_llvm_lookup(const char *name, void **addr) {
    LLVMOrcExecutorAddress a = 0;
    pthread_mutex_lock(&lock);
    LLVMErrorRef err = LLVMOrcLLJITLookup(jit, &a, name);
    pthread_mutex_unlock(&lock);
    if (err) return llvm_error("looking up a kernel", err);
    *addr = (void *)(uintptr_t)a;
    return EM_OK;
}

em_status em_llvm_emit_object(LLVMModuleRef mod, void **obj, size_t *n) {
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    pthread_mutex_lock(&lock);
    LLVMBool failed = LLVMTargetMachineEmitToMemoryBuffer(host_tm, mod, LLVMObjectFile, &msg, &buf);
    pthread_mutex_unlock(&lock);
    if (failed) {
        em_status st = em_error(EM_ERR_RUNTIME, "llvm: generating code: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return st;
    }
    *n = LLVMGetBufferSize(buf);
    *obj = malloc(*n ? *n : 1);
    if (*obj) memcpy(*obj, LLVMGetBufferStart(buf), *n);
    LLVMDisposeMemoryBuffer(buf);
    return *obj ? EM_OK : em_error(EM_ERR_NOMEM, "out of memory generating code");
}

em_status em_llvm_emit_object_file(LLVMModuleRef mod, const char *path) {
    char *msg = NULL;
    pthread_mutex_lock(&lock);
    LLVMBool failed = LLVMTargetMachineEmitToFile(pic_tm, mod, path, LLVMObjectFile, &msg);
    pthread_mutex_unlock(&lock);
    if (!failed) return EM_OK;
    em_status st = em_error(EM_ERR_RUNTIME, "llvm: writing %s: %s", path, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return st;
}

em_status em_llvm_add_object(const void *obj, size_t n, const char *name, LLVMOrcResourceTrackerRef *rt) {
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, n, name);
    pthread_mutex_lock(&lock);
    *rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(jit));
    LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(jit, *rt, buf); /* (takes buf) */
    pthread_mutex_unlock(&lock);
    if (err) {
        LLVMOrcReleaseResourceTracker(*rt);
        *rt = NULL;
        return llvm_error("adding object code", err);
    }
    return EM_OK;
}

void em_llvm_remove(LLVMOrcResourceTrackerRef rt) {
    if (!rt) return;
    pthread_mutex_lock(&lock);
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(rt);
    if (err) LLVMConsumeError(err);
    LLVMOrcReleaseResourceTracker(rt);
    pthread_mutex_unlock(&lock);
}
