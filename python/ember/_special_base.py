"""What the special functions (special.py, _gamma.py, _bessel.py,
_polynomials.py) share: computing in float64, and attaching an exact
derivative.

The special functions are compositions of ember's elementwise ops (series,
asymptotic expansions, quadratures), written once for float64 and run in
float64 for narrower inputs, then rounded: these compositions would lose
digits in float32 where PyTorch's libm-based kernels do not. Their
gradients come from their known derivatives (the derivative of an
approximation is not an approximation of the derivative), through one
autograd.Function: forward and backward are ember ops, so a compiled
training step records both.
"""

import functools

from . import _C, _creation, _ops


def float_of(x):
    """x as a float tensor (integers and bools as float32, PyTorch's)."""
    return x if x.dtype.is_floating_point else x.to(_C._default_dtype())


def full(x, v):
    """A constant shaped as x (not x * 0 + v, which is NaN where x is infinite)."""
    return _creation.full_like(x, v)


def where(c, a, b):
    return _ops.where(c, a, b)


def widened(fn):
    """fn computed in float64 for narrower floats (and ints), cast back."""
    @functools.wraps(fn)
    def wrapper(input, *args, **kwargs):
        x = float_of(input)
        if x.dtype == _C.float64:
            return fn(x, *args, **kwargs)
        return fn(x.double(), *args, **kwargs).to(x.dtype)
    return wrapper


_SMOOTH = {}


def smooth(name, value, derivative):
    """An elementwise function of one tensor whose gradient is
    derivative(x, value(x)) * g: value and derivative take and give float64
    tensors; narrower inputs are widened and the results rounded."""
    def apply(input):
        x = float_of(input)
        if not (_C.is_grad_enabled() and x.requires_grad):
            return widened(value)(x)
        return _function(name, value, derivative).apply(x)
    apply.__name__ = apply.__qualname__ = name
    return apply


def _function(name, value, derivative):
    fn = _SMOOTH.get(name)
    if fn is not None:
        return fn
    from .autograd.function import Function

    class Smooth(Function):
        @staticmethod
        def forward(ctx, x):
            wide = x.double()
            y = value(wide)
            ctx.save_for_backward(wide, y)
            return y.to(x.dtype)

        @staticmethod
        def backward(ctx, g):
            wide, y = ctx.saved_tensors
            return (g.double() * derivative(wide, y)).to(g.dtype)

    Smooth.__name__ = Smooth.__qualname__ = name[0].upper() + name[1:]
    Smooth._backward_name = Smooth.__name__ + "Backward"
    _SMOOTH[name] = Smooth
    return Smooth
