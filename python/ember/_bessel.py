"""Bessel and Airy functions for ember.special (and i0 at the top level):
I0, I1 and their exponentially scaled forms, J0, J1, Y0, Y1, K0, K1 and
their scaled forms, the spherical j0, and Ai.

J0, J1, Y0 and Y1 are op-table rows on libm's functions; the scaled I0
and I1 are rows too (ops_math.h: their power series to |x| = 30, Hankel's
asymptotic expansion beyond). Each other raw function takes and gives
float64 tensors (see _special_base) and is written from the functions'
own expansions:
- near zero, K's logarithmic power series, summed to a fixed number of
  terms far past where they stop mattering;
- K (and Ai, through K_1/3) from x = 2 to 20 by the trapezoid rule on
  exp(-x (cosh t - 1)) cosh(nu t), which converges geometrically in 1/h
  for such integrands (71 points at h = 1/10 reach float64), and by its
  asymptotic expansion beyond.
Infinite arguments give the functions' limits (0 for J, Y, K, Ai at +inf;
inf for I), where PyTorch 1.13's Cephes forms give NaN.
"""

import math

from . import _C
from ._ops import _ID
from ._special_base import full, smooth, where, widened

_EULER = 0.5772156649015329
_SERIES = 60  # power series terms (the last below 1e-30 of the largest at the switch points)


def _i_series(x, nu):
    """I_nu(x) for nu in (0, 1) by its power series (K's series uses it)."""
    q = x * x * 0.25
    term = full(x, 1.0)
    total = full(x, 1.0)
    for k in range(1, _SERIES):
        term = term * q / (k * (k + nu))
        total = total + term
    return total if nu == 0 else total * x * 0.5


def _hankel_terms(x, nu, count):
    """b_k = a_k(nu) / x^k, a_k(nu) = prod_(j <= k) (4 nu^2 - (2j - 1)^2) /
    (k! 8^k): the terms of the asymptotic expansions of I, J and Y."""
    terms = [full(x, 1.0)]
    for k in range(1, count):
        terms.append(terms[-1] * ((4.0 * nu * nu - (2 * k - 1) ** 2) / (8.0 * k)) / x)
    return terms


def _i0e(x):
    """exp(-|x|) I0(x): the op-table row i0e_kernel (series, then Hankel's
    expansion, per element in C)."""
    return _C._ew(_ID["i0e_kernel"], x)


def _i1e(x):
    return _C._ew(_ID["i1e_kernel"], x)


def _i0(x):
    ax = x.abs()
    return where(ax.isinf(), full(x, math.inf), _i0e(x) * ax.exp())


def _i1(x):
    ax = x.abs()
    out = where(ax.isinf(), full(x, math.inf), _i1e(x).abs() * ax.exp())
    return where(x < 0, -out, where(x == 0, x * 0.0, out))


def _i1_prime(x, y):
    """I1'(x) = I0(x) - I1(x) / x (1/2 at 0)."""
    safe = where(x == 0, full(x, 1.0), x)
    return where(x == 0, full(x, 0.5), _i0(x) - y / safe)


def _i1e_prime(x, y):
    """(e^-|x| I1)' = e^-|x| I0 - e^-|x| I1 (sign(x) + 1/x)."""
    safe = where(x == 0, full(x, 1.0), x)
    return where(x == 0, full(x, 0.5), _i0e(x) - y * (x.sign() + 1.0 / safe))


i0 = modified_bessel_i0 = smooth("i0", _i0, lambda x, y: _i1(x))
i0e = smooth("i0e", _i0e, lambda x, y: _i1e(x) - x.sign() * y)
i1 = modified_bessel_i1 = smooth("i1", _i1, _i1_prime)
i1e = smooth("i1e", _i1e, _i1e_prime)


# ---------------------------------------------------------------- J and Y

def _libm_op(name, doc):
    """J0, J1, Y0, Y1: rows of the op table on libm's functions (ops.def),
    so they are fast, fuse and compile, and have gradients."""
    op = _ID[name]

    def fn(input):
        return _C._ew(op, input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


bessel_j0 = _libm_op("bessel_j0", "J0, the Bessel function of the first kind of order 0.")
bessel_j1 = _libm_op("bessel_j1", "J1, the Bessel function of the first kind of order 1.")
bessel_y0 = _libm_op("bessel_y0", "Y0, the Bessel function of the second kind of order 0 (NaN below 0).")
bessel_y1 = _libm_op("bessel_y1", "Y1, the Bessel function of the second kind of order 1 (NaN below 0).")


def _unary(input, fn):
    return widened(fn)(input)


# ---------------------------------------------------------------- K

_K_SWITCH = 2.0
_K_FAR = 20.0
_K_STEP = 0.1
_K_POINTS = 71  # t up to 7: x(cosh t - 1) passes 40 from x = 0.07 on


def _scaled_k_integral(x, nu):
    """e^x K_nu(x) = integral_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt, by
    the trapezoid rule, for x in about [0.1, 20]: the error is near
    exp(x (1 - cos a) - 2 pi a / h) for strips |Im t| < a < pi/2, below
    1e-16 there at h = 1/10; further out the integrand is too narrow for
    the step and _scaled_k_far takes over."""
    total = full(x, 0.5)  # (the t = 0 end, halved: the integrand is 1 there)
    for k in range(1, _K_POINTS):
        t = k * _K_STEP
        total = total + (-x * (math.cosh(t) - 1.0)).exp() * math.cosh(nu * t)
    return total * _K_STEP


def _scaled_k_far(x, nu):
    """e^x K_nu(x) for x > 20 by its asymptotic expansion, sqrt(pi / 2x)
    sum a_k(nu) / x^k (truncation error below exp(-2x))."""
    total = full(x, 0.0)
    for t in _hankel_terms(x, nu, 30):
        total = total + t
    return total * (math.pi / (2.0 * x)).sqrt()


def _scaled_k_any(x, nu):
    """e^x K_nu(x) for x >= 0.1: the trapezoid rule up to 20, the
    asymptotic expansion beyond."""
    far = x > _K_FAR
    near = _scaled_k_integral(where(far, full(x, 1.0), x), nu)
    xf = where(far & ~x.isinf(), x, full(x, _K_FAR + 1.0))
    return where(far, where(x.isinf(), full(x, 0.0), _scaled_k_far(xf, nu)), near)


def _k_series(x, nu):
    """K0 or K1 by their logarithmic series (x > 0, small)."""
    log_half = (x * 0.5).log()
    if nu == 0:
        q = x * x * 0.25
        term, total, h = full(x, 1.0), full(x, 0.0), 0.0
        for k in range(1, _SERIES):
            term = term * q / (k * k)
            h += 1.0 / k
            total = total + h * term
        return -(log_half + _EULER) * _i_series(x, 0) + total
    q = x * x * 0.25
    term = full(x, 1.0)
    h0, h1 = 0.0, 1.0
    total = term * (h0 + h1 - 2.0 * _EULER)
    for k in range(1, _SERIES):
        term = term * q / (k * (k + 1))
        h0 += 1.0 / k
        h1 += 1.0 / (k + 1)
        total = total + term * (h0 + h1 - 2.0 * _EULER)
    return 1.0 / x + log_half * _i_series(x, 1) - x * 0.25 * total


def _scaled_k(x, nu):
    small = x <= _K_SWITCH
    xs = where(small & (x > 0), x, full(x, 1.0))
    series = _k_series(xs, nu) * xs.exp()
    xl = where(small, full(x, _K_SWITCH + 1.0), x)
    out = where(small, series, _scaled_k_any(xl, nu))
    out = where(x == math.inf, full(x, 0.0), out)
    out = where(x == 0, full(x, math.inf), out)
    return where((x < 0) | x.isnan(), full(x, math.nan), out)


def _k(x, nu):
    scaled = _scaled_k(x, nu)
    return where(x > 0, scaled * (-where(x > 0, x, full(x, 0.0))).exp(), scaled)


def modified_bessel_k0(input):
    """K0, the modified Bessel function of the second kind of order 0."""
    return _unary(input, lambda x: _k(x, 0))


def modified_bessel_k1(input):
    """K1, the modified Bessel function of the second kind of order 1."""
    return _unary(input, lambda x: _k(x, 1))


def scaled_modified_bessel_k0(input):
    """exp(x) K0(x)."""
    return _unary(input, lambda x: _scaled_k(x, 0))


def scaled_modified_bessel_k1(input):
    """exp(x) K1(x)."""
    return _unary(input, lambda x: _scaled_k(x, 1))


# ---------------------------------------------------------------- spherical j0, Airy

def _spherical_j0(x):
    small = x.abs() < 0.5
    x2 = x * x
    poly = 1.0 + x2 * (-1.0 / 6 + x2 * (1.0 / 120 + x2 * (-1.0 / 5040 + x2 * (1.0 / 362880 + x2 * (
        -1.0 / 39916800 + x2 * (1.0 / 6227020800))))))
    safe = where(small, full(x, 1.0), x)
    out = where(small, poly, safe.sin() / safe)
    return where(x.isinf(), full(x, 0.0), out)


def spherical_bessel_j0(input):
    """sin(x) / x (1 at 0, 0 at the infinities)."""
    return _unary(input, _spherical_j0)


_AI0 = 0.355028053887817239260  # Ai(0)
_AIP0 = 0.258819403792806798405  # -Ai'(0)


def _airy_series(x):
    """Ai(x) = Ai(0) f(x) + Ai'(0) g(x) by the Maclaurin series of f and g."""
    x3 = x * x * x
    f, g = full(x, 1.0), x
    tf, tg = full(x, 1.0), x
    for k in range(1, _SERIES):
        tf = tf * x3 / ((3 * k - 1) * (3 * k))
        tg = tg * x3 / ((3 * k) * (3 * k + 1))
        f, g = f + tf, g + tg
    return _AI0 * f - _AIP0 * g


def _airy_oscillating(x):
    """Ai(-x) for large x > 0, from its asymptotic expansion."""
    zeta = (2.0 / 3.0) * x * x.sqrt()
    u = 1.0
    even, odd = full(x, 1.0), full(x, 0.0)
    power = full(x, 1.0)
    for k in range(1, 30):
        u = u * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k)
        power = power / zeta
        term = u * power
        if k % 2 == 0:
            even = even + (term if k % 4 == 0 else -term)
        else:
            odd = odd + (term if k % 4 == 1 else -term)
    c, s = zeta.cos(), zeta.sin()  # (of zeta + pi/4 by the angle sum)
    r = math.sqrt(0.5)
    sin_phase, cos_phase = (s + c) * r, (c - s) * r
    return (sin_phase * even - cos_phase * odd) / (math.sqrt(math.pi) * x.sqrt().sqrt())


def _airy(x):
    big = x > 1.0
    far = x < -8.0
    mid = ~big & ~far
    series = _airy_series(where(mid, x, full(x, 0.0)))
    xb = where(big & ~x.isinf(), x, full(x, 2.0))
    zeta = (2.0 / 3.0) * xb * xb.sqrt()
    decaying = (xb / 3.0).sqrt() / math.pi * _scaled_k_any(zeta, 1.0 / 3.0) * (-zeta).exp()
    xf = where(far & ~x.isinf(), -x, full(x, 9.0))
    out = where(big, decaying, where(far, _airy_oscillating(xf), series))
    out = where(x.isinf(), full(x, 0.0), out)
    return where(x.isnan(), x, out)


def airy_ai(input):
    """Ai, the Airy function of the first kind."""
    return _unary(input, _airy)


__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "i0", "i0e", "i1", "i1e",
           "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"]
