"""ember.special's gamma, Bessel and Airy functions against exact values
(mpmath at 30 digits), where PyTorch 1.13's own are less accurate; their
limits at the infinities (where PyTorch gives NaN); their gradients against
their known derivatives; and the orthogonal polynomials against their
definitions. The OpInfo database (test_torch_databases.py) compares them
with PyTorch itself."""

import math

import numpy as np
import pytest

import ember

mpmath = pytest.importorskip("mpmath")
mpmath.mp.dps = 30

POINTS = np.concatenate([np.linspace(-30, 30, 121), [1e-8, 0.3, 2.0, 7.5, 14.0, 14.5, 19.9, 20.1, 45.5, 100.0,
                                                     700.0, 4988429.0]])


def _exact(f, xs):
    out = []
    for x in xs:
        try:
            out.append(float(f(mpmath.mpf(float(x)))))
        except (ValueError, ZeroDivisionError):
            out.append(math.nan)
    return np.array(out)


def _worst(got, want):
    """The worst error: relative, or absolute where smaller (near the zeros
    of oscillating functions)."""
    ok = np.isfinite(want)
    err = np.minimum(np.abs(got - want) / np.maximum(np.abs(want), 1e-300), np.abs(got - want))
    return np.max(np.where(ok, err, 0.0))


CASES = {
    "bessel_j0": (lambda x: mpmath.besselj(0, x), 1e-14),  # (libm's)
    "bessel_j1": (lambda x: mpmath.besselj(1, x), 1e-14),
    "bessel_y0": (lambda x: mpmath.bessely(0, x) if x > 0 else mpmath.nan, 1e-14),
    "bessel_y1": (lambda x: mpmath.bessely(1, x) if x > 0 else mpmath.nan, 1e-14),
    "modified_bessel_i0": (lambda x: mpmath.besseli(0, x), 1e-14),
    "modified_bessel_i1": (lambda x: mpmath.besseli(1, x), 1e-14),
    "i0e": (lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x)), 1e-14),
    "i1e": (lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x)), 1e-14),
    "modified_bessel_k0": (lambda x: mpmath.besselk(0, x) if x > 0 else mpmath.nan, 1e-14),
    "modified_bessel_k1": (lambda x: mpmath.besselk(1, x) if x > 0 else mpmath.nan, 1e-14),
    "scaled_modified_bessel_k0": (lambda x: mpmath.besselk(0, x) * mpmath.exp(x) if x > 0 else mpmath.nan, 1e-14),
    "scaled_modified_bessel_k1": (lambda x: mpmath.besselk(1, x) * mpmath.exp(x) if x > 0 else mpmath.nan, 1e-14),
    "airy_ai": (lambda x: mpmath.airyai(x), 1e-11),
    "spherical_bessel_j0": (lambda x: mpmath.sin(x) / x if x != 0 else 1, 1e-15),
    "digamma": (lambda x: mpmath.digamma(x), 1e-13),
    "gammaln": (lambda x: mpmath.log(abs(mpmath.gamma(x))), 1e-12),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_against_exact_values(name):
    f, tol = CASES[name]
    xs = POINTS if name not in ("digamma", "gammaln") else POINTS[np.abs(POINTS - np.round(POINTS)) > 1e-3]
    got = getattr(ember.special, name)(ember.tensor(xs)).numpy()
    assert _worst(got, _exact(f, xs)) < tol


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_polygamma_against_exact_values(n):
    xs = np.array([0.1, 0.5, 1.0, 2.5, 7.0, 30.0, 1e3, -0.5, -2.3, -7.75])
    got = ember.polygamma(n, ember.tensor(xs)).numpy()
    assert _worst(got, _exact(lambda x: mpmath.polygamma(n, x), xs)) < 1e-11


def test_zeta_and_incomplete_gammas_against_exact_values():
    x = np.array([2.0, 3.5, 1.5, 10.0, 2.0, 4.0])
    q = np.array([1.0, 0.5, 20.0, 3.0, -2.5, -0.25])
    got = ember.special.zeta(ember.tensor(x), ember.tensor(q)).numpy()
    want = np.array([float(mpmath.zeta(a, b)) for a, b in zip(x, q)])
    assert _worst(got, want) < 1e-12
    a = np.array([0.5, 3.0, 100.0, 1e-3, 50.0, 13437.7, 2e6])
    z = np.array([0.3, 10.0, 90.0, 1e-3, 51.0, 13437.7, 2.001e6])
    from scipy import special as sp
    np.testing.assert_allclose(ember.special.gammainc(ember.tensor(a), ember.tensor(z)).numpy(), sp.gammainc(a, z),
                               rtol=1e-9)
    np.testing.assert_allclose(ember.special.gammaincc(ember.tensor(a), ember.tensor(z)).numpy(),
                               sp.gammaincc(a, z), rtol=1e-8)


def test_limits_at_the_infinities():
    inf = math.inf
    x = ember.tensor([inf, -inf], dtype=ember.float64)
    s = ember.special
    assert s.bessel_j0(x).tolist() == [0.0, 0.0] and s.bessel_j1(x).tolist() == [0.0, 0.0]
    assert s.bessel_y0(x)[0].item() == 0.0 and math.isnan(s.bessel_y0(x)[1].item())
    assert s.modified_bessel_i0(x).tolist() == [inf, inf] and s.modified_bessel_i1(x).tolist() == [inf, -inf]
    assert s.i0e(x).tolist() == [0.0, 0.0] and s.airy_ai(x).tolist() == [0.0, 0.0]
    assert s.modified_bessel_k0(x)[0].item() == 0.0 and s.spherical_bessel_j0(x).tolist() == [0.0, 0.0]
    assert ember.polygamma(2, ember.tensor([inf], dtype=ember.float64)).item() == 0.0
    assert s.zeta(ember.tensor([1e20, inf], dtype=ember.float64), 2.0).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name,derivative", [
    ("i0", lambda x: mpmath.besseli(1, x)),
    ("i0e", lambda x: mpmath.diff(lambda t: mpmath.besseli(0, t) * mpmath.exp(-abs(t)), x)),
    ("i1", lambda x: mpmath.diff(lambda t: mpmath.besseli(1, t), x)),
    ("i1e", lambda x: mpmath.diff(lambda t: mpmath.besseli(1, t) * mpmath.exp(-abs(t)), x)),
    ("digamma", lambda x: mpmath.polygamma(1, x)),
    ("gammaln", lambda x: mpmath.digamma(x)),
    ("erfinv", lambda x: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(mpmath.erfinv(x) ** 2)),
    ("ndtri", lambda x: mpmath.sqrt(2 * mpmath.pi) * mpmath.exp(mpmath.erfinv(2 * x - 1) ** 2)),
])
def test_gradients_are_the_derivatives(name, derivative):
    xs = np.array([0.05, 0.3, 0.45, 0.7, 0.9]) if name in ("erfinv", "ndtri") else \
        np.array([-7.5, -1.3, 0.2, 1.0, 3.7, 25.0, 40.0])
    if name in ("digamma", "gammaln"):
        xs = xs[xs > 0]
    x = ember.tensor(xs).requires_grad_()
    getattr(ember.special, name)(x).sum().backward()
    assert _worst(x.grad.numpy(), _exact(derivative, xs)) < 1e-10


def test_float32_inputs_compute_in_float64_and_round():
    xs = np.array([0.5, 3.0, 15.0, 40.0], dtype=np.float32)
    got = ember.special.bessel_j1(ember.tensor(xs))
    assert got.dtype == ember.float32
    np.testing.assert_array_equal(got.numpy(), ember.special.bessel_j1(ember.tensor(xs.astype(np.float64))).numpy()
                                  .astype(np.float32))


@pytest.mark.parametrize("name,exact", [
    ("chebyshev_polynomial_t", lambda n, x: mpmath.chebyt(n, x)),
    ("chebyshev_polynomial_u", lambda n, x: mpmath.chebyu(n, x)),
    ("hermite_polynomial_h", lambda n, x: mpmath.hermite(n, x)),
    ("hermite_polynomial_he", lambda n, x: mpmath.hermite(n, x / mpmath.sqrt(2)) * mpmath.mpf(2) ** (-n / 2.0)),
    ("laguerre_polynomial_l", lambda n, x: mpmath.fsum(mpmath.binomial(n, k) * (-x) ** k / mpmath.factorial(k)
                                                        for k in range(n + 1))),
    ("legendre_polynomial_p", lambda n, x: mpmath.legendre(n, x)),
    ("shifted_chebyshev_polynomial_t", lambda n, x: mpmath.chebyt(n, 2 * x - 1)),
])
def test_polynomials_against_their_definitions(name, exact):
    xs = np.array([-0.9, -0.3, 0.2, 0.75, 1.0, 1.4])
    ns = np.array([0, 1, 2, 5, 9, 20])
    x, n = np.meshgrid(xs, ns)
    got = getattr(ember.special, name)(ember.tensor(x.ravel()), ember.tensor(n.ravel())).numpy()
    want = np.array([float(exact(int(b), mpmath.mpf(float(a)))) for a, b in zip(x.ravel(), n.ravel())])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_polynomials_compile_into_the_graph():
    f = ember.compile(lambda x, n: ember.special.legendre_polynomial_p(x * 0.5, n) + 1.0)
    x, n = ember.rand(64) * 2 - 1, ember.full((64,), 7.0)
    f(x, n)
    got = f(x, n)
    assert f._stats()["compiled_calls"] >= 1
    np.testing.assert_array_equal(got.numpy(), (ember.special.legendre_polynomial_p(x * 0.5, n) + 1.0).numpy())


@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"])
def test_bessel_ops_compile_and_match_eager(name):
    fn = getattr(ember.special, name)
    f = ember.compile(lambda x: fn(x * 2.0) * 3.0 + 1.0)
    x = ember.rand(256, dtype=ember.float64) * 20
    f(x)
    got = f(x)
    assert f._stats()["compiled_calls"] >= 1
    np.testing.assert_array_equal(got.numpy(), (fn(x * 2.0) * 3.0 + 1.0).numpy())


@pytest.mark.parametrize("name,derivative", [
    ("bessel_j0", lambda x: -mpmath.besselj(1, x)),
    ("bessel_j1", lambda x: mpmath.diff(lambda t: mpmath.besselj(1, t), x)),
    ("bessel_y0", lambda x: -mpmath.bessely(1, x)),
    ("bessel_y1", lambda x: mpmath.diff(lambda t: mpmath.bessely(1, t), x)),
])
def test_bessel_gradients_are_the_derivatives(name, derivative):
    """(PyTorch 1.13 has none: ember's are J0' = -J1, J1' = J0 - J1/x, ...)"""
    xs = np.array([0.0, 0.2, 1.0, 3.7, 25.0, 40.0]) if name.endswith("j0") or name.endswith("j1") else \
        np.array([0.2, 1.0, 3.7, 25.0, 40.0])
    x = ember.tensor(xs).requires_grad_()
    getattr(ember.special, name)(x).sum().backward()
    assert _worst(x.grad.numpy(), _exact(derivative, xs)) < 1e-13
