"""ember.special against torch.special, on ordinary values and the edges
(zeros, negatives, NaN, infinities)."""

import numpy as np
import pytest

import ember
from torchdiff import Arg, check

EDGES = np.array([-3.0, -1.0, -0.5, 0.0, 1e-7, 0.25, 0.5, 0.9, 1.0, 2.0, 7.5, np.nan, np.inf, -np.inf])


def vals(dtype="float32"):
    return Arg(EDGES, dtype)


@pytest.mark.parametrize("name", ["expit", "exp2", "expm1", "log1p", "erf", "sinc", "entr"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_functions(name, dtype):
    check(lambda m, x: getattr(m.special, name)(x), vals(dtype))


def test_logit_with_and_without_eps():
    p = Arg(np.array([0.0, 1e-9, 0.2, 0.5, 0.999, 1.0]), "float64")
    check(lambda m, x: m.special.logit(x), p)
    check(lambda m, x: m.special.logit(x, eps=1e-6), p)
    check(lambda m, x: m.logit(x) + x.logit(), p)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_family_is_zero_where_x_is_zero(name):
    x = Arg(np.array([0.0, 0.0, 0.0, 1.0, 2.0, -1.0, np.nan]), "float64")
    y = Arg(np.array([0.0, np.nan, np.inf, 0.5, 0.0, 3.0, 1.0]), "float64")
    check(lambda m, a, b: getattr(m.special, name)(a, b), x, y)
    check(lambda m, a: getattr(m.special, name)(a, 2.5), x)
    check(lambda m, b: getattr(m.special, name)(0.0, b), y)


def test_reductions_and_rounding():
    x = Arg(np.random.default_rng(0).standard_normal((3, 4)) * 3, "float32")
    check(lambda m, a: (m.special.logsumexp(a, 1), m.special.softmax(a, 0), m.special.log_softmax(a, 1)), x)
    check(lambda m, a: (m.special.round(a), m.special.round(a, decimals=1)), x)


def test_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([0.1, 0.4, 0.8, 0.95])  # (inside logit's domain: outside it PyTorch's gradient is NaN)
    for name in ("expit", "sinc", "entr", "logit", "xlogy"):
        grads = []
        for m in (ember, torch):
            x = m.tensor(a, requires_grad=True)
            f = getattr(m.special, name)
            (f(x, 3.0) if name == "xlogy" else f(x)).sum().backward()
            grads.append(x.grad.numpy())
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, err_msg=name)
