"""Fits the float32 erf of include/ember/ops_math.h (run it to re-derive the
coefficients; tests/c/test_ops_math.c checks the result's accuracy).

  |x| < 1:      erf(x) = x * P(x^2),          P of degree 6
  1 <= |x| < 4: erf(x) = 1 - exp(Q(|x| - 2.5)), Q of degree 11 (Q = log erfc)

Least squares on Chebyshev nodes in float64, weighted for relative error,
then printed as float32 Horner coefficients (highest degree first).
"""
import math

import numpy as np

erf = np.vectorize(math.erf)
erfc = np.vectorize(math.erfc)


def fit(x, y, deg, w):
    v = np.vander(x, deg + 1)
    c, *_ = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)
    return c


def cheb_nodes(a, b, n):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


x = cheb_nodes(1e-6, 1.0, 4000)
p = fit(x * x, erf(x) / x, 6, np.ones_like(x))
t = cheb_nodes(1.0, 4.0, 4000)
q = fit(t - 2.5, np.log(erfc(t)), 11, np.ones_like(t))
for name, c in (("P", p), ("Q", q)):
    print(name, ", ".join(f"{np.float32(v)!r}f".replace("np.float32(", "").replace(")", "")
                          for v in c))
