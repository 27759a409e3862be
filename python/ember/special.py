"""ember.special, as torch.special, for the functions ember's ops compose
exactly: expit, logit, exp2, expm1, log1p, erf, xlogy, xlog1py, sinc,
entr, logsumexp, softmax, log_softmax, round. (erfc, ndtr, gammaln,
digamma, i0 and the Bessel functions need kernels of their own to be
accurate in their tails, and are not here yet.)"""

import math

from . import _ops

__all__ = ["expit", "logit", "exp2", "expm1", "log1p", "erf", "xlogy", "xlog1py", "sinc", "entr", "logsumexp",
           "softmax", "log_softmax", "round"]


def _em():
    import sys
    return sys.modules[__package__]


def expit(input):
    """1 / (1 + exp(-x)), the logistic sigmoid."""
    return input.sigmoid()


def logit(input, eps=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    p = input if eps is None else input.clamp(eps, 1 - eps)
    return (p / (1 - p)).log()


def exp2(input):
    return _em().exp2(input)


def expm1(input):
    return input.expm1()


def log1p(input):
    return input.log1p()


def erf(input):
    return input.erf()


def _tensors(a, b):
    em = _em()
    if not isinstance(a, em.Tensor):
        a = em.tensor(a, dtype=b.dtype if b.is_floating_point() else em.get_default_dtype())
    if not isinstance(b, em.Tensor):
        b = em.tensor(b, dtype=a.dtype if a.is_floating_point() else em.get_default_dtype())
    if not a.is_floating_point() and not b.is_floating_point():
        a = a.to(em.get_default_dtype())
    return a, b


def xlogy(input, other):
    """x * log(y), 0 where x is 0 (unless y is NaN), as PyTorch's."""
    x, y = _tensors(input, other)
    out = x * y.log()
    return _ops.where((x == 0) & ~y.isnan(), 0.0, out)


def xlog1py(input, other):
    """x * log1p(y), 0 where x is 0 (unless y is NaN)."""
    x, y = _tensors(input, other)
    out = x * y.log1p()
    return _ops.where((x == 0) & ~y.isnan(), 0.0, out)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0."""
    x = input if input.is_floating_point() else input.to(_em().get_default_dtype())
    px = x * math.pi
    safe = _ops.where(x == 0, 1.0, px)
    return _ops.where(x == 0, 1.0, safe.sin() / safe)


def entr(input):
    """-x log x for x > 0, 0 at 0, -inf below."""
    x = input if input.is_floating_point() else input.to(_em().get_default_dtype())
    pos = _ops.where(x > 0, x, 1.0)
    out = _ops.where(x > 0, -pos * pos.log(), 0.0)
    out = _ops.where(x < 0, -math.inf, out)
    return _ops.where(x.isnan(), x, out)


def logsumexp(input, dim, keepdim=False):
    return input.logsumexp(dim, keepdim)


def softmax(input, dim, *, dtype=None):
    return input.softmax(dim, dtype=dtype) if dtype is not None else input.softmax(dim)


def log_softmax(input, dim, *, dtype=None):
    return input.log_softmax(dim, dtype=dtype) if dtype is not None else input.log_softmax(dim)


def round(input, *, decimals=0):
    return input.round(decimals=decimals) if decimals else input.round()
