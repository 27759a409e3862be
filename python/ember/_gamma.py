"""The gamma family for ember.special and ember's top level: gammaln
(lgamma), digamma (psi), polygamma of every order, the Hurwitz zeta
function, multigammaln (mvlgamma) and the regularized incomplete gammas
(gammainc = igamma, gammaincc = igammac).

Each raw function takes and gives float64 tensors (see _special_base).
lgamma (libm's), digamma and trigamma are op-table rows (ops_math.h: a
recurrence lifts the argument before an asymptotic series; reflection
handles negative arguments); the rest compose ember ops: zeta is
Euler-Maclaurin summation after 9 or more direct terms; the incomplete
gammas are their power series below a + 1 and Legendre's continued
fraction above. Edges follow PyTorch:
digamma(+-0) = -+inf, NaN at the negative integers; zeta(1, q) = inf.
"""

import math

from . import _C, _creation, _ops
from ._ops import _ID
from ._special_base import float_of, full, smooth, where, widened
from .autograd.function import Function



def _row(name):
    """lgamma, digamma, trigamma: the rows <name>_kernel of the op table (scalar C in
    ops_math.h: one kernel, fused and compiled, not an op per term)."""
    op = _ID[name]
    return lambda x: _C._ew(op, x)


_digamma, _trigamma, _gammaln = _row("digamma_kernel"), _row("trigamma_kernel"), _row("lgamma_kernel")


_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)  # (2k)! / B_2k


def _zeta(x, q):
    """The Hurwitz zeta function sum (k + q)^-x, k >= 0: the first terms
    directly (at least 9, and until q + k > 9), then Euler-Maclaurin with
    twelve Bernoulli terms, each stopping where it no longer changes the
    sum. NaN for x < 1 and for q <= 0 with x not an integer; inf at x = 1
    and at the poles q = 0, -1, ..."""
    x, q = _ops.broadcast_tensors(x, q)
    pole = (q <= 0) & (q == q.floor())
    bad = (x < 1) | ((q <= 0) & ~pole & (x != x.floor())) | x.isnan() | q.isnan()
    xs = where(bad | pole | (x == 1), full(x, 2.0), x)
    qs = where(bad | pole, full(q, 1.0), q)
    lowest = qs.min().item() if qs.numel() else 1.0
    n_direct = max(9, int(math.ceil(9.0 - lowest)) + 1) if math.isfinite(lowest) else 9
    s = qs ** -xs
    a = qs
    b = full(s, 0.0)
    for _ in range(n_direct):
        a = a + 1.0
        b = a ** -xs
        s = s + b
    w = a
    s = s + where(w.isinf(), full(w, 0.0), b * w / (xs - 1.0)) - 0.5 * b
    fac, k, bb = full(s, 1.0), 0.0, b
    done = (bb == 0) | w.isinf()
    for coeff in _ZETA_A:
        fac = fac * (xs + k)
        bb = bb / w
        t = fac * bb / coeff
        keep = ~done
        s = where(keep, s + t, s)
        done = done | ((t / s).abs() < 1.11e-16)
        k += 1.0
        fac = fac * (xs + k)
        bb = bb / w
        k += 1.0
    out = where((x == 1) | pole, full(s, math.inf), s)
    return where(bad, full(s, math.nan), out)


def _polygamma(n, x):
    if n == 0:
        return _digamma(x)
    if n == 1:
        return _trigamma(x)
    sign = 1.0 if n % 2 else -1.0
    out = sign * math.exp(math.lgamma(n + 1.0)) * _zeta(full(x, n + 1.0), x)
    return where(x == math.inf, full(x, 0.0), out)


digamma = smooth("digamma", _digamma, lambda x, y: _trigamma(x))
gammaln = smooth("gammaln", _gammaln, lambda x, y: _digamma(x))
psi = digamma


def polygamma(n, input):
    """The n-th derivative of digamma (n = 0 is digamma itself)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return smooth(f"polygamma{n}", lambda x: _polygamma(n, x), lambda x, y: _polygamma(n + 1, x))(input)


def zeta(input, other):
    """The Hurwitz zeta function zeta(x, q) (either may be a number; only
    the tensors' dtypes decide the result's, as PyTorch's); its gradient in
    q is -x zeta(x + 1, q), in x not implemented (PyTorch has none)."""
    x, q = _as_pair(input, other)
    dt = x.dtype
    if x.requires_grad and _C.is_grad_enabled():
        raise NotImplementedError("zeta: the derivative for 'self' (x) is not implemented")
    out = _ZetaQ.apply(x.double(), q.double()) if q.requires_grad and _C.is_grad_enabled() else \
        _zeta(x.double(), q.double())
    return out.to(dt)


def _as_pair(a, b):
    """Two operands as float tensors of their result type."""
    ta, tb = isinstance(a, _C._TensorBase), isinstance(b, _C._TensorBase)
    if not ta and not tb:
        raise TypeError("expected a tensor among the arguments")
    dt = _C.result_type(a, b)
    if not dt.is_floating_point:
        dt = _creation.get_default_dtype()
    a = a.to(dt) if ta else _creation.full(tuple(b.shape), float(a), dtype=dt, device=b.device)
    b = b.to(dt) if tb else _creation.full(tuple(a.shape), float(b), dtype=dt, device=a.device)
    return a, b


class _ZetaQ(Function):
    """zeta with its gradient in q: -x zeta(x + 1, q)."""

    @staticmethod
    def forward(ctx, x, q):
        ctx.save_for_backward(x, q)
        return _zeta(x, q)

    @staticmethod
    def backward(ctx, g):
        x, q = ctx.saved_tensors
        return None, g * -x * _zeta(x + 1.0, q)


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension p."""
    if not (isinstance(p, int) and p >= 1):
        raise ValueError(f"multigammaln: p must be a positive integer, got {p}")
    x = float_of(input)  # (PyTorch 1.13 does not check that x > (p - 1) / 2: log|Gamma| there, as its)
    out = gammaln(x) + p * (p - 1) / 4.0 * math.log(math.pi)
    for j in range(1, p):
        out = out + gammaln(x - j / 2.0)
    return out


# ---------------------------------------------------------------- incomplete gamma

def _terms_for(a, x):
    """How many terms the series and the continued fraction need: both
    converge in about sqrt(a) steps where x is near a (the series' ratio is
    x / (a + k); further from a, both converge faster); read from the
    largest a present (at most 1e6: larger ones take Temme's form)."""
    big = float(a.max()) if a.numel() else 1.0
    return int(min(60 + 12 * math.ceil(math.sqrt(max(big, 1.0))), 20000))


def _igam_parts(a, x):
    """(P, Q) of the regularized incomplete gammas for a > 0, x >= 0: the
    series for P where x < a + 1, the continued fraction for Q elsewhere
    (modified Lentz), and the other as 1 minus it."""
    terms = _terms_for(a, x)
    series_side = x < a + 1.0
    log_front = a * where(x > 0, x, full(x, 1.0)).log() - x - _gammaln(a)
    front = where(x > 0, log_front.exp(), full(x, 0.0))
    # P = front / a * sum_k x^k / ((a+1)...(a+k))
    term, total, ap = full(a, 1.0), full(a, 1.0), a
    for _ in range(terms):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
    p_series = front * total / a
    # Q = front * 1 / (x + 1 - a - 1*(1-a) / (x + 3 - a - 2*(2-a) / (x + 5 - a - ...)))
    tiny = 1e-300
    xc = where(series_side, a + 2.0, x)
    b = xc + 1.0 - a
    c = full(b, 1.0 / tiny)
    d = 1.0 / b
    h = d
    for i in range(1, terms):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = where(d.abs() < tiny, full(d, tiny), d)
        c = b + an / c
        c = where(c.abs() < tiny, full(c, tiny), c)
        d = 1.0 / d
        h = h * d * c
    q_cf = front * h
    p = where(series_side, p_series, 1.0 - q_cf)
    q = where(series_side, 1.0 - p_series, q_cf)
    return p, q


_TEMME_FROM = 1e6  # a from which the uniform asymptotic form is used (the series would need > 12000 terms)


def _igam_temme(a, x):
    """(P, Q) for large a (> 1e6) by Temme's uniform expansion (DLMF 8.12.3)
    to its first correction term: Q = erfc(eta sqrt(a/2)) / 2 + e^(-a eta^2/2)
    / sqrt(2 pi a) C0(eta), lambda = x / a, eta^2 / 2 = lambda - 1 - log
    lambda; the next term is below 1e-9 absolute from a = 1e6."""
    lam = x / a
    d = lam - 1.0
    eta = d.sign() * (2.0 * (d - lam.log())).clamp(min=0.0).sqrt()
    near = d.abs() < 1e-3
    safe_d = where(near, full(d, 1.0), d)
    safe_eta = where(near, full(eta, 1.0), eta)
    c0 = where(near, -1.0 / 3.0 + d / 12.0, 1.0 / safe_d - 1.0 / safe_eta)
    q = 0.5 * (eta * (a * 0.5).sqrt()).erfc() + (-0.5 * a * eta * eta).exp() / (2.0 * math.pi * a).sqrt() * c0
    return 1.0 - q, q


def _igamma(a, x, upper):
    a, x = _ops.broadcast_tensors(a, x)
    special = (a <= 0) | (x <= 0) | a.isinf() | x.isinf() | a.isnan() | x.isnan()
    temme = (a > _TEMME_FROM) & ~special
    plain = special | temme
    p, q = _igam_parts(where(plain, full(a, 1.0), a), where(plain, full(x, 1.0), x))
    pt, qt = _igam_temme(where(temme, a, full(a, 2.0 * _TEMME_FROM)), where(temme, x, full(x, 2.0 * _TEMME_FROM)))
    out = where(temme, qt, q) if upper else where(temme, pt, p)
    out = where(a.isnan() | x.isnan(), full(out, math.nan), out)
    one, zero = (0.0, 1.0) if upper else (1.0, 0.0)  # (P's 1 and 0 are Q's 0 and 1)
    # the edges in PyTorch's (SciPy's) order, the first that applies winning:
    # a < 0 or x < 0: NaN; a = 0: 1 for x > 0, else NaN; x = 0: 0; a = inf:
    # NaN at x = inf, else 0; x = inf: 1 (so igamma(inf, nan) is 0)
    out = where(x.isinf(), full(out, one), out)
    out = where(a.isinf(), where(x.isinf(), full(out, math.nan), full(out, zero)), out)
    out = where(x == 0, full(out, zero), out)
    out = where(a == 0, where(x > 0, full(out, one), full(out, math.nan)), out)
    return where((x < 0) | (a < 0), full(out, math.nan), out)


class _IncompleteGamma(Function):
    """P(a, x) or Q(a, x) with their gradient in x, +-x^(a-1) e^-x / Gamma(a)."""

    @staticmethod
    def forward(ctx, a, x, upper):
        ctx.save_for_backward(a, x)
        ctx.upper = upper
        return _igamma(a.double(), x.double(), upper).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        aw, xw = a.double(), x.double()
        dens = ((aw - 1.0) * xw.log() - xw - _gammaln(aw)).exp()
        return None, (g.double() * (-dens if ctx.upper else dens)).to(g.dtype), None


def _incomplete(name, upper):
    def fn(input, other):
        a, x = _as_pair(input, other)
        if _C.is_grad_enabled() and a.requires_grad:
            raise NotImplementedError(f"{name}: the derivative for 'self' (a) is not implemented")
        if _C.is_grad_enabled() and x.requires_grad:
            return _IncompleteGamma.apply(a, x, upper)
        return _igamma(a.double(), x.double(), upper).to(a.dtype)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The regularized {'upper' if upper else 'lower'} incomplete gamma function of (a, x); its "
                  "gradient in x only (PyTorch has none in a).")
    return fn


gammainc = igamma = _incomplete("igamma", False)
gammaincc = igammac = _incomplete("igammac", True)

__all__ = ["digamma", "psi", "gammaln", "polygamma", "zeta", "multigammaln", "gammainc", "gammaincc", "igamma",
           "igammac", "widened"]
