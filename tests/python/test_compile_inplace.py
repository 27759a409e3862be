"""In-place ops inside compiled functions: an update of an intermediate is
an SSA value; an update of an argument or a captured tensor (a buffer, a
running statistic, an accumulated gradient) is also written back after the
graph runs. Writes the graph could not model (through a view, into memory
another tensor of the function also sees) run the function eagerly."""

import numpy as np
import re

import pytest

import ember

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def run_both(fn, make, calls=4):
    """fn eagerly and compiled on fresh copies of the same inputs, `calls`
    times each; returns (eager results, compiled results, eager inputs,
    compiled inputs, the compiled function)."""
    cf = ember.compile(fn)
    ein, cin = make(), make()
    eres = [fn(*ein) for _ in range(calls)]
    cres = [cf(*cin) for _ in range(calls)]
    return eres, cres, ein, cin, cf


def assert_same(a, b):
    if isinstance(a, (list, tuple)):
        for u, v in zip(a, b):
            assert_same(u, v)
    else:
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def accumulate(x, buf):
    buf.add_(x)
    buf.mul_(0.5)
    y = x * 2
    y.add_(1)  # an intermediate: no write-back needed
    return y


def broadcast_and_cast(x, buf, row):
    buf.add_(row)      # [3, 4] += [4]
    buf.clamp_(-1.0, 2.0)
    x.copy_(buf.double() * 0.25)  # float64 into x, cast back to its float32
    return x.sum()


def fill_and_mask(x, m):
    x.masked_fill_(m, 0.0)
    x.mul_(3.0)
    m2 = ember.zeros(2, 3)
    m2.fill_(0.5)
    return x + m2


def index_put_input(x, idx, v):
    x[idx] = v          # an advanced index: index_put_ into x itself
    x[idx] += 1.0
    return x * 1.0


def returns_the_input(buf, x):
    buf.sub_(x)
    return buf


CASES = [
    ("accumulate", accumulate, lambda: (ember.ones(3), ember.zeros(3))),
    ("broadcast_and_cast", broadcast_and_cast,
     lambda: (ember.zeros(3, 4), ember.arange(12.0).reshape(3, 4) / 10, ember.ones(4) * 0.1)),
    ("fill_and_mask", fill_and_mask,
     lambda: (ember.arange(6.0).reshape(2, 3), ember.tensor([[True, False, True], [False] * 3]))),
    ("index_put_input", index_put_input,
     lambda: (ember.zeros(5, 2), ember.tensor([0, 3]), ember.tensor([[1.0, 2.0], [3.0, 4.0]]))),
    ("returns_the_input", returns_the_input, lambda: (ember.zeros(4), ember.ones(4))),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_inplace_updates_compile_with_write_backs(name, fn, make):
    eres, cres, ein, cin, cf = run_both(fn, make)
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))  # the inputs were updated the same way, call after call
    specs = cf._specializations()
    assert len(specs) == 1 and specs[0]["backend"] != "eager", specs[0]["reason"]
    assert cf._stats()["hits"] == 3


def test_returning_an_updated_input_returns_that_input():
    cf = ember.compile(returns_the_input)
    buf, x = ember.zeros(4), ember.ones(4)
    for _ in range(3):
        assert cf(buf, x) is buf
    assert buf.tolist() == [-3.0] * 4


def test_captured_tensors_are_written_back_and_versions_move():
    running = ember.zeros(3)
    grad = ember.ones(3)

    @ember.compile
    def step(x):
        running.mul_(0.9).add_(x * 0.1)   # a running statistic
        grad.zero_()                      # zero_grad(set_to_none=False)
        grad.add_(x)
        return running * 1.0

    v0 = running._version
    for k in range(4):
        step(ember.full((3,), float(k)))
    expect = 0.0
    for k in range(4):
        expect = expect * 0.9 + k * 0.1
    np.testing.assert_allclose(running.numpy(), [expect] * 3, rtol=1e-6)
    assert grad.tolist() == [3.0] * 3
    assert running._version > v0
    assert step._stats()["hits"] == 3


def aliasing_view_then_write(x):
    v = x[0]
    x.add_(1.0)
    return v * 2       # eagerly, v sees the write


def aliasing_write_through_view(x):
    x[0].mul_(5.0)
    return x + 0.0


def aliasing_intermediate_with_view(x):
    y = x * 2
    v = y[1]
    y.add_(1.0)
    return v + 0.0


ALIASING = [
    ("view_then_write", aliasing_view_then_write, lambda: (ember.arange(6.0).reshape(2, 3),)),
    ("write_through_view", aliasing_write_through_view, lambda: (ember.arange(6.0).reshape(2, 3),)),
    ("intermediate_with_view", aliasing_intermediate_with_view,
     lambda: (ember.arange(6.0).reshape(2, 3),)),
]


@pytest.mark.parametrize("name,fn,make", ALIASING, ids=[c[0] for c in ALIASING])
def test_aliased_writes_compile_and_match_eager(name, fn, make):
    """Writes into views, and views read after a write into their base, run
    compiled: the memory is one SSA value (as_strided_scatter for a write
    into a view, as_strided for a view read again), as PyTorch's
    functionalisation does."""
    eres, cres, ein, cin, cf = run_both(fn, make)
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))
    (spec,) = cf._specializations()
    assert spec["backend"] != "eager", spec["reason"]


def write_into_view_of_transposed_input(x):
    x[0] = 7.0   # x is a transposed argument: not contiguous, no memory as SSA
    return x * 2


def test_a_view_write_into_memory_no_contiguous_tensor_covers_runs_eagerly():
    eres, cres, ein, cin, cf = run_both(write_into_view_of_transposed_input,
                                        lambda: (ember.arange(6.0).reshape(2, 3).t(),))
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))
    (spec,) = cf._specializations()
    assert spec["backend"] == "eager"
    assert "no contiguous tensor of the function covers" in spec["reason"], spec["reason"]


def aliasing_view_before_write_unused_after(x):
    v = x[0] * 3       # the view is read before the write only
    x.add_(1.0)
    return v + x


def test_a_view_read_only_before_the_write_compiles():
    eres, cres, ein, cin, cf = run_both(aliasing_view_before_write_unused_after,
                                        lambda: (ember.arange(6.0).reshape(2, 3),))
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))
    (spec,) = cf._specializations()
    assert spec["backend"] != "eager", spec["reason"]


def test_the_same_tensor_passed_twice_runs_eagerly():
    @ember.compile
    def f(a, b):
        a.add_(b)
        return a * b
    t = ember.ones(3)
    for _ in range(3):
        f(t, t)
    assert t.tolist() == [8.0] * 3  # 1 -> 2 -> 4 -> 8, each call reading the written values
    (spec,) = f._specializations()
    assert spec["backend"] == "eager"


def aliasing_detached_input(x):
    d = x.detach()
    d.add_(1.0)        # writes x's memory through another tensor object
    return x * 2       # eagerly, x sees it


def test_a_write_through_an_alias_of_an_input_is_a_write_to_the_input():
    """x.detach().add_(...) (as p.data.add_ in a manual SGD step): an alias
    with the input's own geometry, written as the input itself."""
    eres, cres, ein, cin, cf = run_both(aliasing_detached_input, lambda: (ember.zeros(3),))
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))
    assert cf._stats()["compiled_calls"] >= 1 and not cf._stats()["fallbacks"]


def test_batchnorm_training_forward_compiles_with_running_stats_written_back():
    nn = ember.nn

    def make():
        ember.manual_seed(0)
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.Dropout(0.3))
    eager_m, m = make(), make()
    cm = ember.compile(m)
    x = ember.randn(2, 1, 6, 6)
    with ember.no_grad():
        for _ in range(4):
            ember.manual_seed(5)
            want = eager_m(x)
            ember.manual_seed(5)
            got = cm(x)
            assert_same(want, got)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_same(getattr(eager_m[1], name), getattr(m[1], name))
    assert [s["backend"] for s in cm._specializations()] != ["eager"]
    assert cm._stats()["hits"] == 3


# ---------------------------------------------------------------- results after an in-place update (issue 39, item 3)

RESULT_AFTER_UPDATE = {
    # the graph ended in `return %0, %0`: the result and the write-back one value, whose
    # memory the write-back took, so the result read the bytes from before the update
    "ema_clone": lambda e, x: (e.mul_(0.5).add_(x), e.clone())[1],
    "add_detach": lambda e, x: (e.add_(1), e.detach())[1],
    "times_one": lambda e, x: (e.add_(x), e * 1)[1],
    "neg_neg": lambda e, x: (e.add_(x), -(-e))[1],
    "zero_clone": lambda e, x: (e.add_(x), e.zero_(), e.clone())[2],
    "clamp_clone": lambda e, x: (e.add_(x).clamp_(max=2.5), e.clone())[1],
    "identity_view": lambda e, x: (e.add_(x), e.view(4))[1],
    "view": lambda e, x: (e.add_(x), e.view(2, 2))[1],
    "slice": lambda e, x: (e.add_(x), e[1:])[1],
    "itself": lambda e, x: (e.add_(x), e)[1],
    "two_results": lambda e, x: (e.add_(x), (e * 1, e.view(4)))[1],
}


@pytest.mark.parametrize("backend", ["llvm", "interp"])
@pytest.mark.parametrize("passes", [None, ["dce"]])
@pytest.mark.parametrize("name", sorted(RESULT_AFTER_UPDATE))
def test_a_result_after_an_in_place_update_has_the_new_value(name, passes, backend, monkeypatch):
    fn = RESULT_AFTER_UPDATE[name]
    if backend == "llvm" and not ember.compiler.has_llvm():
        pytest.skip("built without LLVM")
    monkeypatch.setenv("EMBER_BACKEND", backend)  # (read when a call compiles)
    cf = ember.compile(fn, passes=passes)
    e_state, c_state = ember.zeros(4), ember.zeros(4)
    for _ in range(5):
        x = ember.arange(4.0)
        want, got = fn(e_state, x), cf(c_state, x)
        assert_same(got, want)
        assert_same(c_state, e_state)
    # results that are views of the state in eager alias it compiled too
    e_state.add_(100.0)
    c_state.add_(100.0)
    assert_same(got, want)
    assert cf._stats()["compiled_calls"] >= 4


# Writes into views as real programs write them: each runs compiled and
# matches eager, results, inputs and gradients.
def masked_last_column(logits):
    logits[:, -1] = -1e9            # setitem into an input
    return logits.softmax(-1)


def rnn_buffer(x, w):
    out = ember.zeros(x.shape[0], 4, x.shape[1])
    h = x
    for t in range(4):
        h = (h @ w).tanh()
        out[:, t] = h               # a buffer the function made, filled by steps
    return out.sum(1)


def strided_and_column(x):
    x.view(-1)[::2].mul_(-1.0)      # every other element
    x.t()[1].add_(10.0)             # a column, through a transpose
    y = x[:, :2]                    # a view taken after the writes
    return y * 1.0


def view_kept_across_writes(x):
    head = x[0]                     # taken before the writes, read after each
    x.mul_(2.0)
    a = head + 0.0
    x[0, 1] = -3.0
    return a, head * 1.0


VIEW_WRITES = [
    ("masked_last_column", masked_last_column, lambda: (ember.arange(12.0).reshape(3, 4),)),
    ("rnn_buffer", rnn_buffer, lambda: (ember.arange(6.0).reshape(2, 3) / 6, ember.eye(3) * 0.5)),
    ("strided_and_column", strided_and_column, lambda: (ember.arange(12.0).reshape(3, 4),)),
    ("view_kept_across_writes", view_kept_across_writes, lambda: (ember.arange(6.0).reshape(2, 3),)),
]


@pytest.mark.parametrize("name,fn,make", VIEW_WRITES, ids=[c[0] for c in VIEW_WRITES])
def test_writes_into_views_run_compiled(name, fn, make):
    with ember.no_grad():
        eres, cres, ein, cin, cf = run_both(fn, make)
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))
    stats = cf._stats()
    assert stats["eager_calls"] == 0 and stats["compiled_calls"] >= 2, stats["fallbacks"]
    graph = cf._graph(0)
    assert "as_strided_scatter" in graph or name == "view_kept_across_writes", graph


def test_view_writes_in_a_training_step_match_eager_gradients():
    """A recurrent step filling a buffer by setitem, with backward and SGD
    in the graph: eager's loss, gradients and parameters."""
    def build():
        ember.manual_seed(0)
        w = (ember.randn(3, 3) * 0.5).requires_grad_()
        return w, ember.optim.SGD([w], lr=0.1)

    def step_of(w, opt):
        def step(x):
            opt.zero_grad()
            loss = (rnn_buffer(x, w) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        return step

    we, oe = build()
    wc, oc = build()
    se, sc = step_of(we, oe), ember.compile(step_of(wc, oc))
    for i in range(4):
        ember.manual_seed(10 + i)
        x = ember.randn(2, 3)
        assert_same(sc(x), se(x))
        assert_same(wc.detach(), we.detach())
    stats = sc._stats()
    assert stats["eager_calls"] == 0 and stats["compiled_calls"] >= 2, stats["fallbacks"]


def test_a_write_into_a_view_of_an_input_is_done_in_its_memory():
    """logits[:, -1] = v on an argument: the scatter writes the column into
    the argument's own memory (a donation, as kernels make), not into a
    copy of it that is then copied back; results and the argument as
    eager's, also when the argument is passed twice."""
    def f(logits):
        logits[:, -1] = -1e9
        return logits.softmax(-1)

    def g(p, q):
        p[0] = 5.0
        return p + q

    eres, cres, ein, cin, cf = run_both(f, lambda: ((ember.arange(1024.0).reshape(64, 16) % 7) / 3,))
    assert_same(eres, cres)
    assert_same(list(ein), list(cin))
    (spec,) = cf._specializations()
    if spec["backend"] == "llvm":
        assert "a write into a view, done in place in graph input 0" in spec["kernels"], spec["kernels"]
    cg = ember.compile(g)
    for _ in range(3):
        cg(ember.zeros(3), ember.zeros(3))
    x, xe = ember.zeros(3), ember.zeros(3)
    assert_same(cg(x, x), g(xe, xe))  # (one tensor twice: no donation this call)
    assert_same(x, xe)


def step_compiles_as_eager(step):
    """step(w, x), a training step with backward, eagerly and compiled from
    the same seed: equal losses and gradients over 3 calls, all compiled."""
    def make():
        ember.manual_seed(0)
        return (ember.randn(4, 4) * 0.5).requires_grad_(), ember.randn(3, 4)

    we, xe = make()
    wc, xc = make()
    cf = ember.compile(step)
    for _ in range(3):
        we.grad = wc.grad = None
        le, lc = step(we, xe), cf(wc, xc)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
        np.testing.assert_allclose(wc.grad.numpy(), we.grad.numpy(), rtol=1e-5, atol=1e-6)
    stats = cf._stats()
    assert stats["eager_calls"] == 0 and stats["compiled_calls"] >= 2, stats["fallbacks"]


# In-place ops whose gradient reads their result (sigmoid_: g * y * (1 - y)).
# Autograd saves the written tensor; the tracer must give that saved tensor
# the value after the write, not the one before it, or the compiled
# gradient is computed from the pre-activation: silently wrong.
RESULT_GRAD_INPLACE = {
    "sigmoid_": lambda h: h.sigmoid_(),
    "tanh_": lambda h: h.tanh_(),
    "exp_": lambda h: h.mul_(0.1).exp_(),
    "sqrt_": lambda h: h.abs_().add_(0.5).sqrt_(),
    "rsqrt_": lambda h: h.abs_().add_(0.5).rsqrt_(),
    "reciprocal_": lambda h: h.abs_().add_(0.5).reciprocal_(),
    "relu_": lambda h: h.relu_(),
    "pow_": lambda h: h.abs_().add_(0.5).pow_(1.5),
}


@pytest.mark.parametrize("name", sorted(RESULT_GRAD_INPLACE))
def test_in_place_ops_differentiated_through_their_result_match_eager(name):
    op = RESULT_GRAD_INPLACE[name]

    def step(w, x):
        h = x @ w
        op(h)
        loss = ((h * 3.0 - 1.0) ** 2).sum()
        loss.backward()
        return loss.detach()

    step_compiles_as_eager(step)


# Writes through views of tensors in the autograd graph (PyTorch's
# CopySlices), and views read after their memory changed: compiled as eager.
VIEW_GRAD_WRITES = {
    "row scaled": lambda h, w: h[1].mul_(3),
    "column of a transpose": lambda h, w: h.t()[2].add_(w[0, :3]),
    "activation on a row": lambda h, w: h[2].sigmoid_(),
    "narrow copied into": lambda h, w: h.narrow(1, 1, 2).copy_(w[:3, :2] * 5),
    "base written, earlier view read": lambda h, w: h.mul_(2),
}


@pytest.mark.parametrize("name", sorted(VIEW_GRAD_WRITES))
def test_writes_through_views_in_a_training_step_compile_as_eager(name):
    write = VIEW_GRAD_WRITES[name]

    def step(w, x):
        h = x @ w
        early = h[1]
        write(h, w)
        loss = (h * h).sum() + (early * 3.0).sum()
        loss.backward()
        return loss.detach()

    step_compiles_as_eager(step)
