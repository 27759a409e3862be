"""Compiled kernels over operands read through a transpose or with a step.

A kernel whose operand walks the result's rows with a large stride (x.t())
runs in 32 x 32 tiles (codegen_llvm/kernel.c); one whose operand steps
along the row (x[:, ::2]) reads it with gathers. Either way the result is
eager's, bit for bit, on each backend, at sizes with partial tiles and
below a tile, and under sizes read at run time.
"""

import numpy as np
import pytest

import ember
from conftest import bits_equal, compiled_equals_eager

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def randn(*shape):
    return ember.randn(*shape)


CASES = [
    ("x.t() * 2 + 1, 200x300", lambda x: x.t() * 2 + 1, lambda: (randn(200, 300),)),
    ("x.t() * 2 + 1, 33x70 (partial tiles)", lambda x: x.t() * 2 + 1, lambda: (randn(33, 70),)),
    ("x.t() * 2 + 1, 20x70 (under a tile)", lambda x: x.t() * 2 + 1, lambda: (randn(20, 70),)),
    ("batched transpose, 3x40x50", lambda x: x.transpose(-1, -2).exp(), lambda: (randn(3, 40, 50),)),
    ("x + y.t() (one operand transposed)", lambda x, y: x * y.t() + x, lambda: (randn(96, 64), randn(64, 96))),
    ("permute(2, 0, 1)", lambda x: x.permute(2, 0, 1).tanh(), lambda: (randn(40, 6, 50),)),
    ("broadcast and transpose", lambda x, b: x.t() + b, lambda: (randn(64, 48), randn(64))),
    ("compare of a transpose (bool)", lambda x: (x.t() > 0.5) | (x.t() < -1), lambda: (randn(64, 80),)),
    ("int64 transpose", lambda x: x.t() * 3 - 1, lambda: (ember.randint(-9, 9, (48, 64)),)),
    ("x[1:, ::2] * 2", lambda x: x[1:, ::2] * 2, lambda: (randn(129, 256),)),
    ("x[:, ::3] + y", lambda x, y: x[:, ::3] + y, lambda: (randn(64, 99), randn(64, 33))),
    ("step and transpose", lambda x: x[::2].t().sigmoid(), lambda: (randn(128, 64),)),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_strided_operands_keep_eager_bits(name, fn, make, each_backend):
    cf = compiled_equals_eager(fn, make)
    with ember.no_grad():
        assert cf(*make()).is_contiguous()


@pytest.mark.skipif(not ember.compiler.has_llvm(), reason="a build without LLVM has only the interpreter")
def test_the_backend_says_which_kernels_run_in_tiles(monkeypatch):
    monkeypatch.setenv("EMBER_BACKEND", "llvm")
    cf = ember.compile(lambda x, y: (x.t() * 2, y * 2))
    with ember.no_grad():
        cf(randn(64, 96), randn(64, 96))
    (spec,) = cf._specializations()
    lines = [ln for ln in spec["kernels"].splitlines() if "ops over" in ln]
    assert len(lines) == 2, spec["kernels"]
    assert sum("in 32 x 32 tiles (an operand is read transposed)" in ln for ln in lines) == 1, spec["kernels"]


def test_transposed_kernel_under_run_time_sizes():
    """One template serves several sizes; each call equals eager."""
    cf = ember.compile(lambda x: x.t() * 2 + 1, dynamic=True)
    with ember.no_grad():
        for shape in [(64, 96), (65, 97), (128, 40), (33, 33)]:
            x = randn(*shape)
            bits_equal(cf(x), x.t() * 2 + 1)


def test_transposed_kernel_in_a_training_step():
    """Gradients through a transposed operand: compiled step equals eager."""
    def step(w, x):
        loss = ((x @ w).t() * 2 + w[:32, :1].t()).tanh().sum()
        loss.backward()
        return loss

    ember.manual_seed(0)
    w0, x = randn(64, 48), randn(32, 64)
    results = []
    for compiled in (False, True):
        w = w0.clone().requires_grad_()
        fn = ember.compile(step) if compiled else step
        for _ in range(3):
            w.grad = None
            loss = fn(w, x)
        results.append((loss.item(), w.grad.numpy().copy()))
    assert abs(results[0][0] - results[1][0]) <= 1e-4 * abs(results[0][0])
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-5)
