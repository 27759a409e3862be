"""Fused nodes that run on the interpreter (no LLVM, EMBER_BACKEND=interp, or
too small for a kernel: EMBER_JIT_MIN_ELEMENTS) run an elementwise region in
one pass over blocks of its elements with the eager kernels' own loops
(runtime/cpu/ew_chain.c), so their results are eager's bit for bit; regions
that are not such a chain run op by op. Each case here is checked against
eager, bit for bit, on both ways of running."""

import numpy as np
import pytest

import ember

HAS_LLVM = ember.compiler.has_llvm()


@pytest.fixture(params=["interp", "llvm-small"])
def interpreted(request, monkeypatch):
    """Every fused node on the interpreter: the interp backend, or LLVM with
    every node under its EMBER_JIT_MIN_ELEMENTS cut."""
    if request.param == "interp":
        monkeypatch.setenv("EMBER_BACKEND", "interp")
    elif not HAS_LLVM:
        pytest.skip("a build without LLVM has only the interpreter")
    else:
        monkeypatch.setenv("EMBER_BACKEND", "llvm")
        monkeypatch.setenv("EMBER_JIT_MIN_ELEMENTS", str(10**9))
    return request.param


def bits_equal(a, b):
    a, b = a.numpy(), b.numpy()
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check(fn, *args, calls=3):
    cf = ember.compile(fn)
    want = fn(*args)
    want = want if isinstance(want, tuple) else (want,)
    for _ in range(calls):
        got = cf(*args)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert bits_equal(g, w), (fn.__name__, g, w)
    stats = cf._stats()
    assert stats["compiled_calls"] >= calls - 1 and stats["eager_calls"] == 0, stats
    return cf


def kernels_text(cf):
    (spec,) = cf._specializations()
    return spec["kernels"]


def chain(a, b, c, d):
    return ((a + b) * c - d).relu() * 0.5 + a


@pytest.mark.parametrize("n", [1, 8, 255, 256, 257, 100_003])
def test_float_chain_sizes(interpreted, n):
    """Sizes around the block (256) and one that the thread pool splits."""
    ember.manual_seed(n)
    args = [ember.randn(n) for _ in range(4)]
    with ember.no_grad():
        cf = check(chain, *args)
    if interpreted == "llvm-small" and n > 1:
        assert "1 runs the eager loops in one pass" in kernels_text(cf), kernels_text(cf)


def test_dtypes_casts_and_masks(interpreted):
    """int64 arithmetic, a comparison's bool mask into where, casts widening
    and narrowing (a cast's result never lands on its input's buffer), a
    0-d constant of the function's and a float64 detour."""
    def f(i, x):
        j = i * 3 + 1
        y = x.double() * 1.5 - j.to(ember.float64)
        z = ember.where(y > 0, y, y * 0.25).float()
        return z + x.to(ember.float16).float(), j

    ember.manual_seed(1)
    i = ember.randint(-50, 50, (3, 300))
    x = ember.randn(3, 300)
    with ember.no_grad():
        check(f, i, x)


def test_region_results_and_inputs(interpreted):
    """A region returning an intermediate besides its last value, and one
    reading the same input in several steps and through a broadcast 0-d
    input."""
    def f(x, s):
        h = (x * s).tanh()
        return h, h * h + x, (x + x) - x

    ember.manual_seed(2)
    with ember.no_grad():
        check(f, ember.randn(40, 9), ember.tensor(0.7))


def test_not_chains_run_op_by_op(interpreted):
    """A partial broadcast, a reduction in the region and a transposed input
    are not chains: op by op, the same bits."""
    def partial(a, col):
        return (a + col).exp() * 2

    def reduced(a):
        return (a - a.sum(1, keepdim=True)).abs() + 1

    ember.manual_seed(3)
    a, col = ember.randn(16, 32), ember.randn(16, 1)
    with ember.no_grad():
        cf = check(partial, a, col)
        check(reduced, a)
        check(chain, a.t(), a.t(), a.t(), a.t())  # (not contiguous: the chain refuses it)
    if interpreted == "llvm-small":
        assert "0 run the eager loops in one pass" in kernels_text(cf), kernels_text(cf)


def test_integer_division_checks_stay(interpreted):
    """Integer division keeps eager's check for zero (the chain leaves such
    steps to the op-by-op path), and floats with zeros divide as eager."""
    def f(a, b):
        return (a + 1) // b * 2

    def g(x, y):
        return (x * 2) / y + 1

    a = ember.arange(12)
    with ember.no_grad():
        check(f, a, ember.arange(1, 13))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            ember.compile(f)(a, ember.arange(12))
        check(g, ember.randn(12), ember.tensor([0.0, -0.0] * 6))


def test_chains_in_training_match_eager(interpreted):
    """A training step's small updates (SGD with momentum over a 5-wide
    layer) run through chains and keep eager's parameters exactly."""
    def build():
        ember.manual_seed(4)
        m = ember.nn.Linear(7, 5)
        return m, ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step_of(m, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return step

    me, oe = build()
    mc, oc = build()
    eager_step, compiled_step = step_of(me, oe), ember.compile(step_of(mc, oc))
    for i in range(4):
        ember.manual_seed(100 + i)
        x, y = ember.randn(3, 7), ember.randn(3, 5)
        assert bits_equal(compiled_step(x, y), eager_step(x, y))
    for pc, pe in zip(mc.parameters(), me.parameters()):
        assert bits_equal(pc.detach(), pe.detach())
