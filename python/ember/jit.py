"""ember.jit, as torch.jit for programs that script or trace their models.

ember has no TorchScript: `ember.jit.script` and `ember.jit.trace` return
what they are given, which then runs eagerly. TorchScript runs a subset of
Python with Python's meaning, so a scripted function computes what the
plain one does; a traced one can only compute less (a trace freezes its
control flow). The decorators (ignore, unused, export, interface) pass
their argument through; is_scripting() and is_tracing() are False, as in
eager PyTorch; fork runs its function at once and returns a completed
Future. The compiler is ember.compile. TorchScript archives
(jit.save, jit.load) raise NotImplementedError: save the state_dict, or
compile ahead of time with ember.aot.
"""

import contextlib
import typing

from .futures import Future, _fork as fork, _wait as wait

__all__ = ["script", "trace", "trace_module", "script_method", "script_if_tracing", "ignore", "unused", "export",
           "interface", "is_scripting", "is_tracing", "annotate", "Final", "Attribute", "freeze",
           "optimize_for_inference", "fork", "wait", "Future", "save", "load", "ScriptModule", "ScriptFunction",
           "Error", "TracerWarning", "ScriptWarning", "isinstance", "optimized_execution", "fuser",
           "enable_onednn_fusion", "onednn_fusion_enabled", "set_fusion_strategy", "strict_fusion"]

_builtin_isinstance = isinstance
Final = typing.Final


class Error(RuntimeError):
    """torch.jit.Error: what a scripted raise becomes."""


class TracerWarning(Warning):
    pass


class ScriptWarning(Warning):
    pass


def _ember_module():
    from .nn.modules.module import Module
    return Module


class ScriptModule(_ember_module()):
    """The old-style base class for modules whose @script_method methods
    TorchScript compiled: here an nn.Module whose methods run eagerly."""


class ScriptFunction:
    """The type of a scripted function; ember's scripted functions are the
    Python functions themselves, so nothing is an instance of it."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("ember.jit.ScriptFunction: ember has no TorchScript; jit.script returns the "
                                  "function itself")


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """obj itself, run eagerly (see the module's note)."""
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None, example_kwarg_inputs=None):
    """func itself, run eagerly: what a trace computes on the inputs it was
    made for, and on others too."""
    return func


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
                 strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None):
    return mod


def script_method(fn):
    return fn


def script_if_tracing(fn):
    return fn


def ignore(drop=False, **kwargs):
    """@ignore or @ignore(drop=True): the function as it is."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def is_scripting():
    return False


def is_tracing():
    return False


def annotate(the_type, the_value):
    return the_value


def Attribute(value, type):  # noqa: N802 (torch's name)
    """A pass-through outside TorchScript, as PyTorch's."""
    return value


def _check_eval(mod, what):
    if getattr(mod, "training", False):
        raise RuntimeError(f"{what} is currently only implemented for modules in eval mode. Please call .eval() "
                           f"on your module before {what.lower()}.")


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """mod itself (in eval mode, as PyTorch requires): its weights are
    already what an eager call reads."""
    _check_eval(mod, "Freezing")
    return mod


def optimize_for_inference(mod, other_methods=None):
    """mod in eval mode. For speed, compile it: ember.compile(mod)."""
    return mod.eval() if hasattr(mod, "eval") else mod


def save(m, f, _extra_files=None):
    raise NotImplementedError("ember.jit.save: TorchScript archives are not supported (ember has no TorchScript; "
                              "scripted code runs eagerly). Save the weights with ember.save(m.state_dict(), f), "
                              "or compile ahead of time with ember.aot")


def load(f, map_location=None, _extra_files=None):
    raise NotImplementedError("ember.jit.load: TorchScript archives are not supported (ember has no TorchScript). "
                              "Load a state_dict with ember.load, or a model compiled ahead of time with ember.aot")


def isinstance(obj, target_type):  # noqa: A001 (torch's name)
    """isinstance that also checks typing's containers: List[int],
    Dict[str, Tensor], Tuple[int, float], Optional[Tensor]."""
    origin, args = typing.get_origin(target_type), typing.get_args(target_type)
    if origin is None:
        return _builtin_isinstance(obj, target_type)
    if origin is typing.Union:
        return any(isinstance(obj, a) for a in args)
    if origin in (list, tuple, dict) and not _builtin_isinstance(obj, origin):
        return False
    if origin is list:
        return not args or all(isinstance(x, args[0]) for x in obj)
    if origin is dict:
        return not args or all(isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(isinstance(x, args[0]) for x in obj)
        return not args or (len(obj) == len(args) and all(isinstance(x, a) for x, a in zip(obj, args)))
    return _builtin_isinstance(obj, origin)


@contextlib.contextmanager
def optimized_execution(should_optimize):
    yield


@contextlib.contextmanager
def fuser(name):
    yield


@contextlib.contextmanager
def strict_fusion():
    yield


_FUSION = {"onednn": False, "strategy": [("STATIC", 2), ("DYNAMIC", 10)]}


def enable_onednn_fusion(enabled):
    _FUSION["onednn"] = bool(enabled)


def onednn_fusion_enabled():
    return _FUSION["onednn"]


def set_fusion_strategy(strategy):
    """Kept for get-and-restore code; the previous strategy."""
    old, _FUSION["strategy"] = _FUSION["strategy"], list(strategy)
    return old
