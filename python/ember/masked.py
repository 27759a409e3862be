"""ember.masked, as torch.masked's functions on strided tensors: each
reduction or normalization of `input` over `dim` reads only the elements
where `mask` (broadcast to input's shape) is True.

As PyTorch defines them, a masked-out element is replaced by the
operation's identity (0 for sums and norms, 1 for products, -inf or the
dtype's lowest value for maxima, +inf or its highest for minima, NaN for
medians) before the ordinary operation runs; so a fully masked-out slice
gives the identity (NaN for mean, var and std, whose count is 0). The
masked normalizations (softmax, log_softmax, softmin, normalize) and scans
(cumsum, cumprod) keep input's shape. MaskedTensor (torch.masked's
prototype tensor subclass) is not implemented.
"""

import builtins
import math

from . import _C, _creation, _ops

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp", "logsumexp",
           "mean", "median", "norm", "normalize", "prod", "softmax", "softmin", "std", "sum", "var"]

_SMALL_INTS = ("uint8", "bool", "int8", "int16", "int32")


def _dims(dim, ndim):
    """dim as a sorted tuple of non-negative dims (None and () mean all)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    n = builtins.max(ndim, 1)
    seen = []
    for d in ((dim,) if isinstance(dim, int) else dim):
        if d in seen:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        seen.append(d)
    return tuple(sorted(d % n for d in seen))


def _identity(name, input, ord=None):
    """The value a masked-out element takes for operation `name`."""
    dt = input.dtype
    if name in ("sum", "cumsum", "norm"):
        return math.inf if name == "norm" and ord == -math.inf else 0
    if name in ("prod", "cumprod"):
        return 1
    if name in ("amax", "argmax", "logsumexp"):
        return -math.inf if dt.is_floating_point else _int_limits(dt)[0]
    if name in ("amin", "argmin"):
        return math.inf if dt.is_floating_point else _int_limits(dt)[1]
    if name == "median":
        return math.nan
    raise NotImplementedError(f"identity of {name} on {dt} input")


def _int_limits(dt):
    from ._extras import iinfo
    info = iinfo(dt)
    return info.min, info.max


def _combine(name, input, mask, ord=None):
    """input with its masked-out elements replaced by name's identity."""
    if mask is None:
        return input
    if mask.ndim > input.ndim:
        raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality higher than of the input)")
    m = mask.to(_C.bool).broadcast_to(tuple(input.shape))
    return _ops.where(m, input, _creation.full_like(input, _identity(name, input, ord)))


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtype
    return _C.int64 if str(input.dtype).split(".")[-1] in _SMALL_INTS else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The sum of input's unmasked elements over dim (all by default)."""
    dt = _sum_dtype(input, dtype)
    return _combine("sum", input, mask).sum(_dims(dim, input.ndim), keepdim=bool(keepdim), dtype=dt)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product of input's unmasked elements over dim."""
    result = _combine("prod", input, mask).to(_sum_dtype(input, dtype))
    for d in reversed(_dims(dim, input.ndim)):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    """The running sum along dim, masked-out elements adding 0."""
    d = _dims(dim, input.ndim)[0]
    dt = dtype or input.dtype
    return _combine("sum", input, mask).cumsum(d, dtype=dt).to(dt)


def cumprod(input, dim, *, dtype=None, mask=None):
    """The running product along dim, masked-out elements multiplying by 1."""
    d = _dims(dim, input.ndim)[0]
    dt = dtype or input.dtype
    return _combine("prod", input, mask).cumprod(d, dtype=dt).to(dt)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The largest unmasked element over dim (-inf, or the dtype's lowest,
    where all are masked out)."""
    return _combine("amax", input, mask).amax(_dims(dim, input.ndim), bool(keepdim)).to(dtype or input.dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The smallest unmasked element over dim."""
    return _combine("amin", input, mask).amin(_dims(dim, input.ndim), bool(keepdim)).to(dtype or input.dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Where the largest unmasked element lies along dim."""
    out = _combine("argmax", input, mask).argmax(dim, bool(keepdim))
    return out.to(dtype or input.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Where the smallest unmasked element lies along dim."""
    out = _combine("argmin", input, mask).argmin(dim, bool(keepdim))
    return out.to(dtype or input.dtype)


def _count(input, dim, keepdim, mask):
    ones = _creation.ones(tuple(input.shape), dtype=_C.int64, device=input.device)
    return sum(ones, dim, keepdim=keepdim, dtype=_C.int64, mask=mask)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the unmasked elements over dim (NaN where there are
    none)."""
    dt = dtype or input.dtype
    total = sum(input, dim, keepdim=keepdim, dtype=dt, mask=mask)
    return total / _count(input, dim, keepdim, mask)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The median of the unmasked elements along dim (NaN where there are
    none; integer inputs may not have such slices)."""
    dt = dtype or input.dtype
    d = _dims(dim, input.ndim)[0]
    is_float = input.dtype.is_floating_point
    x = input if is_float else input.to(_C._default_dtype())
    out = _combine("median", x, mask).nanmedian(d, keepdim).values
    if is_float:
        return out
    if builtins.bool(out.isnan().any()):
        raise ValueError("masked median expects no fully masked out rows if dtype is not floating point")
    return out.to(dt)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp(x))) over the unmasked elements (-inf where there are none)."""
    return _combine("logsumexp", input, mask).logsumexp(_dims(dim, input.ndim), keepdim=keepdim).to(
        dtype or input.dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """log(exp(input) + exp(other)), each operand's masked-out elements -inf."""
    a = _combine("logsumexp", input, input_mask)
    b = _combine("logsumexp", other, other_mask)
    return _ops.logaddexp(a, b).to(dtype or input.dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The ord-norm of the unmasked elements over dim."""
    from .linalg import vector_norm
    x = _combine("norm", input, mask, ord)
    return vector_norm(x, ord, _dims(dim, input.ndim), bool(keepdim), dtype=dtype or input.dtype)


def _std_var(input, dim, unbiased, keepdim, dtype, mask, take_sqrt):
    dt = dtype
    if dt is None:
        dt = input.dtype if input.dtype.is_floating_point else _C._default_dtype()
    compute = dt if dt.is_floating_point else _C._default_dtype()
    count = _count(input, dim, True, mask)
    mean_ = sum(input, dim, keepdim=True, dtype=dt, mask=mask) / count
    x = input - mean_
    total = sum(x * x, dim, keepdim=keepdim, dtype=compute, mask=mask)
    if not keepdim:
        count = count.reshape(tuple(total.shape))
    if unbiased:
        count = _ops.maximum(count - 1, _creation.zeros_like(count))
    out = (total / count).to(dt)
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance of the unmasked elements over dim (unbiased: divided by
    count - 1)."""
    return _std_var(input, dim, _unbiased(unbiased, correction), keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation of the unmasked elements over dim."""
    return _std_var(input, dim, _unbiased(unbiased, correction), keepdim, dtype, mask, True)


def _unbiased(unbiased, correction):
    if correction is not None:
        if correction not in (0, 1):
            raise NotImplementedError(f"masked var/std: correction={correction} (only 0 and 1, as PyTorch 1.13)")
        return bool(correction)
    return True if unbiased is None else bool(unbiased)


def softmax(input, dim, *, dtype=None, mask=None):
    """softmax along dim over the unmasked elements (masked-out ones get 0;
    a fully masked-out slice gives NaN, as PyTorch's)."""
    d = _dims(dim, input.ndim)[0]
    return _combine("amax", input, mask).softmax(d, dtype=dtype or input.dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log_softmax along dim over the unmasked elements."""
    d = _dims(dim, input.ndim)[0]
    return _combine("amax", input, mask).log_softmax(d, dtype=dtype or input.dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """softmin along dim over the unmasked elements."""
    from .nn.functional import softmin as _softmin
    d = _dims(dim, input.ndim)[0]
    return _softmin(_combine("amin", input, mask), d, dtype=dtype or input.dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """input divided by the ord-norm of its unmasked elements along dim
    (masked-out elements 0)."""
    d = _dims(dim, input.ndim)[0]
    x = _combine("sum", input, mask)
    n = norm(input, ord, d, keepdim=True, dtype=dtype or input.dtype, mask=mask)
    return x / _ops.maximum(n, _creation.full_like(n, eps))
