"""@ember.compile and the switches around it.

    @ember.compile
    def f(x): ...

The first call runs f eagerly while recording every op into an SSA graph;
the graph is optimised (dead code, fusion) and compiled (LLVM on the CPU,
else the IR interpreter). Later calls whose arguments pass the guards (same
dtypes, shapes, strides, devices; same Python scalar values) run the
compiled code; others trace a new specialisation, up to `cache_limit`
(default 8, or EMBER_CACHE_LIMIT), after which unmatched calls run eagerly.

Switches: EMBER_COMPILE=0 or ember.compiler.disable() run every compiled
function eagerly. EMBER_DUMP=ir,passes,llvm (or all) with EMBER_DUMP_DIR
writes each graph before and after every pass, the generated LLVM IR and
the guards. EMBER_BACKEND=interp forces the interpreter.
"""

import contextlib
import functools

from . import _C


def compile(fn=None, *, cache_limit=None):
    """Compile `fn` (also usable as @ember.compile or @ember.compile(...))."""
    if fn is None:
        return functools.partial(compile, cache_limit=cache_limit)
    cf = _C.CompiledFunction(fn, -1 if cache_limit is None else int(cache_limit))
    functools.update_wrapper(cf, fn)
    return cf


def disable():
    """Run every compiled function eagerly (like EMBER_COMPILE=0)."""
    _C._set_compile_enabled(False)


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
