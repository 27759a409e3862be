"""PyTorch's elementwise math and small tensor utilities that are
compositions of ember's ops (issue 40, item 3): the hyperbolic functions
and their inverses, log10, logaddexp(2), hypot, copysign, signbit,
heaviside, fmax/fmin, frac, float_power, ldexp, nan_to_num, the arc*
spellings, and dimension helpers (atleast_Nd, the stack and split
variants, diff, rot90, kron, meshgrid, tril/triu_indices, cartesian_prod,
combinations, block_diag, vander, tensordot, trapezoid, diag_embed,
diagflat, std_mean, var_mean, aminmax). Each is written in the
numerically stable form (expm1 and log1p where the naive one cancels), so
it traces and differentiates as the ops it is made of."""

import builtins
import itertools
import math
import numbers

import numpy as _np

from . import _C, _creation, _ops
from ._creation import tensor
from ._ops import _export, _method
from ._tensor import Tensor

__all__ = []  # (the functions register themselves with _ops)

_LN2 = math.log(2.0)


def _C_promote(a, b):
    from . import promote_types
    return promote_types(a, b)


def _float(x):
    return x if x.dtype.is_floating_point else x.to(_C._default_dtype())


def _where(c, a, b):
    return _ops.where(c, a, b)


def _full(x, v):
    """A constant shaped as x (not x * 0 + v, which is NaN where x is infinite)."""
    return _creation.full_like(x, v)


# ---------------------------------------------------------------- hyperbolic

@_method
def sinh(input):
    """(e^x - e^-x) / 2: through expm1 near 0 (no cancellation), through
    e^(|x| - ln 2) beyond 1 (no overflow before sinh itself overflows)."""
    x = _float(input)
    near = x.abs() < 1.0
    xs = _where(near, x, _full(x, 0.0))  # (each branch on inputs it is meant for: where's other branch
    small = (xs.expm1() - (-xs).expm1()) * 0.5  # gets a zero gradient, and 0 * inf would be NaN)
    y = (x.abs() - _LN2).exp()
    return _where(near, small, x.sign() * (y - 0.25 / y))


@_method
def cosh(input):
    """(e^x + e^-x) / 2 as e^(|x| - ln 2) + 1 / (4 e^(|x| - ln 2))."""
    y = (_float(input).abs() - _LN2).exp()
    return y + 0.25 / y


@_method
def asinh(input):
    """sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(2|x|) where x^2
    would overflow."""
    x = _float(input)
    neg = x < 0
    a = _where(neg, -x, x)  # (odd: computed at |x|, the sign put back by where, so the slope at 0 is 1)
    big = a > 1e18 if x.dtype == _C.float64 else a > 1e9
    safe = _where(big, _full(a, 0.0), a)
    small = (safe + safe * safe / (1.0 + (1.0 + safe * safe).sqrt())).log1p()
    r = _where(big, _where(big, a, _full(a, 1.0)).log() + _LN2, small)
    return _where(neg, -r, r)


@_method
def acosh(input):
    """log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1); log(2x)
    where the square would overflow; NaN below 1."""
    x = _float(input)
    big = x > (1e18 if x.dtype == _C.float64 else 1e9)
    t = _where(big, _full(x, 0.0), x - 1.0)
    return _where(big, _where(big, x, _full(x, 1.0)).log() + _LN2, (t + (t * (t + 2.0)).sqrt()).log1p())


@_method
def atanh(input):
    """sign(x) log1p(2|x| / (1 - |x|)) / 2 (the argument of log1p never
    near -1, where it would cancel)."""
    x = _float(input)
    neg = x < 0
    a = _where(neg, -x, x)  # (odd, as asinh)
    r = (2.0 * a / (1.0 - a)).log1p() * 0.5
    return _where(neg, -r, r)


for _name, _fn in (("arcsinh", asinh), ("arccosh", acosh), ("arctanh", atanh)):
    _export(_fn, _name, method=True)


def _alias_of_table_op(name, target):
    fn = getattr(_ops, target)

    def alias(*args, **kwargs):
        return fn(*args, **kwargs)
    alias.__name__, alias.__doc__ = name, f"An alias of {target}."
    _export(alias, name, method=True)


for _name, _target in (("arctan", "atan"), ("arcsin", "asin"), ("arccos", "acos"), ("arctan2", "atan2")):
    _alias_of_table_op(_name, _target)


def _inplace(name, fn):
    """Tensor.<name>: x.<name>(...) is x.copy_(fn(x, ...)), bumping x's
    version as PyTorch's in-place methods do."""
    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    method.__name__ = name
    _ops._METHODS[name] = (method, True)


for _name, _fn in (("sinh_", sinh), ("cosh_", cosh), ("asinh_", asinh), ("acosh_", acosh), ("atanh_", atanh),
                   ("arcsinh_", asinh), ("arccosh_", acosh), ("arctanh_", atanh)):
    _inplace(_name, _fn)


# ---------------------------------------------------------------- logs, sums of exponentials

@_method
def log10(input):
    return _float(input).log() * (1.0 / math.log(10.0))


@_method
def logaddexp(input, other):
    """log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities give themselves."""
    a, b = _float(input), _float(other)
    m = _ops.maximum(a, b)
    same_inf = (a == b) & a.isinf()  # (inf - inf is NaN; finite ties take the general form, whose slopes are 1/2)
    return _where(same_inf, a, m + (-(a - b).abs()).exp().log1p())


@_method
def logaddexp2(input, other):
    """log2(2^a + 2^b) = max + log1p(2^-|a - b|) / ln 2."""
    a, b = _float(input), _float(other)
    m = _ops.maximum(a, b)
    same_inf = (a == b) & a.isinf()
    return _where(same_inf, a, m + (-(a - b).abs()).exp2().log1p() * (1.0 / _LN2))


@_method
def hypot(input, other):
    """sqrt(a^2 + b^2), scaled by the larger magnitude (no overflow)."""
    a, b = input.abs(), other.abs()
    m, n = _ops.maximum(a, b), _ops.minimum(a, b)
    r = n / _where(m == 0, m + 1.0, m)
    h = _where(m == 0, m, m * (1.0 + r * r).sqrt())
    return _where(a.isinf() | b.isinf(), _creation.full_like(h, math.inf), h)  # (inf even beside NaN)


# ---------------------------------------------------------------- signs and parts

@_method
def signbit(input):
    """True where the sign bit is set, -0.0 included."""
    if not input.dtype.is_floating_point:
        return input < 0
    return (input < 0) | ((input == 0) & ((1.0 / input) < 0))


@_method
def copysign(input, other):
    """|input| with the sign of other (-0.0's too)."""
    x = _float(input)
    neg = signbit(other) if isinstance(other, Tensor) else builtins.bool(math.copysign(1.0, other) < 0)
    if isinstance(neg, builtins.bool):
        return -x.abs() if neg else x.abs()
    return _where(neg, -x.abs(), x.abs())


@_method
def heaviside(input, values):
    """0 below zero, 1 above, `values` at zero."""
    one = (input > 0).to(input.dtype)
    return _where(input == 0, values.to(input.dtype), one)


@_method
def fmax(input, other):
    """The larger, ignoring a NaN where the other is a number."""
    return _where(input.isnan(), other, _where(other.isnan(), input, _ops.maximum(input, other)))


@_method
def fmin(input, other):
    """The smaller, ignoring a NaN where the other is a number."""
    return _where(input.isnan(), other, _where(other.isnan(), input, _ops.minimum(input, other)))


@_method
def frac(input):
    return input - input.trunc()


@_method
def float_power(input, exponent):
    """input ** exponent in float64 (either may be a number)."""
    e = exponent.double() if isinstance(exponent, Tensor) else float(exponent)
    if not isinstance(input, Tensor):
        if not isinstance(exponent, Tensor):
            raise TypeError("float_power(): expected a Tensor as input or exponent, got two numbers")
        return float(input) ** e
    return input.double() ** e


@_method
def ldexp(input, other):
    """input * 2 ** other."""
    return _float(input) * (other.to(_float(input).dtype).exp2() if isinstance(other, Tensor)
                            else 2.0 ** other)


@_method
def sgn(input):
    """sign, for real tensors."""
    return input.sign()


@_method
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN to `nan`, infinities to `posinf`/`neginf` (default: the dtype's
    largest and lowest finite values)."""
    if not input.dtype.is_floating_point:
        return input.clone()
    from ._extras import finfo
    f = finfo(input.dtype)
    hi = f.max if posinf is None else posinf
    lo = -f.max if neginf is None else neginf
    def const(v):
        return _creation.full_like(input, v)
    x = _where(input.isnan(), const(nan), input)
    x = _where(input == math.inf, const(hi), x)
    return _where(input == -math.inf, const(lo), x)


@_method
def isposinf(input):
    return input == math.inf if input.dtype.is_floating_point else input != input


@_method
def isneginf(input):
    return input == -math.inf if input.dtype.is_floating_point else input != input


@_method
def isreal(input):
    """True everywhere: ember's tensors are real."""
    return _creation.ones_like(input, dtype=_C.bool)


@_method
def is_complex(input):
    return False


@_method
def is_signed(input):
    return input.dtype not in (_C.uint8, _C.bool)


@_method
def is_nonzero(input):
    if input.numel() != 1:
        raise RuntimeError(f"Boolean value of Tensor with {'no values' if input.numel() == 0 else 'more than one value'}"
                           f" is ambiguous")
    return builtins.bool(input.reshape(()).item() != 0)


@_method
def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


for _name, _fn in (("copysign_", copysign), ("heaviside_", heaviside), ("frac_", frac), ("ldexp_", ldexp),
                     ("float_power_", float_power), ("hypot_", hypot), ("log10_", log10), ("sgn_", sgn),
                   ("nan_to_num_", nan_to_num)):
    _inplace(_name, _fn)


# ---------------------------------------------------------------- shapes

def _tensors(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def _atleast(n, tensors):
    ts = _tensors(tensors)
    out = []
    for t in ts:
        if t.ndim == 0:
            t = t.reshape((1,) * n)
        elif n >= 2 and t.ndim == 1:
            t = t.unsqueeze(0)
        if n == 3 and t.ndim == 2:
            t = t.unsqueeze(-1)
        out.append(t)
    return out[0] if len(ts) == 1 and not (len(tensors) == 1 and isinstance(tensors[0], (list, tuple))) \
        else tuple(out)


@_export
def atleast_1d(*tensors):
    return _atleast(1, tensors)


@_export
def atleast_2d(*tensors):
    return _atleast(2, tensors)


@_export
def atleast_3d(*tensors):
    return _atleast(3, tensors)


@_export
def column_stack(tensors):
    return _ops.cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1)


@_export
def row_stack(tensors):
    return _ops.vstack(tensors)


@_export
def dstack(tensors):
    return _ops.cat(list(atleast_3d(list(tensors))), 2)


def _split_along(input, sections, dim, name, min_dim):
    if input.ndim < min_dim:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dim} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(sections, numbers.Integral) and input.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                           f"{input.shape[dim]} is not divisible by the split_size {sections}!")
    return _ops.tensor_split(input, sections, dim)


@_method
def hsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit", 1)


@_method
def vsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, 0, "vsplit", 2)


@_method
def dsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, 2, "dsplit", 3)


@_method
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim, after prepend and append
    (n=0: the input itself, as PyTorch)."""
    if n == 0:
        return input
    parts = [t for t in (prepend, input, append) if t is not None]
    x = _ops.cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[dim]
        if m == 0:
            break
        x = x.narrow(dim, 1, m - 1) - x.narrow(dim, 0, m - 1) if x.dtype != _C.bool else \
            x.narrow(dim, 1, m - 1) ^ x.narrow(dim, 0, m - 1)
    return x


@_method
def rot90(input, k=1, dims=(0, 1)):
    """Rotates by 90 degrees k times in the plane of dims, from the first
    towards the second."""
    d0, d1 = (d % input.ndim for d in dims)
    if len(dims) != 2 or d0 == d1:
        raise RuntimeError(f"rot90: expected two different dims, got {tuple(dims)}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0).flip(d1)
    if k == 3:
        return input.transpose(d0, d1).flip(d1)
    return input.clone()


@_method
def kron(input, other):
    """The Kronecker product: blocks input[i] * other."""
    n = builtins.max(input.ndim, other.ndim)
    a = input.reshape((1,) * (n - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (n - other.ndim) + tuple(other.shape))
    shape_a = [s for d in a.shape for s in (d, 1)]
    shape_b = [s for d in b.shape for s in (1, d)]
    out = a.reshape(shape_a) * b.reshape(shape_b)
    return out.reshape([x * y for x, y in zip(a.shape, b.shape)])


@_export
def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-d tensors ('ij': matrix, 'xy': Cartesian)."""
    ts = _tensors(tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    grids = [t.reshape([-1 if i == j else 1 for j in range(len(ts))]).expand(shape) for i, t in enumerate(ts)]
    if swap:  # (PyTorch's 'xy': the first two inputs swapped, and their grids swapped back)
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def _triangle(row, col, offset, lower, dtype):
    r, c = (_np.tril_indices if lower else _np.triu_indices)(row, offset, col)
    return tensor(_np.stack([r, c]).astype(_np.int64), dtype=dtype or _C.int64)


@_export
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) coordinates of a row x col matrix's lower triangle."""
    return _triangle(row, col, offset, True, dtype)


@_export
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) coordinates of a row x col matrix's upper triangle."""
    return _triangle(row, col, offset, False, dtype)


@_export
def cartesian_prod(*tensors):
    """Every combination of one element of each 1-d tensor, in order."""
    ts = _tensors(tensors)
    if len(ts) == 1:
        return ts[0]
    return _ops.stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)


@_export
def combinations(input, r=2, with_replacement=False):
    """The r-combinations of a 1-d tensor's elements, as rows."""
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = list(pick(range(input.shape[0]), r))
    if not idx:  # (an empty selection of input, keeping its history as PyTorch's does)
        return input[_creation.zeros(0, r, dtype=_C.int64)] if r > 0 else input[:0]
    return input[tensor(idx, dtype=_C.int64)]


@_export
def block_diag(*tensors):
    """The tensors (0-, 1- or 2-d) on the diagonal of one matrix."""
    ts = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    if not ts:
        return _creation.zeros(1, 0)
    rows, cols = builtins.sum(t.shape[0] for t in ts), builtins.sum(t.shape[1] for t in ts)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = _C_promote(dtype, t.dtype)
    parts, c = [], 0
    for t in ts:
        parts.append(_ops.cat([_creation.zeros(t.shape[0], c, dtype=dtype, device=t.device), t.to(dtype),
                               _creation.zeros(t.shape[0], cols - c - t.shape[1], dtype=dtype, device=t.device)], 1))
        c += t.shape[1]
    return _ops.cat(parts, 0) if rows else _creation.zeros(0, cols, dtype=dtype)


@_export
def vander(x, N=None, increasing=False):
    """Columns x^(N-1) .. x^0 (or increasing)."""
    n = x.shape[0] if N is None else N
    powers = [x ** i if i else _creation.ones_like(x) for i in range(n)]
    cols = powers if increasing else powers[::-1]
    return _ops.stack(cols, 1) if cols else x.new_zeros((x.shape[0], 0))


@_method
def tensordot(a, b, dims=2):
    """Contracts the last `dims` dims of a with the first of b, or the
    given lists of dims."""
    if isinstance(dims, numbers.Integral):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da, db = [d % a.ndim for d in da], [d % b.ndim for d in db]
    fa, fb = [d for d in range(a.ndim) if d not in da], [d for d in range(b.ndim) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    am = a.permute(*(fa + da)).reshape(-1, k)
    bm = b.permute(*(db + fb)).reshape(k, -1)
    return (am @ bm).reshape([a.shape[d] for d in fa] + [b.shape[d] for d in fb])


@_export
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along dim, with sample points x or spacing dx."""
    n = y.shape[dim]
    if n == 0:
        return y.sum(dim) * 0.0
    avg = (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)) * 0.5
    if x is not None:
        return (avg * diff(x, dim=dim if x.ndim == y.ndim else -1)).sum(dim)
    return avg.sum(dim) * (1.0 if dx is None else dx)


@_export
def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


@_method
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """The last dim's entries on the offset diagonals of new (dim1, dim2)
    planes."""
    n = input.shape[-1] + builtins.abs(offset)
    out = input.new_zeros(tuple(input.shape[:-1]) + (n, n))
    out.diagonal(offset, -2, -1).copy_(input)
    nd = out.ndim
    return out.movedim((nd - 2, nd - 1), (dim1 % nd, dim2 % nd))


@_method
def diagflat(input, offset=0):
    return _ops.diag(input.reshape(-1), offset)


@_export
def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """(std, mean) over dim (all dims when None; std_mean(x, False) is the
    unbiased flag, as PyTorch's overload)."""
    return _spread_mean(input, dim, unbiased, keepdim, correction, "std")


@_export
def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return _spread_mean(input, dim, unbiased, keepdim, correction, "var")


def _spread_mean(input, dim, unbiased, keepdim, correction, which):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if dim is None:
        dim = tuple(range(input.ndim))
    spread = getattr(input, which)
    s = spread(dim, unbiased=unbiased, keepdim=keepdim) if correction is None else \
        spread(dim, correction=correction, keepdim=keepdim)
    return s, input.mean(dim, keepdim=keepdim) if dim != () else input.mean()


@_method
def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) as a named tuple."""
    lo = input.amin(dim, keepdim) if dim is not None else input.amin()
    hi = input.amax(dim, keepdim) if dim is not None else input.amax()
    return _AMINMAX(lo, hi)


_AMINMAX = __import__("collections").namedtuple("aminmax", ["min", "max"])
_AMINMAX.__module__ = "ember.return_types"
