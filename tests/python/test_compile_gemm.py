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


# A power-of-two scale of an operand folded into BLAS's alpha (canonicalize):
# every product and partial sum scales exactly, so the bits are eager's.
ALPHA_CASES = [
    ("scaled query", lambda q, k: (q * 0.125) @ k.transpose(-2, -1),
     lambda: (ember.randn(2, 3, 40, 16), ember.randn(2, 3, 40, 16))),
    ("divided key, epilogue", lambda q, k: (q @ (k / 8).transpose(-2, -1)).relu() + 1,
     lambda: (ember.randn(2, 3, 40, 16), ember.randn(2, 3, 40, 16))),
    ("negative, float64", lambda a, b: (-2 * a) @ b, lambda: (ember.randn(30, 20).double(), ember.randn(20, 50).double())),
    ("both operands", lambda a, b: (a * 4) @ (b * 0.5), lambda: (ember.randn(64, 32), ember.randn(32, 48))),
    ("matrix-vector", lambda a, v: (a * 0.25) @ v, lambda: (ember.randn(300, 30), ember.randn(30))),
    ("vector-vector", lambda a, v: (a * 0.25) @ v, lambda: (ember.randn(30), ember.randn(30))),
    ("layout too", lambda p, v: ((p * 0.5) @ v).transpose(1, 2).reshape(2, 16, 24).exp(),
     lambda: (ember.randn(2, 3, 16, 16), ember.randn(2, 3, 16, 8))),
]


@pytest.mark.parametrize("name,fn,make", ALPHA_CASES, ids=[c[0] for c in ALPHA_CASES])
def test_scale_folded_into_alpha_keeps_eager_bits(name, fn, make, each_backend):
    cf = compiled_equals_eager(fn, make)
    (spec,) = cf._specializations()
    assert "{alpha=c}, c a power of two" in spec["pass_report"], spec["pass_report"]
    assert "alpha=" in cf._graph(0) and " mul(" not in cf._graph(0) and " div(" not in cf._graph(0)


def test_alpha_with_nan_inf_and_no_fold_for_other_scales():
    a, b = ember.randn(50, 20), ember.randn(20, 30)
    a[1, 2], a[7, 0], b[3, 3] = float("nan"), float("inf"), float("-inf")

    def scaled(a, b):
        return (a * 0.5) @ b, (a * 3) @ b, (a / 3) @ b

    cf = ember.compile(scaled)
    with ember.no_grad():
        cf(a, b)
        for got, want in zip(cf(a, b), scaled(a, b)):
            bits_equal(got, want)
    assert cf._graph(0).count("alpha=") == 1, cf._graph(0)


def test_scaled_attention_training_step_matches_eager_and_pytorch():
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 3, 24, 8)).astype(np.float32) for _ in range(2)]

    def step(q, k):
        loss = ((q * 0.125) @ k.transpose(-2, -1)).softmax(-1).square().sum()
        loss.backward()
        return loss

    eager = [ember.tensor(a, requires_grad=True) for a in arrays]
    want = step(*eager)
    compiled = [ember.tensor(a, requires_grad=True) for a in arrays]
    cstep = ember.compile(step)
    cstep(*[ember.tensor(a, requires_grad=True) for a in arrays])  # traced
    got = cstep(*compiled)
    assert cstep._stats()["compiled_calls"] == 1 and "alpha=" in cstep._graph(0)
    bits_equal(got, want)
    for g, e in zip(compiled, eager):
        bits_equal(g.grad, e.grad)
    tl = [torch.tensor(a, requires_grad=True) for a in arrays]
    step(*tl)
    for g, t in zip(compiled, tl):
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
