"""The autograd engine's behaviour, against PyTorch where PyTorch defines
it: which tensors require grad, accumulation, retain_graph, grad mode,
autograd.grad and higher derivatives, in-place ops inside graphs and the
version-counter errors, and that graphs are freed."""

import gc

import numpy as np
import pytest
import torch

import ember


def both(fn):
    """fn(m) run with ember and with torch; returns (ember result, torch result)."""
    return fn(ember), fn(torch)


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b),
                               rtol=tol, atol=tol)


def vals(m, shape=(3, 4), seed=0, rg=True, dtype=None):
    t = m.tensor(np.random.default_rng(seed).standard_normal(shape),
                 dtype=dtype or m.float32)
    return t.requires_grad_() if rg else t


# ---- requires_grad, leaves, grad_fn ----

def test_flags_propagate_like_torch():
    def f(m):
        x, c = vals(m), vals(m, seed=1, rg=False)
        y = x * c
        z = c + 1
        return (x.is_leaf, x.requires_grad, x.grad_fn is None, y.is_leaf, y.requires_grad,
                y.grad_fn.name(), z.requires_grad, z.is_leaf, (x > 0).requires_grad,
                x.argmax().requires_grad, x.detach().requires_grad, x.detach().is_leaf)
    e, t = both(f)
    assert e == t


def test_only_float_tensors_can_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        ember.zeros(2, dtype=ember.int64, requires_grad=True)


def test_non_leaf_cannot_stop_requiring_grad():
    x = vals(ember)
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False


def test_factories_take_requires_grad():
    for t in (ember.zeros(2, 3, requires_grad=True), ember.ones(2, requires_grad=True),
              ember.randn(4, requires_grad=True), ember.tensor([1.0], requires_grad=True),
              ember.full((2,), 3.0, requires_grad=True), ember.zeros_like(ember.ones(2), requires_grad=True)):
        assert t.requires_grad and t.is_leaf


def test_repr_shows_history():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert repr((x * 2).sum()) == "tensor(6., grad_fn=<SumBackward0>)"


def test_next_functions_and_accumulate_grad():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3).exp()
    (mul, nr), = y.grad_fn.next_functions
    assert mul.name() == "MulBackward0" and nr == 0
    acc, _ = mul.next_functions[0]
    assert acc.name() == "AccumulateGrad" and acc.variable is x
    assert mul.next_functions[1][0] is None  # the constant 3


# ---- backward ----

def test_grad_accumulates_across_backwards():
    def f(m):
        x = vals(m)
        for k in range(3):
            ((x * x).sum() * (k + 1)).backward()
        return x.grad
    close(*both(f))


def test_backward_on_shared_subexpressions():
    def f(m):
        x = vals(m)
        a = x.tanh()
        b = a * a + a.exp() - (a @ a.t()).sum(0, keepdim=True).t()
        b.sum().backward()
        return x.grad
    close(*both(f), tol=1e-5)


def test_backward_with_gradient_argument():
    def f(m):
        x = vals(m)
        y = x.sin()
        y.backward(m.ones(3, 4) * 0.5)
        return x.grad
    close(*both(f))


def test_backward_of_non_scalar_needs_a_gradient():
    x = vals(ember)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="shape"):
        (x * 2).backward(ember.ones(4))


def test_backward_on_a_tensor_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.ones(2).sum().backward()


def test_graph_freed_unless_retained():
    x = vals(ember)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    ref = vals(torch)
    yt = (ref.exp() * ref).sum()
    yt.backward(retain_graph=True)
    yt.backward()
    close(x.grad, ref.grad)


def test_backward_through_a_leaf_itself():
    x = ember.tensor(2.0, requires_grad=True)
    x.backward()
    assert x.grad.item() == 1.0


def test_integer_outputs_stop_the_gradient():
    def f(m):
        x = vals(m)
        i = x.argmax(1)
        y = x.gather(1, i.unsqueeze(1)).sum() + x.sum() * (x > 0).sum()
        y.backward()
        return x.grad
    close(*both(f))


def test_multiple_outputs_of_split_and_unbind():
    def f(m):
        x = vals(m, (4, 6))
        a, b, c = x.split(2, dim=1)
        p, q, r, s = x.unbind(0)
        (a * 2 + c.exp()).sum().backward(retain_graph=True)
        (p * q - s).sum().backward()
        return x.grad
    close(*both(f))


def test_max_with_dim_sends_gradient_to_the_index():
    def f(m):
        x = m.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
        v, i = x.max(1)
        (v * m.tensor([1.0, 2.0])).sum().backward()
        return x.grad
    close(*both(f))


def test_amax_shares_gradient_among_ties():
    def f(m):
        x = m.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
        x.amax(1).sum().backward()
        return x.grad
    close(*both(f))


def test_mixed_dtypes():
    def f(m):
        x = vals(m, dtype=m.float64)
        w = vals(m, (4,), seed=1)
        y = (x * w).sum() + (w.double() ** 2).sum()
        y.backward()
        return x.grad, w.grad, x.grad.dtype == m.float64, w.grad.dtype == m.float32
    (ex, ew, *ed), (tx, tw, *td) = both(f)
    close(ex, tx)
    close(ew, tw)
    assert ed == td == [True, True]


def test_long_chain_frees_without_recursion():
    x = ember.ones(1, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.item() == 1.0
    del y
    gc.collect()
    assert ember._C._node_live_count() <= 1  # at most x's AccumulateGrad, freed with x
    del x
    assert ember._C._node_live_count() == 0


def test_graphs_do_not_leak():
    base = ember._C._node_live_count()
    x = vals(ember)
    for _ in range(3):
        loss = (x.relu() @ x.t()).softmax(1).log().sum()
        loss.backward()
    del loss
    del x
    gc.collect()
    assert ember._C._node_live_count() == base


# ---- grad mode ----

def test_no_grad_context_and_decorator():
    x = vals(ember)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled()

    @ember.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_no_grad_restores_after_exception():
    with pytest.raises(ValueError):
        with ember.no_grad():
            raise ValueError
    assert ember.is_grad_enabled()


def test_set_grad_enabled_as_function_and_context():
    x = vals(ember)
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        ember.set_grad_enabled(True)
    with ember.inference_mode():
        assert not (x * 2).requires_grad


def test_detach_shares_memory():
    x = vals(ember)
    d = x.detach()
    assert not d.requires_grad and d.data_ptr() == x.data_ptr()
    assert x.data.data_ptr() == x.data_ptr()


# ---- autograd.grad, higher order ----

def test_autograd_grad_second_and_third_derivatives():
    def f(m):
        x = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = (x ** 3 + x.sin()).sum()
        g, = m.autograd.grad(y, x, create_graph=True)
        h, = m.autograd.grad(g.sum(), x, create_graph=True)
        k, = m.autograd.grad(h.sum(), x)
        return g, h, k, x.grad is None
    (eg, eh, ek, en), (tg, th, tk, tn) = both(f)
    close(eg, tg)
    close(eh, th)
    close(ek, tk)
    assert en and tn


def test_autograd_grad_of_intermediate_and_unused():
    x = vals(ember)
    h = x.exp()
    y = (h * 3).sum()
    w = vals(ember, seed=3)
    gh, gw = ember.autograd.grad(y, [h, w], allow_unused=True)
    close(gh, np.full((3, 4), 3.0))
    assert gw is None
    with pytest.raises(RuntimeError, match="not have been used"):
        ember.autograd.grad((x * 2).sum(), [x, w])


def test_gradient_penalty_double_backward_matches_torch():
    def f(m):
        w = vals(m, (4, 3), seed=1)
        x = vals(m, (5, 4), seed=2)
        out = (x @ w).tanh().sum()
        gx, = m.autograd.grad(out, x, create_graph=True)
        penalty = (gx.norm(dim=1) - 1).pow(2).mean()
        penalty.backward()
        return w.grad
    close(*both(f), tol=1e-5)


# ---- in-place ----

def test_inplace_ops_are_differentiated():
    def f(m):
        x = vals(m)
        w = vals(m, (4,), seed=1)
        y = x * 1
        y.add_(w)
        y.mul_(w)  # needs y's value before the write: kept for it
        y.sub_(x, alpha=2)
        y.clamp_(max=1.5)
        y.exp_()  # saves its result, so it comes last
        y.sum().backward()
        return x.grad, w.grad
    (ex, ew), (tx, tw) = both(f)
    close(ex, tx, 1e-5)
    close(ew, tw, 1e-5)


def test_inplace_setitem_with_advanced_index():
    def f(m):
        x = vals(m)
        v = vals(m, (2, 4), seed=1)
        y = x * 2
        y[m.tensor([0, 2])] = v
        (y * y).sum().backward()
        return x.grad, v.grad
    (ex, ev), (tx, tv) = both(f)
    close(ex, tx)
    close(ev, tv)


def test_modified_saved_tensor_is_an_error():
    for m in (ember, torch):
        x = vals(m)
        y = x.sigmoid()
        z = y * 2
        y.mul_(2)  # sigmoid saved y for its backward
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (z + y).sum().backward()


def test_modified_input_is_an_error():
    for m in (ember, torch):
        x = vals(m)
        a = x * 1
        b = a.exp() * a  # mul saved a
        a.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            b.sum().backward()


def test_inplace_on_leaf_requiring_grad_is_an_error():
    for m in (ember, torch):
        x = vals(m)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x.add_(1)
    x = vals(ember)
    with ember.no_grad():
        x.add_(1)  # allowed: the optimizer's update


# In-place writes through views, and views read after their memory was
# written through something else (PyTorch's CopySlices and view
# regeneration): values and gradients as PyTorch's.
VIEW_WRITES = {
    "row scaled": lambda m, h, w, b: h[1].mul_(3),
    "column of a transpose": lambda m, h, w, b: h.t()[2].add_(b[0, :3]),
    "activation on a row": lambda m, h, w, b: h[2].sigmoid_(),
    "narrow copied into": lambda m, h, w, b: h.narrow(1, 1, 2).copy_(w[:, :2] * 5),
    "a strided slice": lambda m, h, w, b: h[::2, 1::2].relu_(),
    "a view of a view": lambda m, h, w, b: h.view(4, 3)[1:3].view(6).mul_(w.view(12)[:6]),
    "base written, earlier view read": lambda m, h, w, b: h.mul_(2),
    "two views of one row": lambda m, h, w, b: (h[0].add_(1), h[0, 1:].mul_(b[2, 1:])),
    "unsqueezed": lambda m, h, w, b: h.unsqueeze(0)[0, 2].exp_(),
    "clamped select": lambda m, h, w, b: h.select(1, 3).clamp_(-1.0, 1.0),
}


@pytest.mark.parametrize("name", sorted(VIEW_WRITES))
def test_inplace_through_views_matches_pytorch(name):
    write = VIEW_WRITES[name]

    def run(m):
        w = m.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4), requires_grad=True)
        b = m.tensor(np.arange(12.0).reshape(3, 4) / 10, requires_grad=True)
        h = w * 2 + b
        early = h[1]  # a view taken before the write
        write(m, h, w, b)
        loss = (h * h).sum() + (early * 7).sum()
        loss.backward()
        return loss.item(), h.detach().numpy(), w.grad.numpy(), b.grad.numpy()

    want, got = run(torch), run(ember)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for g, t in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, t, rtol=1e-12, atol=1e-12)


def test_writing_a_grad_value_into_a_view_of_a_plain_buffer():
    def run(m):
        w = m.tensor([[1.0, -2.0, 3.0]], requires_grad=True)
        buf = m.zeros(3, 3, dtype=m.float64)
        buf[0].copy_(w[0] * 5)
        buf.narrow(0, 1, 2).add_(w.expand(2, 3))
        other = buf[2]  # reads the written memory
        loss = (buf ** 2).sum() + other.sum()
        loss.backward()
        return buf.requires_grad, loss.item(), w.grad.numpy()

    want, got = run(torch), run(ember)
    assert got[0] == want[0] is True
    np.testing.assert_allclose(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2])


def test_a_view_of_a_leaf_that_requires_grad_is_refused_in_place():
    w = vals(ember).requires_grad_()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0].mul_(2)
    with ember.no_grad():
        w[0].mul_(2)  # the optimizer's way


def test_a_saved_view_overwritten_through_its_base_is_caught():
    w = ember.ones(3, requires_grad=True)
    h = w * 1
    v = h[:2]
    y = v * v  # saves v
    h.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_setitem_into_a_tensor_that_requires_grad():
    """x[key] = v with any key is recorded as one write into x itself."""
    def f(m):
        x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        v = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = x * 2
        y[1, 1:3] = v * 3
        y[:, 0] = 7.0
        y[y > 15] = 0.0
        y[[0, 2], -1] = v
        (y * y).sum().backward()
        return y, x.grad, v.grad
    for e, t in zip(*both(f)):
        close(e, t)


def test_grad_setter_checks():
    x = vals(ember)
    x.grad = ember.ones(3, 4)
    assert x.grad.sum().item() == 12
    with pytest.raises(RuntimeError, match="size"):
        x.grad = ember.ones(4)
    with pytest.raises(RuntimeError, match="type"):
        x.grad = ember.ones(3, 4, dtype=ember.float64)
    x.grad = None
    assert x.grad is None


# ---- compiled functions ----

@pytest.mark.filterwarnings("ignore:ember.compile")
def test_compiled_function_keeps_gradients_by_running_eagerly():
    w = vals(ember, (4,), seed=1)

    @ember.compile
    def f(x):
        return (x * w).exp().sum()

    x = vals(ember, (4,))
    for _ in range(3):  # every call records the graph: no compiled kernel swallows it
        x.grad = w.grad = None
        f(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), (x * w).exp().detach().numpy() * w.detach().numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), (x * w).exp().detach().numpy() * x.detach().numpy(),
                                   rtol=1e-6)
    with ember.no_grad():  # inference compiles, captured weights and all
        c = ember.randn(4)
        for _ in range(2):
            r = f(c)
        np.testing.assert_allclose(r.item(), float((c * w).exp().sum()), rtol=1e-6)
    assert "llvm" in [s["backend"] for s in f._specializations()] or not ember.compiler.has_llvm()
