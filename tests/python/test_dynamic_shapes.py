"""Dynamic shapes (issue 16, part 3): once a call differs from a
specialisation only in sizes, compiles read sizes at run time, and every
further size of the same graph runs that one machine code. Each new size is
traced again (so Python's branches on sizes are seen at every size) and
checked by exact-shape guards; compiled results are checked against eager
ones."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn

def stats(cf):
    return cf._stats()


def specs(cf):
    return cf._specializations()


def llvm_built():
    return specs_of_probe()[0]["backend"] == "llvm"


def specs_of_probe():
    f = ember.compile(lambda x: x * 2)
    f(ember.ones(4))
    return specs(f)


needs_code = pytest.mark.skipif(not llvm_built(), reason="ember was built without LLVM: no machine code to share")


def f32(rng, *shape):
    return ember.tensor(rng.standard_normal(shape).astype(np.float32))


def bias_gelu_softmax(x, b):
    return nn.functional.gelu(x * 2 + b).softmax(-1)


def close(got, want):
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


@needs_code
def test_sizes_share_code_after_one_recompile():
    rng = np.random.default_rng(0)
    cf = ember.compile(bias_gelu_softmax)
    b = f32(rng, 64)
    sizes = [8, 13, 21, 5, 34, 13]
    for n in sizes:
        x = f32(rng, n, 64)
        close(cf(x, b), bias_gelu_softmax(x, b))
    s = stats(cf)
    assert s["sizes_vary"] and s["dynamic"] is None
    assert "x dim 0 (8, then 13)" in s["varying"]
    assert (s["specializations"], s["code_objects"], s["eager_calls"]) == (5, 2, 0), s
    sp = specs(cf)
    assert not sp[0]["dynamic_sizes"] and sp[0]["shares_code_with"] == -1  # the first call's sizes, compiled in
    assert sp[1]["dynamic_sizes"] and sp[1]["shares_code_with"] == -1  # the template
    assert [p["shares_code_with"] for p in sp[2:]] == [1, 1, 1]
    assert "reading sizes at run time" in sp[1]["kernels"]


@needs_code
def test_dynamic_true_compiles_for_run_time_sizes_from_the_first_call():
    rng = np.random.default_rng(1)
    cf = ember.compile(bias_gelu_softmax, dynamic=True)
    b = f32(rng, 32)
    for n in (4, 9, 2, 17):
        x = f32(rng, 3, n, 32)
        close(cf(x, b), bias_gelu_softmax(x, b))
    s = stats(cf)
    assert (s["specializations"], s["code_objects"]) == (4, 1), s
    assert s["varying"].startswith("every dim")


@needs_code
def test_dynamic_false_compiles_every_size():
    rng = np.random.default_rng(2)
    cf = ember.compile(bias_gelu_softmax, dynamic=False)
    for n in (300, 400, 500):  # (rows of n: kernels of 2048 elements or more, with n in their code)
        x, b = f32(rng, 8, n), f32(rng, n)
        close(cf(x, b), bias_gelu_softmax(x, b))
    s = stats(cf)
    assert (s["specializations"], s["code_objects"], s["sizes_vary"]) == (3, 3, False), s


@needs_code
def test_mark_dynamic():
    rng = np.random.default_rng(3)
    cf = ember.compile(bias_gelu_softmax)
    x, b = f32(rng, 6, 16), f32(rng, 16)
    ember.compiler.mark_dynamic(x, 0)
    assert ember._C._dynamic_dims(x) == [0]
    close(cf(x, b), bias_gelu_softmax(x, b))
    assert specs(cf)[0]["dynamic_sizes"]
    assert "x dim 0 (mark_dynamic)" in stats(cf)["varying"]
    y = f32(rng, 11, 16)  # (not marked: the function already reads sizes at run time)
    close(cf(y, b), bias_gelu_softmax(y, b))
    assert stats(cf)["code_objects"] == 1
    with pytest.raises(IndexError, match="mark_dynamic: dim 2 is out of range"):
        ember.compiler.mark_dynamic(x, 2)
    never = ember.compile(bias_gelu_softmax, dynamic=False)
    never(x, b)
    assert not specs(never)[0]["dynamic_sizes"]


@needs_code
def test_sizes_0_and_1():
    """Sizes 0 and 1 are never taken for a varying size (a dim of 1
    broadcasts and coalesces away), but give right answers whatever code
    they run."""
    rng = np.random.default_rng(4)
    b = f32(rng, 1, 40)
    cf = ember.compile(lambda x, b: (x * 3).exp() - b)
    for n in (1, 0, 7, 1):
        x = f32(rng, n, 40)
        close(cf(x, b), (x * 3).exp() - b)
    s = stats(cf)
    assert not s["sizes_vary"], s  # 1 -> 0 -> 7: no size-only change between sizes of 2 or more
    x = f32(rng, 9, 40)
    close(cf(x, b), (x * 3).exp() - b)
    s = stats(cf)
    assert s["sizes_vary"] and s["varying"] == "x dim 0 (7, then 9)", s
    assert specs(cf)[-1]["dynamic_sizes"]


def branchy(x):
    # the graph depends on a relation between sizes: square inputs take
    # another branch, so a shape relation that held when traced (two dims
    # equal) and breaks later must give a new trace, not a wrong answer
    if x.shape[0] == x.shape[1]:
        return x + x.transpose(0, 1)
    return x * 2


@needs_code
def test_a_shape_relation_that_breaks_retraces():
    rng = np.random.default_rng(5)
    cf = ember.compile(branchy)
    for shape in [(4, 4), (6, 6), (9, 9), (6, 7), (9, 8), (5, 5)]:
        x = f32(rng, *shape)
        close(cf(x), branchy(x))
    assert stats(cf)["eager_calls"] == 0


def test_explain_names_the_varying_dims_and_shared_code():
    rng = np.random.default_rng(6)
    cf = ember.compile(bias_gelu_softmax)
    b = f32(rng, 16)
    cf(f32(rng, 3, 16), b)
    e = ember.compiler.explain(cf, f32(rng, 3, 16), b, print_report=False)
    assert "dynamic shapes (dynamic=None): off" in e.text
    cf(f32(rng, 5, 16), b)
    e = ember.compiler.explain(cf, f32(rng, 8, 16), b, print_report=False)
    assert "sizes read at run time since x dim 0 (3, then 5) varied" in e.text, e.text
    if llvm_built():
        assert "runs the machine code of specialisation 1" in e.text, e.text
        assert "specialisation 1 runs for 2 size sets" in e.text


@needs_code
def test_cache_limit_counts_machine_code_not_sizes():
    """New sizes that share the template's code do not use up the cache;
    graphs that need code of their own still stop at the limit."""
    rng = np.random.default_rng(7)
    cf = ember.compile(lambda x: x.tanh() * 2, cache_limit=2)
    for n in range(2, 14):
        x = f32(rng, n, 8)
        close(cf(x), x.tanh() * 2)
    s = stats(cf)
    assert (s["specializations"], s["code_objects"], s["eager_calls"]) == (12, 2, 0), s


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln(x)).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(-1)
        return x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


@needs_code
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(2, 6), st.integers(2, 24)), min_size=3, max_size=6))
def test_batch_sizes_and_sequence_lengths(shapes):
    """A sequence model over random (batch, length) pairs, compiled against
    eager, with at most two machine codes."""
    ember.manual_seed(0)
    model = Attention()
    cf = ember.compile(model)
    rng = np.random.default_rng(8)
    with ember.no_grad():
        for b, t in shapes:
            x = f32(rng, b, t, 32)
            np.testing.assert_allclose(cf(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
    assert stats(cf._compiled)["code_objects"] <= 2, stats(cf._compiled)


@needs_code
def test_training_over_a_loader_with_varying_batches_matches_eager():
    """ember.compile(model) in an ordinary loop (backward and the optimizer
    outside): batch sizes change every few steps; the losses and weights
    are eager's, and two machine codes serve every size (forward and
    backward)."""
    def make():
        ember.manual_seed(0)
        return nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 5))
    m1, m2 = make(), make()
    cm = ember.compile(m1)
    o1, o2 = ember.optim.AdamW(m1.parameters(), lr=1e-2), ember.optim.AdamW(m2.parameters(), lr=1e-2)
    rng = np.random.default_rng(9)
    for step, n in enumerate([16, 16, 16, 5, 16, 16, 9, 30, 5, 16, 12, 2]):
        x, y = f32(rng, n, 20), ember.tensor(rng.integers(0, 5, n))
        losses = []
        for model, opt in ((cm, o1), (m2, o2)):
            ember.manual_seed(step)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-5, abs=1e-6), (step, losses)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p1.numpy(), p2.numpy(), rtol=1e-5, atol=1e-6)
    s = stats(cm._compiled)
    assert s["code_objects"] == 2 and s["eager_calls"] == 0, s
    assert specs(cm._compiled)[-1]["backward"], "the instances run compiled backwards too"
