"""ember.special, as torch.special: expit, logit, exp2, expm1, log1p,
erf, erfc, xlogy, xlog1py, sinc, entr, logsumexp, softmax, log_softmax,
round (ember's ops directly); ndtr, log_ndtr, erfcx, erfinv, ndtri,
digamma (psi), gammaln and multigammaln (compositions: asymptotic series
after a recurrence, Newton steps on erf, each in the form that stays
accurate in the tails). The Bessel functions, zeta, polygamma of order
above 0, the incomplete gammas and the orthogonal polynomials are not here
yet."""

import math

from . import _ops

__all__ = ["expit", "logit", "exp2", "expm1", "log1p", "erf", "xlogy", "xlog1py", "sinc", "entr", "logsumexp",
           "softmax", "log_softmax", "round", "erfc", "ndtr", "log_ndtr", "erfcx", "erfinv", "ndtri", "digamma",
           "psi", "gammaln", "multigammaln", "polygamma"]


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


def _widened(fn):
    """fn computed in float64 for narrower floats (and ints), cast back:
    these compositions lose digits in float32 where PyTorch's libm-based
    kernels do not."""
    import functools

    @functools.wraps(fn)
    def wrapper(input, *args, **kwargs):
        x = _float(input)
        if x.dtype == _em().float64:
            return fn(x, *args, **kwargs)
        return fn(x.double(), *args, **kwargs).to(x.dtype)
    return wrapper


def erfc(input):
    return _float(input).erfc()


def ndtr(input):
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2) (accurate in the lower tail)."""
    return (_float(input) * -_SQRT1_2).erfc() * 0.5


def erfcx(input):
    """exp(x^2) erfc(x): directly up to 3 (and for every x below 0), by its
    continued fraction beyond, where erfc underflows."""
    x = _float(input)
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


def log_ndtr(input):
    """log of the normal CDF: log(ndtr(x)) down to -5, the log of the
    scaled erfc below (where ndtr underflows), log1p(-ndtr(-x)) above 0."""
    x = _float(input)
    lo = x < -5.0
    xl = _ops.where(lo, x, _full(x, -6.0))
    tail = (erfcx(-xl * _SQRT1_2) * 0.5).log() - xl * xl * 0.5
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


def erfinv(input):
    """The inverse of erf on (-1, 1) (float64 accuracy); +-inf at +-1, NaN
    outside."""
    y = _float(input)
    a = y.abs().clamp(max=1.0)
    t = 1.0 - a
    tt = _ops.where(t > 0, t, _full(t, 1.0))
    x = _erfinv_core(_ops.where(t > 0, a, _full(a, 0.0)), tt)
    x = _ops.where(t > 0, x, _full(x, math.inf))
    x = _ops.where(y < 0, -x, x)
    return _ops.where((y.abs() > 1.0) | y.isnan(), _full(y, math.nan), x)


def ndtri(input):
    """The inverse of the normal CDF, -sqrt(2) erfcinv(2p): the tail below
    1/2 from 2p itself (exact), so ndtri(1e-300) is -37, not -inf; the
    upper half by symmetry; +-inf at 1 and 0, NaN outside."""
    p = _float(input)
    lower = p < 0.5
    q = _ops.where(lower, p, 1.0 - p)
    ok = (q > 0) & (q <= 0.5)
    qs = _ops.where(ok, q, _full(q, 0.25))
    z = _erfinv_core(1.0 - 2.0 * qs, 2.0 * qs) * -math.sqrt(2.0)
    z = _ops.where(q == 0, _full(z, -math.inf), z)
    z = _ops.where(lower, z, -z)
    return _ops.where((p < 0) | (p > 1) | p.isnan(), _full(p, math.nan), z)


# ---------------------------------------------------------------- gamma

_SHIFT = 8  # the recurrence lifts x to at least this before the asymptotic series


def _lifted(x):
    """(y, s): y = x + n >= _SHIFT for x >= 0 region handling, s the sum of
    1 / (x + k), k < n, and the log of the product x (x + 1) ... (x + n - 1)."""
    recip, logs, y = _full(x, 0.0), _full(x, 0.0), x
    for _ in range(_SHIFT):
        small = y < _SHIFT
        yy = _ops.where(small, y, _full(y, 1.0))
        recip = recip + _ops.where(small, 1.0 / yy, _full(yy, 0.0))
        logs = logs + _ops.where(small, yy.abs().log(), _full(yy, 0.0))
        y = _ops.where(small, y + 1.0, y)
    return y, recip, logs


@_widened
def digamma(input):
    """psi(x) = d/dx log Gamma(x): the recurrence psi(x) = psi(x + 1) - 1/x
    up to 8, then the asymptotic series; reflection below 0; -inf at +0 and
    +inf at -0 (PyTorch's), NaN at the negative integers and -inf."""
    x = input
    neg = x < 0
    xr = _ops.where(neg, 1.0 - x, x)
    y, recip, _ = _lifted(xr)
    inv = 1.0 / y
    inv2 = inv * inv
    series = y.log() - 0.5 * inv - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 * (1.0 / 132 - inv2 * (691.0 / 32760 - inv2 * (1.0 / 12)))))))
    pos = series - recip
    refl = pos - math.pi / (math.pi * _ops.where(neg, x, _full(x, 0.5))).tan()
    out = _ops.where(neg, refl, pos)
    out = _ops.where(x == 0, _ops.where(1.0 / x < 0, math.inf, -math.inf), out)
    return _ops.where((neg & (x == x.floor())) | (x == -math.inf), _full(x, math.nan), out)


psi = digamma


def polygamma(n, input):
    """polygamma of order 0 (digamma); higher orders are not here yet."""
    if n == 0:
        return digamma(input)
    raise NotImplementedError(f"ember.special.polygamma: order {n} (only 0, digamma, is implemented)")


@_widened
def gammaln(input):
    """log |Gamma(x)|: Stirling's series after the recurrence to 8;
    reflection below 0.5; +inf at 0, the negative integers and +-inf."""
    x = input
    neg = x < 0.5
    xr = _ops.where(neg, 1.0 - x, x)
    y, _, logs = _lifted(xr)
    inv = 1.0 / y
    inv2 = inv * inv
    stirling = (y - 0.5) * y.log() - y + _LOG_SQRT_2PI + inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (
        1.0 / 1260 - inv2 * (1.0 / 1680 - inv2 * (1.0 / 1188 - inv2 * (691.0 / 360360 - inv2 * (1.0 / 156)))))))
    pos = stirling - logs
    s = (math.pi * _ops.where(neg, x, _full(x, 0.5))).sin().abs()
    refl = math.log(math.pi) - _ops.where(neg, s, _full(s, 1.0)).log() - pos
    out = _ops.where(neg, refl, pos)
    return _ops.where(((x <= 0) & (x == x.floor())) | x.isinf(), _full(x, math.inf), out)


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension p."""
    if not (isinstance(p, int) and p >= 1):
        raise ValueError(f"multigammaln: p must be a positive integer, got {p}")
    x = _float(input)
    out = gammaln(x) + p * (p - 1) / 4.0 * math.log(math.pi)
    for j in range(1, p):
        out = out + gammaln(x - j / 2.0)
    return out
