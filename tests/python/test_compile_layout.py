"""The layout pass: contiguous() no consumer needs goes, and a batched
matmul whose result is permuted writes it in the order the permute reads,
so attention's `(att @ v).transpose(1, 2).reshape(b, t, c)` makes no copy.

The product comes from the same BLAS calls as eager's, written with a
leading dimension, so results keep eager's bits on both backends; graph
results stay contiguous, as eager's are.
"""


import numpy as np
import pytest
import torch

import ember
from conftest import bits_equal, compiled_equals_eager

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")
HAS_LLVM = ember.compiler.has_llvm()


def attention_output(p, v):
    b, h, t, _ = p.shape
    return (p @ v).transpose(1, 2).contiguous().reshape(b, t, h * v.shape[-1]) * 2


def attention(q, k, v):
    att = ((q @ k.transpose(-2, -1)) * 0.125).softmax(-1)
    b, h, t, d = q.shape
    return (att @ v).transpose(1, 2).reshape(b, t, h * d).relu()


def randn(*shape, dtype=None):
    t = ember.randn(*shape)
    return t.to(dtype) if dtype is not None else t


# (name, function, arguments)
CASES = [
    ("attention output", attention_output, lambda: (randn(2, 3, 16, 16), randn(2, 3, 16, 8))),
    ("attention", attention, lambda: (randn(2, 4, 32, 8), randn(2, 4, 32, 8), randn(2, 4, 32, 8))),
    ("float64", attention, lambda: (randn(2, 3, 8, 4, dtype=ember.float64),) * 3),
    ("one head", attention, lambda: (randn(2, 1, 16, 8), randn(2, 1, 16, 8), randn(2, 1, 16, 8))),
    ("one row", attention_output, lambda: (randn(2, 3, 1, 5), randn(2, 3, 5, 8))),
    ("empty batch", attention_output, lambda: (randn(0, 3, 4, 5), randn(0, 3, 5, 8))),
    ("empty inner dim", attention_output, lambda: (randn(2, 3, 4, 0), randn(2, 3, 0, 8))),
    # dtypes BLAS does not take: computed contiguously, then copied into the layout
    ("float16", attention_output, lambda: (randn(2, 3, 4, 5, dtype=ember.float16),
                                           randn(2, 3, 5, 8, dtype=ember.float16))),
    ("int64", attention_output, lambda: (ember.randint(-5, 5, (2, 3, 4, 5)), ember.randint(-5, 5, (2, 3, 5, 8)))),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_layout_keeps_eager_bits(name, fn, make, each_backend):
    cf = compiled_equals_eager(fn, make)
    (spec,) = cf._specializations()
    assert "matmul results written in the order their permute reads (1)" in spec["pass_report"], spec["pass_report"]
    assert "layout=[0,2,1,3]" in cf._graph(0)
    with ember.no_grad():
        args = make()
        out = cf(*args)
    assert out.is_contiguous()


def test_results_stay_contiguous_and_unlaid():
    """A product that is itself a result, or reaches one through a view,
    keeps the contiguous layout eager gives it (the pass does not look
    further: a reshape that eager copies counts as such a view too)."""
    def fn(a, b):
        p = a @ b
        return p, p.transpose(1, 2)

    cf = ember.compile(fn)
    a, b = ember.randn(2, 3, 4, 5), ember.randn(2, 3, 5, 6)
    with ember.no_grad():
        cf(a, b)
        got = cf(a, b)
    assert "layout" not in cf._specializations()[0]["pass_report"]
    for g, w in zip(got, fn(a, b)):
        bits_equal(g, w)
        assert g.stride() == w.stride()


def test_a_returned_contiguous_stays():
    def fn(x):
        return x.t().contiguous()

    cf = ember.compile(fn)
    x = ember.randn(5, 7)
    with ember.no_grad():
        cf(x)
        got = cf(x)
    assert got.is_contiguous() and "contiguous() no consumer needs" not in cf._specializations()[0]["pass_report"]
    bits_equal(got, fn(x))


@pytest.mark.skipif(not HAS_LLVM, reason="the arena and its plan are the LLVM backend's")
def test_reshape_of_the_laid_out_product_is_a_view(monkeypatch):
    """With the layout, a call allocates its result only: the product lives
    in the run's arena and the reshape is a view of it. Without the pass
    (the same pipeline less `layout`) the contiguous() copies: one more
    buffer of the product's size at the call's peak."""
    monkeypatch.setenv("EMBER_BACKEND", "llvm")
    monkeypatch.setenv("EMBER_JIT_MIN_ELEMENTS", "0")
    args = (randn(2, 3, 64, 64), randn(2, 3, 64, 32))

    def bytes_at_peak(cf):
        cf(*args)
        ember.reset_peak_memory_stats()
        before = ember.memory_stats()["in_use"]
        out = cf(*args)
        peak = ember.memory_stats()["peak_in_use"] - before
        bits_equal(out, attention_output(*args))
        return peak

    with ember.no_grad():
        laid = ember.compile(attention_output)
        plain = ember.compile(attention_output, passes=[p for p in ember.compiler.passes() if p != "layout"])
        laid_bytes, plain_bytes = bytes_at_peak(laid), bytes_at_peak(plain)
    assert laid._graph(0).count("contiguous(") == 0 and "layout=" in laid._graph(0)
    assert plain_bytes == laid_bytes + 2 * 3 * 64 * 32 * 4, (laid_bytes, plain_bytes)


def test_attention_training_step_matches_eager_and_pytorch():
    """The layout holds in a traced backward too (the gradients of the
    heads go back through transpose and reshape): the gradients from a
    compiled step equal eager's and PyTorch's."""
    rng = np.random.default_rng(1)
    b, t, h, d = 2, 24, 4, 8
    arrays = [rng.standard_normal((b, t, h * d)).astype(np.float32)]
    arrays += [rng.standard_normal((h * d, h * d)).astype(np.float32) * 0.2 for _ in range(4)]

    def step(x, wq, wk, wv, wo, attention=attention):
        q, k, v = ((x @ w).reshape(b, t, h, d).transpose(1, 2) for w in (wq, wk, wv))
        loss = (attention(q, k, v) @ wo).tanh().sum()
        loss.backward()
        return loss

    def leaves():
        return [ember.tensor(a, requires_grad=True) for a in arrays]

    eager = leaves()
    want = step(*eager)
    compiled = leaves()
    cstep = ember.compile(step)
    cstep(*leaves())  # traced
    got = cstep(*compiled)
    assert cstep._stats()["compiled_calls"] == 1
    graph = cstep._graph(0)
    # the forward's product and the backward's dq and dv (dk comes out of a
    # product transposed in its last two dims, which no layout gives)
    assert graph.count("layout=") == 3, graph
    bits_equal(got, want)
    for g, e in zip(compiled, eager):
        bits_equal(g.grad, e.grad)

    tl = [torch.tensor(a, requires_grad=True) for a in arrays]

    def torch_attention(q, k, v):
        att = ((q @ k.transpose(-2, -1)) * 0.125).softmax(-1)
        return (att @ v).transpose(1, 2).reshape(b, t, h * d).relu()

    step(*tl, attention=torch_attention)
    for g, w in zip(compiled, tl):
        np.testing.assert_allclose(g.grad.numpy(), w.grad.numpy(), rtol=1e-4, atol=1e-4)
