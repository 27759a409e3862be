"""GEMM epilogues: a matmul fused with the elementwise ops that consume it.

A Linear layer's bias, its activation and a residual add become one fused
node with the matmul inside (the fuse pass's report says "GEMM epilogue");
the LLVM backend applies them to each block of the product right after the
BLAS call that wrote it. The product comes from the same BLAS calls on the
same blocks as eager's matmul, so the compiled result has eager's bits, for
every shape the matmul kernel cuts differently (rows, column bands, whole
matrices of a batch, vectors, an empty inner dim).
"""

import os

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from conftest import bits_equal, compiled_equals_eager

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")
HAS_LLVM = ember.compiler.has_llvm()
LLVM_RUNS = HAS_LLVM and os.environ.get("EMBER_BACKEND", "llvm") == "llvm"


def linear_gelu_residual(x, w, b, r):
    return F.gelu(F.linear(x, w, b), approximate="tanh") + r


def bias_relu(a, b, bias):
    return (a @ b + bias).relu()


# (name, function, arguments): each compiles to one kernel holding the matmul
CASES = [
    ("linear, gelu, residual", linear_gelu_residual,
     lambda: (ember.randn(4, 64, 96), ember.randn(160, 96), ember.randn(160), ember.randn(4, 64, 160))),
    ("float64", linear_gelu_residual,
     lambda: (ember.randn(64, 96).double(), ember.randn(160, 96).double(), ember.randn(160).double(),
              ember.randn(64, 160).double())),
    # n > m: the product is cut into column bands, each handed over row by row
    ("column bands", bias_relu, lambda: (ember.randn(40, 64), ember.randn(64, 3000), ember.randn(3000))),
    # a batch of matrices, each a block; the bias broadcasts across the batch
    ("batched", bias_relu, lambda: (ember.randn(6, 3, 40, 32), ember.randn(6, 3, 32, 50), ember.randn(40, 1))),
    ("broadcast batch", bias_relu, lambda: (ember.randn(5, 70, 32), ember.randn(32, 40), ember.randn(5, 1, 40))),
    ("transposed operands", lambda a, b, c: (a.t() @ b.t()) * 0.5 - c,
     lambda: (ember.randn(64, 90), ember.randn(80, 64), ember.randn(90, 80))),
    # shapes the matmul kernel computes whole (vectors, an empty inner dim):
    # the epilogue then runs over the product afterwards
    ("matrix-vector", lambda a, v, c: (a @ v).sigmoid() + c, lambda: (ember.randn(5000, 30), ember.randn(30, 1),
                                                                      ember.randn(5000, 1))),
    ("empty inner dim", bias_relu, lambda: (ember.randn(70, 0), ember.randn(0, 60), ember.randn(60))),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_epilogue_kernel_with_eager_bits(name, fn, make, monkeypatch):
    monkeypatch.setenv("EMBER_JIT_MIN_ELEMENTS", "0")
    cf = compiled_equals_eager(fn, make)
    (spec,) = cf._specializations()
    assert "(1 GEMM epilogue)" in spec["pass_report"], spec["pass_report"]
    graph = cf._graph(0)
    assert graph.count("fused(") == 1 and graph.count("matmul(") == 1, graph
    assert graph.index("fused(") < graph.index("matmul("), graph  # the matmul is inside the region
    if LLVM_RUNS:
        assert "(a matmul and its epilogue, per block)" in spec["kernels"], spec["kernels"]
        assert "runs op by op" not in spec["kernels"], spec["kernels"]
    assert cf._stats()["compiled_calls"] == 2


def test_no_epilogue_when_the_product_is_used_elsewhere():
    def fn(a, b, bias):
        p = a @ b
        return (p + bias).relu(), p
    cf = ember.compile(fn)
    args = (ember.randn(64, 32), ember.randn(32, 48), ember.randn(48))
    with ember.no_grad():
        cf(*args)
        for got, want in zip(cf(*args), fn(*args)):
            bits_equal(got, want)
    assert "GEMM epilogue" not in cf._specializations()[0]["pass_report"]


def test_nan_and_inf_flow_through_the_epilogue():
    a = ember.randn(128, 16)
    a[3, 4] = float("nan")
    a[9, 0] = float("inf")
    b, bias = ember.randn(16, 64), ember.randn(64)
    bias[7] = float("-inf")
    cf = ember.compile(bias_relu)
    with ember.no_grad():
        cf(a, b, bias)
        bits_equal(cf(a, b, bias), bias_relu(a, b, bias))


@pytest.mark.skipif(not HAS_LLVM, reason="a build without LLVM has only the interpreter")
def test_backends_agree(monkeypatch):
    args = (ember.randn(4, 64, 96), ember.randn(160, 96), ember.randn(160), ember.randn(4, 64, 160))
    outs = []
    for backend in ("llvm", "interp"):
        monkeypatch.setenv("EMBER_BACKEND", backend)
        cf = ember.compile(linear_gelu_residual)
        with ember.no_grad():
            cf(*args)
            outs.append(cf(*args))
        assert cf._specializations()[0]["backend"] == backend
    bits_equal(outs[0], outs[1])


@pytest.mark.skipif(not LLVM_RUNS, reason="the LLVM backend's kernels (this run uses the interpreter)")
def test_profiled_runs_time_the_epilogue_node():
    cf = ember.compile(linear_gelu_residual)
    args = (ember.randn(4, 64, 96), ember.randn(160, 96), ember.randn(160), ember.randn(4, 64, 160))
    with ember.no_grad():
        cf(*args)
        with ember.compiler.profiling():
            got = cf(*args)
    bits_equal(got, linear_gelu_residual(*args))
    assert "fused of 4 ops -> f32[4,64,160], compiled kernel" in ember.compiler.profile_report(cf)


def test_training_step_with_epilogues_matches_eager_and_pytorch():
    """An MLP step: the forward's bias and activation, and the backward's
    products feeding elementwise ops, compile with epilogues."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((96, 40)).astype(np.float32)
    w1, b1 = rng.standard_normal((64, 40)).astype(np.float32) * 0.2, rng.standard_normal(64).astype(np.float32)
    w2, b2 = rng.standard_normal((10, 64)).astype(np.float32) * 0.2, rng.standard_normal(10).astype(np.float32)

    def step(x, w1, b1, w2, b2):
        h = F.gelu(F.linear(x, w1, b1), approximate="tanh")
        loss = (F.linear(h, w2, b2) + x[:, :10]).square().mean()
        loss.backward()
        return loss

    def leaves():
        return [ember.tensor(x0)] + [ember.tensor(a, requires_grad=True) for a in (w1, b1, w2, b2)]

    eager = leaves()
    want = step(*eager)
    cf = ember.compile(step)
    comp = leaves()
    cf(*comp)  # traced
    comp = leaves()
    got = cf(*comp)
    assert "GEMM epilogue" in cf._specializations()[0]["pass_report"]
    bits_equal(got, want)
    for c, e in zip(comp[1:], eager[1:]):
        bits_equal(c.grad, e.grad)
    tl = [torch.tensor(x0)] + [torch.tensor(a, requires_grad=True) for a in (w1, b1, w2, b2)]
    h = torch.nn.functional.gelu(torch.nn.functional.linear(tl[0], tl[1], tl[2]), approximate="tanh")
    (torch.nn.functional.linear(h, tl[3], tl[4]) + tl[0][:, :10]).square().mean().backward()
    for c, t in zip(comp[1:], tl[1:]):
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
