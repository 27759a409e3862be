"""Autograd across the compiled boundary: a compiled function or module
whose results require grad runs compiled (a forward graph) and gives its
results one CompiledFunctionBackward node (a compiled backward graph), and
every autograd behaviour around it is eager's."""

import re

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from conftest import requires_torch, torch
from test_compile_training import CNN, MLP, Block, data, tokens

RTOL, ATOL = 1e-5, 1e-6


def grads(params):
    return [None if p.grad is None else p.grad.numpy().copy() for p in params]


def assert_grads(a, b, what):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:
            assert x is None and y is None, f"{what}: gradient {i}: {x} vs {y}"
        else:
            np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL, err_msg=f"{what}: gradient {i}")


def node_name(t):
    return t.grad_fn.name()


def compiled_twice(fn, *args):
    """fn compiled, called once to trace; the function for later calls."""
    cf = ember.compile(fn)
    cf(*args)
    return cf


# ------------------------------------------------------------ functions


def test_gradients_reach_arguments_and_captured_parameters():
    ember.manual_seed(0)
    lin = nn.Linear(6, 5)
    x = ember.randn(4, 6, requires_grad=True)

    def f(x):
        return F.gelu(lin(x)).tanh() * x.sum(1, keepdim=True)

    cf = compiled_twice(f, x)
    for step in range(3):
        lin.zero_grad()
        x.grad = None
        out = cf(x)
        assert node_name(out) == "CompiledFunctionBackward"
        assert out.requires_grad and out.is_leaf is False
        (out * out).sum().backward()
        got = grads([x, lin.weight, lin.bias])
        lin.zero_grad()
        x.grad = None
        (f(x) ** 2).sum().backward()
        assert_grads(got, grads([x, lin.weight, lin.bias]), f"step {step}")
    assert cf._stats()["compiled_calls"] == 3


@requires_torch
def test_compiled_backward_against_pytorch():
    rng = np.random.default_rng(3)
    a, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 3), (3,)))

    def f(a, w, b):
        h = a @ w + b
        return (h.softmax(-1) * h.sigmoid()).log1p().mean(0)

    ea, ew, eb = (ember.tensor(v, requires_grad=True) for v in (a, w, b))
    cf = compiled_twice(f, ea, ew, eb)
    out = cf(ea, ew, eb)
    assert node_name(out) == "CompiledFunctionBackward"
    g = rng.standard_normal(3).astype(np.float32)
    out.backward(ember.tensor(g))
    ta, tw, tb = (torch.tensor(v, requires_grad=True) for v in (a, w, b))
    f(ta, tw, tb).backward(torch.tensor(g))
    for e, t in ((ea, ta), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_inputs_without_grad_and_non_leaf_inputs():
    ember.manual_seed(1)
    w = ember.randn(4, 4, requires_grad=True)
    base = ember.randn(3, 4, requires_grad=True)

    def f(x, y):
        return (x @ w).relu() + y

    y = ember.randn(3, 4)  # needs no gradient
    cf = compiled_twice(f, base * 2, y)
    out = cf(base * 2, y)  # a non-leaf argument: its gradient flows on to `base`
    assert node_name(out) == "CompiledFunctionBackward"
    out.sum().backward()
    got = grads([w, base])
    w.grad = base.grad = None
    f(base * 2, y).sum().backward()
    assert_grads(got, grads([w, base]), "non-leaf input")
    assert y.grad is None


def test_unused_outputs_and_non_tensor_results():
    ember.manual_seed(2)
    w = ember.randn(5, 5, requires_grad=True)

    def f(x):
        h = x @ w
        return h.exp().sum(), {"tanh": h.tanh(), "nothing": None}

    x = ember.randn(2, 5)
    cf = compiled_twice(f, x)
    loss, rest = cf(x)
    unused = rest["tanh"]
    assert rest["nothing"] is None
    assert node_name(loss) == node_name(unused) == "CompiledFunctionBackward"
    loss.backward()  # the second result's gradient is absent: zeros
    got = grads([w])
    w.grad = None
    f(x)[0].backward()
    assert_grads(got, grads([w]), "unused output")
    w.grad = None
    loss, rest = cf(x)
    rest["tanh"].sum().backward()  # and the other way round
    got = grads([w])
    w.grad = None
    f(x)[1]["tanh"].sum().backward()
    assert_grads(got, grads([w]), "other output")


def test_retain_graph_and_backward_twice():
    w = ember.randn(3, 3, requires_grad=True)
    cf = compiled_twice(lambda x: (x @ w).sigmoid().sum(), ember.ones(2, 3))
    out = cf(ember.ones(2, 3))
    out.backward(retain_graph=True)
    once = w.grad.numpy().copy()
    out.backward()  # retained: a second backward adds the same again
    np.testing.assert_allclose(w.grad.numpy(), 2 * once, rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_double_backward_raises_naming_the_function():
    w = ember.randn(3, 3, requires_grad=True)

    def energy(x):
        return (x @ w).tanh().sum()

    x = ember.randn(2, 3, requires_grad=True)
    cf = compiled_twice(energy, x)
    out = cf(x)
    with pytest.raises(NotImplementedError, match=r"double backward.*energy"):
        ember.autograd.grad(out, [x], create_graph=True)


def test_parameter_hooks_fire_and_can_replace_the_gradient():
    lin = nn.Linear(4, 2)
    seen = []

    def hook(g):
        seen.append(g.numpy().copy())
        return g * 0 + 1

    lin.weight.register_hook(hook)
    cf = compiled_twice(lambda x: lin(x).square().sum(), ember.randn(3, 4))
    seen.clear()
    lin.zero_grad()
    out = cf(ember.randn(3, 4))
    assert node_name(out) == "CompiledFunctionBackward"
    out.backward()
    assert len(seen) == 1 and seen[0].shape == (2, 4)
    np.testing.assert_array_equal(lin.weight.grad.numpy(), np.ones((2, 4), np.float32))


def test_a_saved_input_changed_in_place_before_backward_is_an_error():
    w = ember.randn(3, 3, requires_grad=True)
    cf = compiled_twice(lambda x: (x @ w).square().sum(), ember.randn(2, 3))
    x = ember.randn(2, 3)
    out = cf(x)
    x.add_(1)  # the backward needs x (for w's gradient)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*compiled function"):
        out.backward()


def test_a_hook_inside_the_function_runs_eagerly_with_the_reason():
    w = ember.randn(3, 3, requires_grad=True)

    def f(x):
        h = x @ w
        h.register_hook(lambda g: g * 2)
        return h.sum()

    cf = ember.compile(f)
    with pytest.warns(UserWarning, match="gradient hook"):
        cf(ember.randn(2, 3))
    out = cf(ember.randn(2, 3))
    assert node_name(out) != "CompiledFunctionBackward"


def test_explain_shows_the_forward_and_backward_graphs():
    lin = nn.Linear(8, 8)
    cf = compiled_twice(lambda x: F.gelu(lin(x)).sum(), ember.randn(4, 8))
    e = ember.compiler.explain(cf, ember.randn(4, 8), print_report=False)
    assert e.event == "compiled"
    assert "@<lambda>.forward" in e.text or ".forward(" in e.text
    assert ".backward(" in e.text
    assert re.search(r"saved for backward: \d+ values? made by the forward", e.text), e.text
    assert "recomputed in backward" in e.text


# ------------------------------------------------------------ modules in ordinary loops


def train(model, opt, batches, loss_of, compiled):
    fwd = ember.compile(model) if compiled else model
    losses = []
    for batch in batches:
        opt.zero_grad()
        loss = loss_of(fwd, batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, fwd


def state_of(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", ["mlp_dropout_bn", "cnn_bn", "block"])
def test_compiled_module_trains_as_eager_over_50_steps(name):
    steps = 50
    if name == "mlp_dropout_bn":
        make = lambda: MLP(dropout=0.2, bn=True)  # noqa: E731
        make_opt = lambda p: ember.optim.AdamW(p, lr=1e-2)  # noqa: E731
        batches = [data(i) for i in range(steps)]
        loss_of = lambda m, b: F.cross_entropy(m(b[0]), b[1])  # noqa: E731
    elif name == "cnn_bn":
        make = CNN
        make_opt = lambda p: ember.optim.SGD(p, lr=0.05, momentum=0.9)  # noqa: E731
        batches = [data(i, shape=(4, 1, 8, 8), classes=4) for i in range(steps)]
        loss_of = lambda m, b: F.cross_entropy(m(b[0]), b[1])  # noqa: E731
    else:
        make = lambda: Block(dropout=0.1)  # noqa: E731
        make_opt = lambda p: ember.optim.Adam(p, lr=3e-3)  # noqa: E731
        batches = [tokens(i) for i in range(steps)]
        loss_of = lambda m, b: F.cross_entropy(m(b[0]).flatten(0, 1), b[1].flatten())  # noqa: E731
    runs = []
    for compiled in (False, True):
        ember.manual_seed(0)
        model = make()
        model.train()
        losses, fwd = train(model, make_opt(model.parameters()), batches, loss_of, compiled)
        runs.append((losses, state_of(model), fwd))
    (le, se, _), (lc, sc, fwd) = runs
    np.testing.assert_allclose(lc, le, rtol=RTOL, atol=ATOL)
    for k in se:  # parameters, and the running statistics written back
        np.testing.assert_allclose(sc[k], se[k], rtol=1e-4, atol=1e-5, err_msg=k)
    s = fwd._stats()
    assert s["compiled_calls"] >= steps - 2 and s["eager_calls"] == 0, s

def test_compiled_nodes_and_their_saved_tensors_do_not_leak():
    """Each call's CompiledFunctionBackward node, with what it saved, goes
    when its results go (after a backward, or without one)."""
    import gc
    lin = nn.Linear(8, 8)
    cf = compiled_twice(lambda x: F.gelu(lin(x)).sum(), ember.randn(4, 8))
    x = ember.randn(4, 8)
    cf(x).backward()  # (the first compiled call makes what stays: .grads, the cache)
    cf(x)
    gc.collect()
    nodes, tensors = ember._C._node_live_count(), ember.memory_stats()["live_tensors"]
    for i in range(50):
        out = cf(x)
        if i % 2:
            out.backward()
        del out
    gc.collect()
    assert ember._C._node_live_count() == nodes
    assert ember.memory_stats()["live_tensors"] == tensors
