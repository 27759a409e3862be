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


# ---------------------------------------------------------------- compositions (issue 40, item 3)

import math  # noqa: E402

import ember.special as ES  # noqa: E402

_torch = pytest.importorskip("torch")


def _close(a, b, rtol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", ["erfc", "log_ndtr", "erfcx", "digamma", "psi", "gammaln"])
def test_special_compositions_match_pytorch_in_float64(name):
    x = np.array([-40., -10, -5.5, -3, -0.5, 1e-8, 0.3, 2.0, 3.5, 8.0, 30.0, 1e6])
    if name in ("digamma", "psi", "gammaln"):
        x = np.array([-2.5, -0.5, 1e-8, 0.1, 1.0, 2.0, 2.5, 7.9, 8.1, 30.0, 1e6])
    _close(getattr(ES, name)(ember.tensor(x)).numpy(), getattr(_torch.special, name)(_torch.tensor(x)).numpy(),
           1e-12)


def test_poles_and_domains():
    assert np.isinf(ES.gammaln(ember.tensor([0.0, -1.0, -2.0])).numpy()).all()
    d = ES.digamma(ember.tensor([0.0, -1.0, -2.0])).numpy()
    assert d[0] == -np.inf and np.isnan(d[1:]).all()  # (PyTorch's: -inf at 0, NaN at the negative integers)
    e = ES.erfinv(ember.tensor([-1.0, 1.0, 1.5, -2.0])).numpy()
    assert e[0] == -np.inf and e[1] == np.inf and np.isnan(e[2:]).all()
    n = ES.ndtri(ember.tensor([0.0, 1.0, -0.1])).numpy()
    assert n[0] == -np.inf and n[1] == np.inf and np.isnan(n[2])


def test_erfinv_and_ndtri_are_accurate_in_their_tails():
    # the inverses checked through erf/erfc themselves (PyTorch's float32
    # erfinv is Giles' approximation alone: 5e-4 off at 0.999999)
    y = np.array([-0.999999, -0.3, 1e-9, 0.5, 0.99, 0.9999999999, 1 - 1e-15])
    x = ES.erfinv(ember.tensor(y)).numpy()
    _close([math.erf(v) if abs(v) < 0.5 else math.copysign(1 - math.erfc(abs(v)), v) for v in x], y, 1e-15)
    _close([math.erfc(v) for v in x[y > 0.5]], 1 - y[y > 0.5], 1e-9)
    p = np.array([1e-300, 1e-20, 1e-5, 0.1, 0.5, 0.7, 0.999, 1 - 1e-12])
    z = ES.ndtri(ember.tensor(p)).numpy()
    _close(z, _torch.special.ndtri(_torch.tensor(p)).numpy(), 1e-12)
    _close([0.5 * math.erfc(-v / math.sqrt(2)) for v in z[:4]], p[:4], 1e-12)
    f = ES.erfinv(ember.tensor(np.float32([0.999999, -0.5, 0.25]))).numpy()
    _close([math.erfc(f[0]), math.erf(f[1]), math.erf(f[2])], [1 - np.float32(0.999999), -0.5, 0.25], 1e-5)


def test_ndtr_keeps_the_lower_tail():
    # PyTorch 1.13's ndtr is 0.5 (1 + erf(x / sqrt 2)), 0 at -10; this one
    # is 0.5 erfc(-x / sqrt 2): 7.6e-24 there, as it is
    v = ES.ndtr(ember.tensor([-10.0, 0.0, 2.0], dtype=ember.float64)).numpy()
    _close(v, [0.5 * math.erfc(10 / math.sqrt(2)), 0.5, 0.5 * math.erfc(-2 / math.sqrt(2))], 1e-13)


def test_multigammaln_and_gradients():
    _close(ES.multigammaln(ember.tensor([2.5, 3.0], dtype=ember.float64), 3).numpy(),
           _torch.special.multigammaln(_torch.tensor([2.5, 3.0], dtype=_torch.float64), 3).numpy(), 1e-12)
    x = ember.tensor([0.3, 1.5, 4.0, 12.0], dtype=ember.float64, requires_grad=True)
    ES.gammaln(x).sum().backward()
    _close(x.grad.numpy(), _torch.special.digamma(_torch.tensor([0.3, 1.5, 4.0, 12.0], dtype=_torch.float64)).numpy(),
           1e-10)
    y = ember.tensor([0.3, 1.5, 4.0, 12.0], dtype=ember.float64)
    _close(ES.polygamma(2, y).numpy(),
           _torch.special.polygamma(2, _torch.tensor([0.3, 1.5, 4.0, 12.0], dtype=_torch.float64)).numpy(), 1e-10)


def test_variable_and_distributed_sampler_spellings():
    from ember.autograd import Variable
    t = ember.ones(2)
    assert Variable(t) is t and isinstance(t, Variable) and not isinstance(3, Variable)
    assert Variable(ember.ones(2), requires_grad=True).requires_grad
    from ember.utils.data import DistributedSampler
    from ember.utils.data.distributed import DistributedSampler as D
    assert DistributedSampler is D
