"""Autograd conveniences against PyTorch 1.13: Tensor.register_hook and
retain_grad, ember.autograd.Function (custom backward in Python),
ember.autograd.functional (jacobian, hessian, vjp, jvp, vhp, hvp) and
anomaly detection."""

import gc

import numpy as np
import pytest
import torch
import torch.autograd.functional as TAF

import ember
import ember.autograd.functional as EAF

pytestmark = pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")


def both(values, requires_grad=True):
    v = np.asarray(values, dtype=np.float64)
    return (ember.tensor(v, dtype=ember.float64, requires_grad=requires_grad),
            torch.tensor(v, dtype=torch.float64, requires_grad=requires_grad))


def same(e, t, **kw):
    if t is None:
        assert e is None
        return
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12, **kw)


# ---------------------------------------------------------------- hooks

def test_hooks_on_leaves_and_results_replace_and_order():
    grads = {}
    for m, x in zip((ember, torch), both([1.0, -2.0, 3.0])):
        seen = []
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: seen.append(("y1", g.clone())) or g * 10)
        y.register_hook(lambda g: seen.append(("y2", g.clone())))  # None: keeps the gradient
        x.register_hook(lambda g: seen.append(("x", g.clone())) or g + 1)
        (y * y).sum().backward()
        grads[m] = (x.grad, y.grad, seen)
    same(grads[ember][0], grads[torch][0])
    same(grads[ember][1], grads[torch][1])
    assert [s[0] for s in grads[ember][2]] == [s[0] for s in grads[torch][2]]
    for (_, a), (_, b) in zip(grads[ember][2], grads[torch][2]):
        same(a, b)


def test_hook_remove_and_handle_context():
    x, _ = both([1.0, 2.0])
    calls = []
    h = x.register_hook(lambda g: calls.append(1))
    (x * 3).sum().backward()
    h.remove()
    (x * 3).sum().backward()
    assert calls == [1]
    with x.register_hook(lambda g: g * 0):
        x.grad = None
        (x * 3).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_hook_errors_propagate_and_bad_returns_are_refused():
    x, _ = both([1.0, 2.0])

    class Boom(Exception):
        pass

    def boom(g):
        raise Boom("from the hook")
    x.register_hook(boom)
    with pytest.raises(Boom, match="from the hook"):
        (x * 2).sum().backward()
    y, _ = both([1.0])
    y.register_hook(lambda g: 3)
    with pytest.raises(TypeError, match="Tensor or None"):
        (y * 2).sum().backward()
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ember.ones(2).register_hook(lambda g: g)


def test_retain_grad_accumulates_and_leaf_is_noop():
    for m, x in zip((ember, torch), both([1.0, 2.0])):
        y = x.exp()
        y.retain_grad()
        assert y.retains_grad
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        x.retain_grad()  # a leaf: nothing changes
        if m is ember:
            eg = y.grad
        else:
            same(eg, y.grad)
    n0 = ember._C._node_live_count()
    x, _ = both([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    del y
    gc.collect()
    assert ember._C._node_live_count() == n0  # the hook keeps neither alive


# ---------------------------------------------------------------- Function

def _functions(m):
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x ** 3 * scale

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x ** 2 * ctx.scale, None

    class SplitMul(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b, a + b, (a > 0).to(m.int64)

        @staticmethod
        def backward(ctx, gp, gs, gi):
            a, b = ctx.saved_tensors
            return gp * b + gs, gp * a + gs

    class ExpSaveOut(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y
    return Cube, SplitMul, ExpSaveOut


def test_custom_functions_match_torch():
    res = {}
    for m, (a, b) in zip((ember, torch), zip(both([1.0, -2.0, 0.5]), both([0.3, 0.7, -1.1]))):
        Cube, SplitMul, ExpSaveOut = _functions(m)
        y = Cube.apply(a, 2.0)
        p, s, i = SplitMul.apply(a, b)
        assert not i.requires_grad and i.dtype == m.int64
        e = ExpSaveOut.apply(b)
        (y.sum() + (p * s).sum() + e.sum()).backward()
        res[m] = (a.grad, b.grad, y.grad_fn.name())
    same(res[ember][0], res[torch][0])
    same(res[ember][1], res[torch][1])
    assert res[ember][2] == "CubeBackward"


def test_custom_function_gradcheck_and_double_backward():
    Cube, SplitMul, ExpSaveOut = _functions(ember)
    x = ember.tensor([0.5, -1.2, 2.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: Cube.apply(t, 1.5), (x,))
    assert ember.autograd.gradgradcheck(lambda t: Cube.apply(t, 1.5), (x,))
    (g,) = ember.autograd.grad(Cube.apply(x, 1.0).sum(), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    same(gg, torch.tensor([3.0, -7.2, 12.0], dtype=torch.float64))


def test_custom_function_needs_input_grad_and_returned_input():
    seen = {}

    class Ident(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            seen["needs"] = ctx.needs_input_grad
            return x  # an input returned as is

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    out = Ident.apply(x, ember.ones(2))
    assert seen["needs"] == (True, False) and out is not x and out.grad_fn.name() == "IdentBackward"
    out.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_custom_function_saved_tensor_modified_in_place_is_an_error():
    Cube, _, _ = _functions(ember)
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    x2 = x * 1
    y = Cube.apply(x2, 1.0)
    with ember.no_grad():
        x2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_custom_function_wrong_gradient_count():
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return (g,)

    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_custom_function_frees_its_graph():
    Cube, _, ExpSaveOut = _functions(ember)
    gc.collect()
    n0 = ember._C._node_live_count()
    x = ember.ones(3, requires_grad=True)
    y = ExpSaveOut.apply(Cube.apply(x, 2.0))
    y.sum().backward()
    del y
    gc.collect()
    assert ember._C._node_live_count() == n0  # no cycle through the Python backward


def test_custom_function_in_a_compiled_training_step():
    Cube, _, _ = _functions(ember)

    def make():
        w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
        opt = ember.optim.SGD([w], lr=0.01)

        def step(x):
            opt.zero_grad()
            loss = Cube.apply(w * x, 0.5).sum()
            loss.backward()
            opt.step()
            return loss
        return w, step

    x = ember.tensor([0.5, -1.0, 2.0])
    w_e, step = make()
    w_c, cstep = make()
    cstep = ember.compile(cstep)
    for _ in range(4):
        le, lc = step(x), cstep(x)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
        np.testing.assert_allclose(w_c.detach().numpy(), w_e.detach().numpy(), rtol=1e-6)
    stats = cstep._stats()
    assert stats["hits"] >= 1 and stats["eager_calls"] == 0, stats


# ---------------------------------------------------------------- functional

def f1(x):
    return (x ** 3).sin()


def f2(x, y):
    return x * y.exp(), (x ** 2).sum() * y


def scalar2(x, y):
    return (x.sin() * y ** 2).sum() + (x * x).sum()


def _cmp(e, t):
    if isinstance(t, tuple):
        assert isinstance(e, tuple) and len(e) == len(t)
        for a, b in zip(e, t):
            _cmp(a, b)
    else:
        same(e, t)


def test_functional_matches_torch():
    ex, tx = both([0.3, -0.8, 1.1], requires_grad=False)
    ey, ty = both([0.5, 0.2, -0.4], requires_grad=False)
    _cmp(EAF.jacobian(f1, ex), TAF.jacobian(f1, tx))
    _cmp(EAF.jacobian(f2, (ex, ey)), TAF.jacobian(f2, (tx, ty)))
    _cmp(EAF.hessian(lambda x: f1(x).sum(), ex), TAF.hessian(lambda x: f1(x).sum(), tx))
    _cmp(EAF.hessian(scalar2, (ex, ey)), TAF.hessian(scalar2, (tx, ty)))
    _cmp(EAF.vjp(f1, ex, ey), TAF.vjp(f1, tx, ty))
    _cmp(EAF.vjp(f2, (ex, ey), (ey, ex)), TAF.vjp(f2, (tx, ty), (ty, tx)))
    _cmp(EAF.jvp(f1, ex, ey), TAF.jvp(f1, tx, ty))
    _cmp(EAF.jvp(f2, (ex, ey), (ey, ex)), TAF.jvp(f2, (tx, ty), (ty, tx)))
    _cmp(EAF.hvp(scalar2, (ex, ey), (ey, ex)), TAF.hvp(scalar2, (tx, ty), (ty, tx)))
    _cmp(EAF.vhp(scalar2, (ex, ey), (ey, ex)), TAF.vhp(scalar2, (tx, ty), (ty, tx)))
    assert ex.grad is None and not ex.requires_grad  # the caller's tensors are untouched


def test_functional_create_graph_and_errors():
    x = ember.tensor([0.3, 1.2], dtype=ember.float64, requires_grad=True)
    jac = EAF.jacobian(lambda t: t ** 3, x, create_graph=True)
    assert jac.requires_grad
    with pytest.raises(RuntimeError, match="single element"):
        EAF.vjp(f1, x.detach())
    with pytest.raises(RuntimeError, match="shape"):
        EAF.jvp(f1, x.detach(), ember.ones(3, dtype=ember.float64))
    with pytest.raises(NotImplementedError, match="forward-mode"):
        EAF.jacobian(f1, x.detach(), strategy="forward-mode")


# ---------------------------------------------------------------- anomaly

def test_anomaly_detection_names_the_node_and_where_it_was_made():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    assert not ember.autograd.is_anomaly_enabled()
    with ember.autograd.detect_anomaly():
        assert ember.autograd.is_anomaly_enabled()
        y = x.sqrt() * 0  # 0 * inf: NaN in SqrtBackward0
        with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values in its 0th output") as e:
            y.sum().backward()
    assert "test_autograd_extras.py" in str(e.value)  # the forward's stack
    assert not ember.autograd.is_anomaly_enabled()
    x.grad = None
    (x.sqrt() * 0).sum().backward()  # off: NaN flows, as in PyTorch
    assert np.isnan(x.grad[0].item())
    with ember.autograd.set_detect_anomaly(True):
        assert ember.autograd.is_anomaly_enabled()
    assert not ember.autograd.is_anomaly_enabled()


def test_custom_function_second_backward_needs_retain_graph():
    Cube, _, _ = _functions(ember)
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x, 1.0).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [6.0, 24.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_post_accumulate_grad_hooks_see_the_accumulated_grad():
    """register_post_accumulate_grad_hook (torch 2.1's): hook(leaf) after
    backward accumulated into leaf.grad, each backward; not for autograd.grad
    (nothing accumulates), not on non-leaves; remove() turns it off."""
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()) or "ignored")
    (w * 3).sum().backward()
    (w * w).sum().backward()
    assert seen == [[3.0, 3.0], [5.0, 7.0]]
    ember.autograd.grad((w * 2).sum(), [w])
    assert len(seen) == 2
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ember.ones(2).register_post_accumulate_grad_hook(print)
    # torch agrees on what the hook sees
    tw = torch.tensor([1.0, 2.0], requires_grad=True)
    if hasattr(tw, "register_post_accumulate_grad_hook"):
        tseen = []
        tw.register_post_accumulate_grad_hook(lambda p: tseen.append(p.grad.tolist()))
        (tw * 3).sum().backward()
        (tw * tw).sum().backward()
        assert tseen == [[3.0, 3.0], [5.0, 7.0]]


def test_a_raising_post_accumulate_hook_stops_backward():
    w = ember.ones(2, requires_grad=True)

    def boom(p):
        raise KeyError("from the hook")
    w.register_post_accumulate_grad_hook(boom)
    with pytest.raises(KeyError, match="from the hook"):
        (w * 2).sum().backward()


def test_leaves_accumulate_as_soon_as_their_gradient_is_complete():
    """As PyTorch's AccumulateGrad: a leaf's gradient is accumulated (and
    its post-accumulate hooks run) when complete, not after the rest of
    backward; DistributedDataParallel overlaps on that."""
    order = []

    class Mark(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            order.append("first layer's backward")
            return g

    x = ember.ones(3, requires_grad=True)
    w1 = ember.ones(3, requires_grad=True)
    w2 = ember.ones(3, requires_grad=True)
    w2.register_post_accumulate_grad_hook(lambda p: order.append("w2 accumulated"))
    w1.register_post_accumulate_grad_hook(lambda p: order.append("w1 accumulated"))
    h = Mark.apply(x * w1)
    (h * w2).sum().backward()
    assert order == ["w2 accumulated", "first layer's backward", "w1 accumulated"], order
