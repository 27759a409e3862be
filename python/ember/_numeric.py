"""Numerical helpers of PyTorch's, composed of ember's ops: angle, frexp,
gcd and lcm, nextafter, rsub, isin, logspace, vdot, the histograms
(histogram, histogramdd), gradient and cumulative_trapezoid.

Each is written so that it traces and differentiates as the ops it is made
of; where PyTorch defines an edge (frexp of infinities, gcd of zeros,
nextafter from zero) the same answer is given.
"""

import builtins
import collections
import math
import numbers

from . import _C, _creation, _ops
from ._math_extras import _float, _full, _inplace
from ._ops import _export, _method
from ._tensor import Tensor

__all__ = []


# ---------------------------------------------------------------- elementwise

@_method
def angle(input):
    """The argument of a real number: pi below zero, 0 otherwise (NaN
    stays NaN); integers give float32."""
    x = _float(input)
    return _ops.where(x < 0, _full(x, math.pi), _ops.where(x.isnan(), x, _full(x, 0.0)))


_FREXP = collections.namedtuple("frexp", ["mantissa", "exponent"])
_FREXP.__module__ = "ember.return_types"


@_method
def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent, |mantissa|
    in [0.5, 1) (0, inf and NaN keep themselves, exponent 0); exponent is
    int32. Exact: the exponent comes from log2 in float64 and is corrected
    by one where the mantissa falls outside its range."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    x = input.double()
    special = (x == 0) | x.isinf() | x.isnan()
    safe = _ops.where(special, _full(x, 1.0), x)
    e = safe.abs().log2().floor() + 1.0
    m = safe / e.exp2()
    big = m.abs() >= 1.0
    e, m = _ops.where(big, e + 1.0, e), _ops.where(big, m * 0.5, m)
    small = m.abs() < 0.5
    e, m = _ops.where(small, e - 1.0, e), _ops.where(small, m * 2.0, m)
    m = _ops.where(special, x, m)
    e = _ops.where(special, _full(e, 0.0), e)
    return _FREXP(m.to(input.dtype), e.to(_C.int32))


def _long_name(dt):
    """PyTorch's name of a dtype in kernel errors: Float, Double, Bool, ..."""
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "bool": "Bool"}.get(str(dt).split(".")[-1], str(dt))


def _int_pair(a, b, name):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        a, b = (a if isinstance(a, Tensor) else _creation.tensor(a)), (b if isinstance(b, Tensor) else
                                                                      _creation.tensor(b))
    for t in (a, b):
        if t.dtype.is_floating_point or t.dtype == _C.bool:
            raise RuntimeError(f'"{name}_cpu" not implemented for \'{_long_name(t.dtype)}\'')
    dt = _C.result_type(a, b)
    return _ops.broadcast_tensors(a.to(dt), b.to(dt))


@_method
def gcd(input, other):
    """The greatest common divisor, elementwise, of integers (non-negative;
    gcd(0, 0) = 0), by Euclid's algorithm."""
    a, b = _int_pair(input, other, "gcd")
    a, b = a.abs(), b.abs()
    while builtins.bool((b != 0).any()):
        nz = b != 0
        r = _ops.where(nz, a.remainder(_ops.where(nz, b, _creation.ones_like(b))), _creation.zeros_like(a))
        a, b = _ops.where(nz, b, a), r
    return a


@_method
def lcm(input, other):
    """The least common multiple, elementwise, of integers (0 where either
    is 0)."""
    a, b = _int_pair(input, other, "lcm")
    g = gcd(a, b)
    safe = _ops.where(g == 0, _creation.ones_like(g), g)
    return (a.div(safe, rounding_mode="trunc") * b).abs()


@_method
def nextafter(input, other):
    """The next representable value after input towards other (other
    itself where they are equal; NaN where either is NaN)."""
    x, y = _ops.broadcast_tensors(input, other)
    if not x.dtype.is_floating_point or x.dtype != y.dtype:
        raise RuntimeError(f"nextafter: expected two floating-point tensors of one dtype, got {input.dtype} and "
                           f"{other.dtype}")
    bits = {_C.float32: _C.int32, _C.float64: _C.int64}.get(x.dtype)
    if bits is None:
        raise RuntimeError(f'"nextafter_cpu" not implemented for \'{_long_name(x.dtype)}\'')
    i = x.contiguous().view(bits)
    away = (x < y) == (x > 0)  # (moving away from zero adds one to the bits)
    stepped = (i + _ops.where(away, _creation.ones_like(i), -_creation.ones_like(i))).view(x.dtype)
    tiny = _creation.tensor(1, dtype=bits).view(x.dtype)  # the smallest subnormal
    from_zero = _ops.where(y > 0, tiny.expand(x.shape), -tiny.expand(x.shape))
    out = _ops.where(x == 0, from_zero, stepped)
    out = _ops.where(x == y, y, out)
    return _ops.where(x.isnan() | y.isnan(), _full(x, math.nan), out)


_inplace("nextafter_", nextafter)
_inplace("gcd_", gcd)
_inplace("lcm_", lcm)


@_export
def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    return _ops.sub(other, input, alpha=alpha)


@_method
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is among `test_elements` (either
    may be a number): by searchsorted into the sorted test elements."""
    if not isinstance(elements, Tensor):
        elements = _creation.tensor(elements)
    test = test_elements if isinstance(test_elements, Tensor) else _creation.tensor(test_elements)
    flat = test.reshape(-1)
    if flat.numel() == 0:
        found = _creation.zeros(tuple(elements.shape), dtype=_C.bool, device=elements.device)
    else:
        dt = _C.result_type(elements, flat)
        srt = flat.to(dt).sort().values
        e = elements.to(dt)
        pos = _ops.searchsorted(srt, e.reshape(-1)).clamp(max=srt.numel() - 1)
        found = (srt[pos] == e.reshape(-1)).reshape(tuple(elements.shape))
    return ~found if invert else found


@_export
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False, layout=None,
             out=None):
    """steps points base**t for t evenly spaced from start to end."""
    if out is not None:
        raise NotImplementedError("logspace(out=...) is not implemented in ember; assign the result")
    t = _creation.linspace(start, end, steps, dtype=_C.float64)
    want = dtype or _creation.get_default_dtype()
    out = _full(t, builtins.float(base)) ** t
    if want is not None and not want.is_floating_point:
        out = out.round()
    out = out.to(want)
    return out.requires_grad_() if requires_grad else out


@_method
def vdot(input, other):
    """The dot product of two 1-d tensors (their conjugate-first form is the
    same for real ones)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype != other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {input.dtype} and "
                           f"{other.dtype}")
    return _ops.dot(input, other)


# ---------------------------------------------------------------- histograms

_HIST = collections.namedtuple("histogram", ["hist", "bin_edges"])
_HIST.__module__ = "ember.return_types"
_HISTDD = collections.namedtuple("histogramdd", ["hist", "bin_edges"])
_HISTDD.__module__ = "ember.return_types"


def _edges(x, bins, rng, name):
    """Bin edges along one coordinate: given, or `bins` equal bins over
    range (or x's own min and max; an empty range is widened by 0.5 each
    side, as PyTorch's is)."""
    if isinstance(bins, Tensor):
        return bins
    if rng is not None:
        lo, hi = builtins.float(rng[0]), builtins.float(rng[1])
        if lo > hi:
            raise RuntimeError(f"{name}: min should not exceed max, but got min {lo} max {hi}")
    elif x.numel():
        lo, hi = builtins.float(x.min()), builtins.float(x.max())
    else:
        lo, hi = 0.0, 1.0  # (no values: PyTorch's bins span [0, 1])
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5  # (PyTorch widens an empty range so the bins have a width)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{name}: range of [{lo}, {hi}] is not finite")
    return _creation.linspace(lo, hi, int(bins) + 1, dtype=x.dtype)


def _bin_of(x, edges):
    """Each value's bin (edges.numel() - 1 bins; the last one closed), -1
    outside."""
    n = edges.numel() - 1
    b = _ops.searchsorted(edges, x.contiguous(), right=True) - 1
    b = _ops.where(x == edges[-1], _full(b, n - 1), b)  # (the last bin includes its right edge)
    # (outside [first edge, last edge] counts nowhere, whatever the edges in
    # between: PyTorch's test, which also makes unsorted edges count nothing)
    outside = (b < 0) | (b >= n) | x.isnan() | (x < edges[0]) | (x > edges[-1])
    return _ops.where(outside, _full(b, -1), b)


@_method
def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the count (or the weights' sum) of input's values
    in each bin; bins is a number of equal bins (over range, or the values'
    min and max) or a 1-d tensor of increasing edges."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.histogram: input tensor and bins tensors should have the same dtype, but got "
                           f"input {input.dtype}")
    x = input.reshape(-1)
    edges = _edges(x, bins, range, "torch.histogram")
    hist, (edges,) = _histogram_of(x.unsqueeze(1), [edges], weight, density)
    return _HIST(hist, edges)


def _histogram_of(points, edges, weight, density):
    """The d-dimensional histogram of points (n, d) in bins with the given
    edges (one 1-d tensor per coordinate)."""
    counts = [e.numel() - 1 for e in edges]
    total = 1
    for c in counts:
        total *= c
    flat = _creation.zeros(points.shape[0], dtype=_C.int64, device=points.device)
    inside = _creation.ones(points.shape[0], dtype=_C.bool, device=points.device)
    for k, e in enumerate(edges):
        b = _bin_of(points[:, k], e)
        inside = inside & (b >= 0)
        flat = flat * counts[k] + b.clamp(min=0)
    w = weight.reshape(-1).to(points.dtype) if weight is not None else _creation.ones(points.shape[0],
                                                                                    dtype=points.dtype)
    w = _ops.where(inside, w, _creation.zeros_like(w))
    hist = _creation.zeros(total, dtype=points.dtype).scatter_add(0, flat, w).reshape(counts)
    if density:
        width = None
        for k, e in enumerate(edges):
            d = (e[1:] - e[:-1]).reshape([-1 if j == k else 1 for j in builtins.range(len(edges))])
            width = d if width is None else width * d
        hist = hist / (hist.sum() * width)
    return hist, list(edges)


@_export
def histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of the points in input's last dim (n points of d
    coordinates): bins a number, a list of numbers (per coordinate) or a
    list of edge tensors; range a flat list of (min, max) per coordinate."""
    d = input.shape[-1]
    points = input.reshape(-1, d)
    per = bins if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per) != d:
        raise RuntimeError(f"histogramdd: expected {d} sequences of bin edges for each dimension, but got "
                           f"{len(per)}")
    edges = [_edges(points[:, k], per[k], None if range is None else range[2 * k:2 * k + 2], "histogramdd")
             for k in builtins.range(d)]
    hist, edges = _histogram_of(points, edges, weight, density)
    return _HISTDD(hist, edges)


# ---------------------------------------------------------------- calculus on samples

@_export
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The gradient of values sampled on a grid, by central differences
    inside and one-sided differences of order edge_order (1 or 2) at the
    ends, along each dim (a tuple, one tensor per dim); spacing a number,
    a list of numbers or a list of coordinate tensors."""
    dims = list(builtins.range(input.ndim)) if dim is None else \
        ([dim] if isinstance(dim, numbers.Integral) else list(dim))
    dims = [d % input.ndim for d in dims]
    if edge_order not in (1, 2):
        raise ValueError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                               f"equal to 'self.dim() = {input.ndim}', since dim argument was not given, but got a "
                               f"list of length {len(spacing)}")
        steps = list(spacing)
    else:
        steps = [spacing] * len(dims)
    x = input if input.dtype.is_floating_point else input.to(_C._default_dtype())
    return tuple(_gradient_along(x, d, h, edge_order) for d, h in zip(dims, steps))


def _gradient_along(x, d, h, edge_order):
    n = x.shape[d]
    if n < edge_order + 1:
        raise RuntimeError(f"torch.gradient expected each dimension size to be at least edge_order+1")

    def sl(a, b):
        return x.narrow(d, a, b - a)
    if isinstance(h, Tensor):  # coordinates: non-uniform spacing (numpy's second-order formula)
        c = h.to(x.dtype)
        shape = [-1 if k == d else 1 for k in builtins.range(x.ndim)]
        dx = (c[1:] - c[:-1]).reshape(shape)
        d1, d2 = dx.narrow(d, 0, n - 2), dx.narrow(d, 1, n - 2)
        inner = (d1 * d1 * sl(2, n) - d2 * d2 * sl(0, n - 2) + (d2 * d2 - d1 * d1) * sl(1, n - 1)) / \
            (d1 * d2 * (d1 + d2))
        first, last = dx.narrow(d, 0, 1), dx.narrow(d, n - 2, 1)
        if edge_order == 1:
            lo = (sl(1, 2) - sl(0, 1)) / first
            hi = (sl(n - 1, n) - sl(n - 2, n - 1)) / last
        else:
            a, b = first, dx.narrow(d, 1, 1)
            lo = (-(2 * a + b) / (a * (a + b)) * sl(0, 1) + (a + b) / (a * b) * sl(1, 2)
                  - a / (b * (a + b)) * sl(2, 3))
            a, b = dx.narrow(d, n - 3, 1), last
            hi = (b / (a * (a + b)) * sl(n - 3, n - 2) - (a + b) / (a * b) * sl(n - 2, n - 1)
                  + (2 * b + a) / (b * (a + b)) * sl(n - 1, n))
        return _ops.cat([lo, inner, hi], d)
    h = builtins.float(h)
    inner = (sl(2, n) - sl(0, n - 2)) / (2 * h)
    if edge_order == 1:
        lo = (sl(1, 2) - sl(0, 1)) / h
        hi = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
    else:
        lo = (-1.5 * sl(0, 1) + 2.0 * sl(1, 2) - 0.5 * sl(2, 3)) / h
        hi = (0.5 * sl(n - 3, n - 2) - 2.0 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
    return _ops.cat([lo, inner, hi], d)


@_export
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along dim (one fewer element than y),
    with sample points x or spacing dx."""
    n = y.shape[dim]
    if n == 0:
        return y.narrow(dim, 0, 0)
    avg = (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)) * 0.5
    if x is not None:
        xd = x if x.ndim == y.ndim else x.reshape([-1 if k == dim % y.ndim else 1 for k in builtins.range(y.ndim)])
        m = xd.shape[dim]
        avg = avg * (xd.narrow(dim, 1, m - 1) - xd.narrow(dim, 0, m - 1))
    elif dx is not None:
        avg = avg * dx
    return avg.cumsum(dim)
