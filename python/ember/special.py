"""ember.special, as torch.special: expit, logit, exp2, expm1, log1p,
erf, erfc, xlogy, xlog1py, sinc, entr, logsumexp, softmax, log_softmax,
round (ember's ops directly); ndtr, log_ndtr, erfcx, erfinv, ndtri,
(compositions: Newton steps on erf, each in the form that stays accurate
in the tails); the gamma family (_gamma.py: gammaln, digamma, polygamma,
zeta, multigammaln, the incomplete gammas), the Bessel and Airy functions
(_bessel.py) and the orthogonal polynomials (_polynomials.py)."""

import math

from . import _ops

__all__ = ["expit", "logit", "exp2", "expm1", "log1p", "erf", "xlogy", "xlog1py", "sinc", "entr", "logsumexp",
           "softmax", "log_softmax", "round", "erfc", "ndtr", "log_ndtr", "erfcx", "erfinv", "ndtri", "digamma",
           "psi", "gammaln", "multigammaln", "polygamma", "zeta", "gammainc", "gammaincc", "airy_ai", "bessel_j0",
           "bessel_j1", "bessel_y0", "bessel_y1", "i0", "i0e", "i1", "i1e", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1", "spherical_bessel_j0", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "chebyshev_polynomial_v", "chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"]


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


# ---------------------------------------------------------------- normal distribution and error functions

_SQRT1_2 = 0.7071067811865476
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


from ._math_extras import _float, _full  # noqa: E402  (ints computed in float32, as there)
from ._special_base import smooth as _smooth  # noqa: E402


def erfc(input):
    return _float(input).erfc()


def ndtr(input):
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2) (accurate in the lower tail)."""
    return (_float(input) * -_SQRT1_2).erfc() * 0.5


def _erfcx(x):
    """exp(x^2) erfc(x): directly up to 3 (and for every x below 0), by its
    continued fraction beyond, where erfc underflows."""
    xs = _ops.where(x > 3.0, _full(x, 0.0), x)
    near = (xs * xs).exp() * xs.erfc()
    big = _ops.where(x > 3.0, x, _full(x, 4.0))
    # beyond 3, the continued fraction erfc(x) e^(x^2) sqrt(pi) = 1 / (x + (1/2) / (x + 1 / (x + (3/2) / ...))),
    # 40 levels (the (k/2) / (x + ...) of each, from the deepest)
    cf = _full(big, 0.0)
    for k in range(40, 0, -1):
        cf = (k * 0.5) / (big + cf)
    tail = 1.0 / ((big + cf) * math.sqrt(math.pi))
    return _ops.where(x > 3.0, tail, near)


def _log_ndtr(x):
    """log of the normal CDF: log(ndtr(x)) down to -5, the log of the
    scaled erfc below (where ndtr underflows), log1p(-ndtr(-x)) above 0."""
    lo = x < -5.0
    xl = _ops.where(lo, x, _full(x, -6.0))
    tail = (_erfcx(-xl * _SQRT1_2) * 0.5).log() - xl * xl * 0.5
    xm = _ops.where(lo, _full(x, 0.0), x)
    mid = _ops.where(xm > 0, (-ndtr(-xm)).log1p(), ndtr(xm).log())
    return _ops.where(lo, tail, mid)


def _erfinv_core(a, t):
    """erfinv(a) for a in [0, 1), with t = 1 - a given exactly (so that the
    tail, a within an ulp of 1, stays accurate): Giles' single-precision
    approximation (erfc's asymptote further out), then three Newton steps,
    on erf below 1/2 and on erfc above (whose small values keep their
    relative accuracy)."""
    w = -(t * (1.0 + a)).log()
    wc = w - 2.5
    p1 = _full(a, 2.81022636e-08)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p1 = p1 * wc + c
    ws = w.clamp(min=5.0).sqrt() - 3.0
    p2 = _full(a, -0.000200214257)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        p2 = p2 * ws + c
    x = _ops.where(w < 5.0, p1, p2) * a
    # Giles' fit covers single precision (t above ~1e-7); beyond, erfc's
    # asymptote: erfc(x) ~ e^(-x^2) / (x sqrt(pi)), so x^2 ~ L - log(pi L) / 2
    # with L = -log t (within 1e-3 of the root down to t = 1e-300)
    far = w > 16.0
    big_l = _ops.where(far, -t.log(), _full(t, 20.0))
    x = _ops.where(far, (big_l - 0.5 * (math.pi * big_l).log()).sqrt(), x)
    small = a < 0.5
    for _ in range(3):
        slope = (-x * x).exp() * (2.0 / math.sqrt(math.pi))
        x = x - _ops.where(small, x.erf() - a, t - x.erfc()) / slope
    return x


def _erfinv(y):
    """The inverse of erf on (-1, 1) (float64 accuracy); +-inf at +-1, NaN
    outside."""
    a = y.abs().clamp(max=1.0)
    t = 1.0 - a
    tt = _ops.where(t > 0, t, _full(t, 1.0))
    x = _erfinv_core(_ops.where(t > 0, a, _full(a, 0.0)), tt)
    x = _ops.where(t > 0, x, _full(x, math.inf))
    x = _ops.where(y < 0, -x, x)
    return _ops.where((y.abs() > 1.0) | y.isnan(), _full(y, math.nan), x)


def _ndtri(p):
    """The inverse of the normal CDF, -sqrt(2) erfcinv(2p): the tail below
    1/2 from 2p itself (exact), so ndtri(1e-300) is -37, not -inf; the
    upper half by symmetry; +-inf at 1 and 0, NaN outside."""
    lower = p < 0.5
    q = _ops.where(lower, p, 1.0 - p)
    ok = (q > 0) & (q <= 0.5)
    qs = _ops.where(ok, q, _full(q, 0.25))
    z = _erfinv_core(1.0 - 2.0 * qs, 2.0 * qs) * -math.sqrt(2.0)
    z = _ops.where(q == 0, _full(z, -math.inf), z)
    z = _ops.where(lower, z, -z)
    return _ops.where((p < 0) | (p > 1) | p.isnan(), _full(p, math.nan), z)


_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
erfinv = _smooth("erfinv", _erfinv, lambda x, y: 0.5 * _SQRT_PI * (y * y).exp())
ndtri = _smooth("ndtri", _ndtri, lambda x, y: _SQRT_2PI * (0.5 * y * y).exp())
erfcx = _smooth("erfcx", _erfcx, lambda x, y: 2.0 * x * y - 2.0 / _SQRT_PI)
# (log Phi)' = phi / Phi = exp(-x^2/2 - log Phi) / sqrt(2 pi), in the log domain (no underflow far out)
log_ndtr = _smooth("log_ndtr", _log_ndtr, lambda x, y: (-0.5 * x * x - y).exp() / _SQRT_2PI)


# ---------------------------------------------------------------- gamma, Bessel, polynomials

from ._gamma import (digamma, gammainc, gammaincc, gammaln, multigammaln, polygamma, psi,  # noqa: E402,F401
                     zeta)
from ._bessel import (airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, i0, i0e, i1, i1e,  # noqa: E402,F401
                      modified_bessel_i0, modified_bessel_i1, modified_bessel_k0, modified_bessel_k1,
                      scaled_modified_bessel_k0, scaled_modified_bessel_k1, spherical_bessel_j0)
from ._polynomials import (chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,  # noqa: E402,F401
                           chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he,
                           laguerre_polynomial_l, legendre_polynomial_p, shifted_chebyshev_polynomial_t,
                           shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
                           shifted_chebyshev_polynomial_w)


def _top_level():
    """The names ember's top level and Tensor take from here: {name:
    function} and {method name: function of (self, ...)}."""
    functions = {"lgamma": gammaln, "digamma": digamma, "erfinv": erfinv, "i0": i0, "polygamma": polygamma,
                 "mvlgamma": multigammaln, "igamma": gammainc, "igammac": gammaincc}
    methods = {"lgamma": gammaln, "digamma": digamma, "erfinv": erfinv, "i0": i0,
               "polygamma": lambda self, n: polygamma(n, self), "mvlgamma": lambda self, p: multigammaln(self, p),
               "igamma": gammainc, "igammac": gammaincc}
    return functions, methods