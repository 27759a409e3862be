"""ember.overrides, as torch.overrides: the __torch_function__ protocol's
helpers, for libraries that write their own tensor-like types and the
functions that accept them.

has_torch_function(args) says whether any argument's type overrides
__torch_function__; handle_torch_function calls those overrides, most
derived type first, until one returns something other than
NotImplemented, as PyTorch does. ember's own functions do not consult
__torch_function__ (a Tensor subclass's override is not called by
ember.add); code that calls these helpers itself gets PyTorch's protocol.
"""

from ._tensor import Tensor

__all__ = ["has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
           "handle_torch_function", "is_tensor_like"]


def _overrides(obj):
    """Whether obj's type brings its own __torch_function__ (Tensor's own,
    and the disabled one, do not count)."""
    method = getattr(type(obj), "__torch_function__", None)
    if method is None:
        return False
    base = getattr(Tensor, "__torch_function__", None)
    return getattr(method, "__func__", method) is not getattr(base, "__func__", base)


def has_torch_function(relevant_args):
    return any(_overrides(a) for a in relevant_args)


def has_torch_function_unary(obj):
    return _overrides(obj)


def has_torch_function_variadic(*args):
    return any(_overrides(a) for a in args)


def _overloaded_args(relevant_args):
    """The arguments whose types override, each type once, subclasses
    before their bases, otherwise left to right."""
    out, types = [], []
    for arg in relevant_args:
        t = type(arg)
        if not _overrides(arg) or t in types:
            continue
        index = len(out)
        for i, earlier in enumerate(out):
            if issubclass(t, type(earlier)):
                index = i
                break
        out.insert(index, arg)
        types.append(t)
    return out


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """public_api(*args, **kwargs) as the overriding types implement it."""
    overloaded = _overloaded_args(relevant_args)
    types = tuple(type(a) for a in overloaded)
    for arg in overloaded:
        result = type(arg).__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    name = getattr(public_api, "__module__", "") + "." + getattr(public_api, "__name__", repr(public_api))
    raise TypeError(f"no implementation found for '{name}' on types that implement __torch_function__: "
                    f"{[type(a) for a in overloaded]}")


def is_tensor_like(inp):
    """A Tensor, or an object whose type implements __torch_function__."""
    return type(inp) is Tensor or isinstance(inp, Tensor) or hasattr(type(inp), "__torch_function__")
