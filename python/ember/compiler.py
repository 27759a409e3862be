"""@ember.compile and the switches around it.

    @ember.compile
    def f(x): ...

The first call runs f eagerly while recording every op into an SSA graph;
the graph is optimised (algebraic rewrites, common subexpressions,
constants, dead code, fusion: ember.compiler.passes()) and compiled (LLVM
on the CPU, else the IR interpreter). Later calls whose arguments pass the guards (same
dtypes, shapes, strides, devices; same Python scalar values) run the
compiled code; others trace a new specialisation, up to `cache_limit`
(default 8, or EMBER_CACHE_LIMIT), after which unmatched calls run eagerly.

Switches: EMBER_COMPILE=0 or ember.compiler.disable() run every compiled
function eagerly. EMBER_DUMP=ir,passes,llvm,dot (or all) with EMBER_DUMP_DIR
writes each graph before and after every pass, the generated LLVM IR, the
guards and a Graphviz picture of the final graph. EMBER_BACKEND=interp
forces the interpreter.

explain(fn, *args) makes one call and says what happened to it: which
specialisation ran or was made (its guards, graphs, passes, kernels and
compile time by stage) or why the call ran eagerly, and the function's
counters (hits, misses, recompiles, eager calls by reason).

Profiling: EMBER_PROFILE=1, or `with ember.compiler.profiling():`, times
every node of every compiled run. explain() and profile_report(fn) then list
each specialisation's nodes, slowest first: time per run, share of the run,
the op and its result type, whether it ran a compiled kernel, its region op
by op or an eager kernel, and the source line it came from.
"""

import contextlib
import functools

from . import _C
from .nn.modules.module import Module


def compile(fn=None, *, cache_limit=None, passes=None, dynamic=None, fullgraph=False):
    """Compile `fn` (also usable as @ember.compile or @ember.compile(...)).
    Given an nn.Module, returns a CompiledModule whose calls run the
    module's forward compiled. `passes` (a list of pass names, see
    ember.compiler.passes()) replaces the default pipeline, for debugging;
    EMBER_PASSES=a,b does the same for every compiled function.

    `dynamic`, as in torch.compile. None (the default): the first call's
    sizes are compiled in; once a call differs only in sizes (a data
    loader's short last batch, a new sequence length), later compiles read
    sizes at run time, so every further size of the same graph runs that
    one machine code (a new size costs a trace and a memory plan, not a
    compile, and does not count against the cache limit). True: read sizes
    at run time from the first call. False: every size is compiled in.
    explain() says which dims were seen to vary and which specialisations
    share code.

    `fullgraph=True`, as in torch.compile: a call that cannot run as one
    compiled graph (a trace that fails, a side effect, a call of a
    function ember.compiler.disable keeps out, the cache limit) raises
    RuntimeError saying why and where, instead of running eagerly. (A
    traced call has run the function once already, as every trace does.)"""
    if fn is None:
        return functools.partial(compile, cache_limit=cache_limit, passes=passes, dynamic=dynamic,
                                 fullgraph=fullgraph)
    if isinstance(fn, Module):
        return CompiledModule(fn, cache_limit, passes, dynamic, fullgraph)
    cf = _C.CompiledFunction(fn, -1 if cache_limit is None else int(cache_limit), passes,
                             None if dynamic is None else bool(dynamic), bool(fullgraph))
    functools.update_wrapper(cf, fn)
    return cf


def mark_dynamic(t, dim):
    """torch._dynamo.mark_dynamic's counterpart: a compiled function called
    with t compiles for sizes read at run time from its first such call
    (unless it was made with dynamic=False), so t's size along `dim` may
    change without a compile. Marks the tensor object itself, not views
    of it or results computed from it."""
    _C._mark_dynamic(t, dim)


def passes():
    """The default pipeline: the passes every graph goes through, in order."""
    return list(_C._pass_pipeline())


def set_profiling(on):
    """Time every node of compiled runs from now on (on=True), or stop."""
    _C._set_profiling(bool(on))


def is_profiling():
    return _C._profiling()


@contextlib.contextmanager
def profiling():
    """Within the block, compiled runs time each of their nodes (the totals
    stay with each specialisation: see profile_report and explain)."""
    was = is_profiling()
    set_profiling(True)
    try:
        yield
    finally:
        set_profiling(was)


def profile_report(fn):
    """The per-node times of fn's profiled compiled runs, one block per
    specialisation that has some ("" when none has)."""
    blocks = []
    for i, spec in enumerate(fn._specializations()):
        if spec["profile"]:
            blocks.append(f"specialisation {i} ({spec['backend']} backend): " + spec["profile"])
    return "\n".join(blocks)


def clear_cache():
    """Empties the on-disk cache of compiled code (EMBER_CACHE_DIR, else
    ~/.cache/ember). Functions compiled in this process keep their code."""
    _C._clear_cache()


def disable(fn=None, recursive=True):
    """With a function, torch.compiler.disable: fn is never traced into. It
    runs eagerly, and a compiled function that calls it runs eagerly too
    for that call's guards (one warning naming the line; with
    fullgraph=True, an error): ember does not split a graph around it.
    Without one, the global switch: every compiled function runs eagerly
    from now on (like EMBER_COMPILE=0; enable() undoes it)."""
    if fn is None:
        _C._set_compile_enabled(False)
        return None
    if not recursive:
        raise NotImplementedError("ember.compiler.disable(fn, recursive=False): ember keeps the whole of a "
                                  "disabled function out of compiled graphs")
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))

    @functools.wraps(fn)
    def kept_out(*args, **kwargs):
        if _C._is_tracing():
            import sys
            caller = sys._getframe(1)
            _C._trace_fail(f"it calls {name}, which ember.compiler.disable keeps out of compiled graphs "
                           f"({caller.f_code.co_filename}:{caller.f_lineno})")
        return fn(*args, **kwargs)
    kept_out._ember_disabled = True
    return kept_out


def enable():
    """Undo disable()."""
    _C._set_compile_enabled(True)


def is_enabled():
    return _C._compile_enabled()


@contextlib.contextmanager
def disabled():
    """Within the block, compiled functions run eagerly."""
    was = is_enabled()
    disable()
    try:
        yield
    finally:
        if was:
            enable()


def has_llvm():
    """True when ember was built with the LLVM backend."""
    return _C._has_llvm()


class Explanation:
    """What explain() found: `text` (what it printed), `result` (the call's
    return value), `event` ("compiled", "traced" or "eager"),
    `specialization` (a dict, or None), `reason` (why it ran eagerly, or
    "") and `stats` (the function's counters)."""

    def __init__(self, text, result, event, specialization, reason, stats):
        self.text, self.result, self.event = text, result, event
        self.specialization, self.reason, self.stats = specialization, reason, stats

    def __str__(self):
        return self.text

    __repr__ = __str__


def _indented(text, by="    "):
    return "\n".join(by + line for line in text.rstrip("\n").splitlines()) or by + "(none)"


def _dynamic_summary(stats, specs):
    """explain()'s line on dynamic shapes: the mode, the dims seen to vary,
    and which specialisations share machine code."""
    mode = {None: "None", True: "True", False: "False"}[stats["dynamic"]]
    if not stats["sizes_vary"]:
        return (f"  dynamic shapes (dynamic={mode}): off; every size is compiled in" +
                ("" if stats["dynamic"] is False else
                 " until a call differs from a specialisation only in sizes"))
    groups = {}
    for i, s in enumerate(specs):
        if s["dynamic_sizes"]:
            groups.setdefault(s["shares_code_with"] if s["shares_code_with"] >= 0 else i, []).append(i)
    shared = "; ".join(f"specialisation {k} runs for {len(v)} size set{'s' if len(v) > 1 else ''}"
                       for k, v in groups.items())
    return (f"  dynamic shapes (dynamic={mode}): sizes read at run time since {stats['varying']} varied; "
            f"{shared or 'no specialisation compiled that way yet'} (the guards compare exact shapes: each "
            "new size is traced again, so a branch on a size or a relation between sizes (two dims equal, "
            "a size 1) is checked at every size; sizes 0 and 1 coalesce differently and get code of "
            "their own)")


def explain(fn, *args, print_report=True, **kwargs):
    """Calls fn(*args, **kwargs) once (fn compiled, a module
    ember.compile returned, or a plain function to compile) and reports what
    that call did; returns an Explanation."""
    if isinstance(fn, CompiledModule):
        call, cf = fn, fn._compiled  # (the module's call supplies its training modes)
    else:
        call = cf = fn if isinstance(fn, _C.CompiledFunction) else compile(fn)
    result = call(*args, **kwargs)
    last = cf._last_call() or {"event": "eager", "specialization": None, "reason": ""}
    specs = cf._specializations()
    stats = cf._stats()
    name = getattr(cf, "__name__", "function")
    idx = last["specialization"]
    spec = specs[idx] if idx is not None and idx < len(specs) else None
    lines = [f"ember.compiler.explain({name}):"]
    event = last["event"]
    if event == "compiled":
        lines.append(f"  this call ran compiled specialisation {idx} ({spec['backend']} backend)")
    elif event == "traced":
        lines.append(f"  this call was traced (it ran eagerly while recording) into specialisation "
                     f"{idx}")
        if spec and spec["backend"] == "eager":
            lines.append(f"  it could not be compiled, so calls it accepts run eagerly: "
                         f"{spec['reason']}")
        elif spec and spec["backend"] == "pending":
            lines.append("  it compiles when a call matches it again: this call left a .grad "
                         "where it found None, so the next call usually needs another "
                         "specialisation (a training step's first call)")
    else:
        lines.append(f"  this call ran eagerly: {last['reason']}")
    if spec is not None:
        lines.append("  guards:")
        lines.append(_indented(spec["guards"]))
        if spec["backend"] == "pending":
            lines.append(_indented(spec["state"], "  "))
            lines.append("  graph as traced:")
            lines.append(_indented(spec["traced_ir"]))
        if spec["backend"] not in ("eager", "pending"):
            lines.append(_indented(spec["state"], "  "))
            lines.append(f"  passes: {spec['passes']}")
            if spec["pass_report"]:
                lines.append(_indented(spec["pass_report"]))
            lines.append("  graph as traced:")
            lines.append(_indented(spec["traced_ir"]))
            backward = spec["backward"]
            lines.append("  forward graph after the passes:" if backward else "  graph after the passes:")
            lines.append(_indented(cf._graph(idx)))
            lines.append(f"  kernels ({spec['backend']} backend):")
            lines.append(_indented(spec["kernels"]))
            if backward:
                lines.append("  the results' autograd node, CompiledFunctionBackward, runs the "
                             "backward graph; split from the traced graph:")
                lines.append(_indented(spec["partition"]))
                lines.append("  backward graph after the passes:")
                lines.append(_indented(backward))
                lines.append("  backward kernels:")
                lines.append(_indented(spec["backward_kernels"]))
                if spec["backward_profile"]:
                    head, _, rows = spec["backward_profile"].partition("\n")
                    lines.append(f"  backward time per node: {head}")
                    lines.append(_indented(rows))
            if spec["dynamic_sizes"]:
                shared = spec["shares_code_with"]
                lines.append("  dynamic shapes: compiled for sizes read at run time; " +
                             (f"runs the machine code of specialisation {shared} (no compile: a trace and "
                              f"a memory plan for these sizes)" if shared >= 0 else
                              "its machine code is its own (the template later sizes share)"))
            if spec["note"]:
                lines.append(f"  note: {spec['note']}")
            lines.append(f"  compile time: trace {spec['trace_ms']:.2f} ms (an eager run that "
                         f"records), passes {spec['passes_ms']:.2f} ms, backend "
                         f"{spec['backend_ms']:.2f} ms")
            if spec["dump_path"]:
                lines.append(f"  dumped to {spec['dump_path']}")
            if spec["profile"]:
                head, _, rows = spec["profile"].partition("\n")
                lines.append(f"  time per node: {head}")
                lines.append(_indented(rows))
    lines.append(f"  counters: {stats['hits']} hits, {stats['misses']} misses, "
                 f"{stats['recompiles']} recompiles, {stats['eager_calls']} eager calls, "
                 f"{stats['specializations']} specialisations cached, {stats['code_objects']} of at most "
                 f"{stats['cache_limit']} with machine code of their own")
    lines.append(_dynamic_summary(stats, specs))
    for reason, count in stats["fallbacks"].items():
        lines.append(f"  eager x{count}: {reason}")
    text = "\n".join(lines)
    if print_report:
        print(text)
    return Explanation(text, result, event, spec, last["reason"] if event == "eager" else
                       (spec["reason"] if spec else ""), stats)


# ---- what ember.compile(model) returns ----

class CompiledModule(Module):
    """Calls run model.forward compiled. The wrapper holds the model itself
    (parameters, buffers and state dict are the model's, under the prefix
    `_orig_mod.` as in PyTorch), and the training mode of every submodule
    is one of the guards, so train() and eval() each get their own
    specialisation."""

    def __init__(self, module, cache_limit=None, passes=None, dynamic=None, fullgraph=False):
        super().__init__()
        self._orig_mod = module
        forward = module.forward

        def compiled_forward(training_modes, *args, **kwargs):
            return forward(*args, **kwargs)
        compiled_forward.__name__ = compiled_forward.__qualname__ = \
            f"{type(module).__name__}.forward"
        object.__setattr__(self, "_compiled", compile(compiled_forward, cache_limit=cache_limit, passes=passes,
                                                      dynamic=dynamic, fullgraph=fullgraph))

    def forward(self, *args, **kwargs):
        # the modes as an argument: a string is guarded by its value
        modes = "".join("t" if m.training else "e" for m in self._orig_mod.modules())
        return self._compiled(modes, *args, **kwargs)

    def train(self, mode=True):
        self._orig_mod.train(mode)
        object.__setattr__(self, "training", mode)
        return self

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)

    def _specializations(self):
        return self._compiled._specializations()

    def _stats(self):
        return self._compiled._stats()
