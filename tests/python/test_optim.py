"""ember.optim against torch.optim 1.13: the same parameters and gradients
give the same updates for every option, state_dict round trips, and the
learning-rate schedules follow the same sequence."""

import numpy as np
import pytest
import torch

import ember

SHAPES = [(5, 3), (7,), ()]


def _params(m, dtype):
    rng = np.random.default_rng(0)
    return [m.tensor(rng.standard_normal(s), dtype=getattr(m, dtype)).requires_grad_()
            for s in SHAPES]


def _run(m, make_opt, dtype, steps=6):
    params = _params(m, dtype)
    opt = make_opt(m, params)
    rng = np.random.default_rng(1)
    for k in range(steps):
        for p in params:
            p.grad = m.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype)
        if k == 3:  # a parameter without a gradient this step is left alone
            params[1].grad = None
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.3)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,opts", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_updates_match_torch(name, opts, dtype):
    got, _ = _run(ember, lambda m, ps: getattr(m.optim, name)(ps, **opts), dtype)
    want, _ = _run(torch, lambda m, ps: getattr(m.optim, name)(ps, **opts), dtype)
    # float64 shows the arithmetic is PyTorch's step for step; in float32
    # PyTorch's vectorised kernels (sqrt, addcdiv) round a few ulp apart
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-15)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)


def test_state_dict_round_trip_continues_identically():
    def run(m, split):
        params = _params(m, "float32")
        opt = m.optim.Adam(params, lr=0.01, amsgrad=True)
        rng = np.random.default_rng(1)
        for k in range(6):
            if k == split:  # a fresh optimizer resumed from the state dict
                sd = opt.state_dict()
                opt = m.optim.Adam(params, lr=0.5)
                opt.load_state_dict(sd)
            for p in params:
                p.grad = m.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype)
            opt.step()
        return [p.detach().numpy().copy() for p in params], opt.state_dict()
    got, sd = run(ember, 3)
    want, tsd = run(torch, 99)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert sorted(sd["state"]) == sorted(tsd["state"]) == [0, 1, 2]
    assert sorted(sd["state"][0]) == sorted(tsd["state"][0])
    assert sd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
    assert sd["param_groups"][0]["lr"] == 0.01


def test_param_groups_have_their_own_options():
    def run(m):
        a, b = _params(m, "float64")[:2]
        opt = m.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5, "momentum": 0.9}], lr=0.1)
        for _ in range(3):
            a.grad = m.ones_like(a)
            b.grad = m.ones_like(b)
            opt.step()
        return a.detach().numpy().copy(), b.detach().numpy().copy()
    for g, w in zip(run(ember), run(torch)):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_zero_grad():
    p = ember.ones(3, requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.1)
    p.grad = ember.ones(3)
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.sum().item() == 0
    opt.zero_grad()
    assert p.grad is None


def test_bad_arguments():
    p = ember.ones(3, requires_grad=True)
    for m, params in ((ember, [p]), (torch, [torch.ones(3, requires_grad=True)])):
        with pytest.raises(ValueError):
            m.optim.SGD(params, lr=-1)
        with pytest.raises(ValueError):
            m.optim.Adam(params, betas=(1.0, 0.9))
        with pytest.raises(ValueError):
            m.optim.SGD(params, lr=0.1, nesterov=True)
        with pytest.raises(ValueError):
            m.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        ember.optim.SGD([p * 2], lr=0.1)


def test_step_does_not_record_a_graph():
    p = ember.ones(3, requires_grad=True)
    opt = ember.optim.Adam([p])
    (p * 2).sum().backward()
    opt.step()
    assert p.is_leaf and p.grad_fn is None


def test_step_with_closure():
    def run(m):
        p = m.tensor([1.0, -2.0], requires_grad=True)
        opt = m.optim.SGD([p], lr=0.1)

        def closure():
            opt.zero_grad()
            loss = (p * p).sum()
            loss.backward()
            return loss
        losses = [float(opt.step(closure)) for _ in range(3)]
        return losses, p.detach().numpy().copy()
    (el, ep), (tl, tp) = run(ember), run(torch)
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    np.testing.assert_allclose(ep, tp, rtol=1e-6)


SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=0.01)),
    ("CosineAnnealingLR", dict(T_max=4)),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.9 ** e + 0.1 * (e % 2))),
]


@pytest.mark.parametrize("name,opts", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_schedules_match_torch(name, opts):
    def lrs(m):
        p = m.ones(2, requires_grad=True)
        opt = m.optim.SGD([p], lr=0.2)
        sched = getattr(m.optim.lr_scheduler, name)(opt, **opts)
        out = []
        for _ in range(15):
            p.grad = m.ones(2)
            opt.step()
            sched.step()
            out.append((opt.param_groups[0]["lr"], sched.get_last_lr()[0]))
        return out
    np.testing.assert_allclose(lrs(ember), lrs(torch), rtol=1e-12)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.1)),
                                     ("AdamW", dict(lr=0.1)), ("RMSprop", dict(lr=0.01, centered=True))])
def test_fused_steps_take_parameters_that_are_not_contiguous(name, kw):
    """A Parameter made of a transpose: the fused kernels run on a contiguous
    copy, written back, so the step is PyTorch's (it was refused)."""
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    w, tw = ember.nn.Parameter(ember.tensor(a).t()), torch.nn.Parameter(torch.tensor(a).t())
    o, to = getattr(ember.optim, name)([w], **kw), getattr(torch.optim, name)([tw], **kw)
    for _ in range(3):
        o.zero_grad()
        to.zero_grad()
        (w * w * ember.arange(12.0).reshape(3, 4)).sum().backward()
        (tw * tw * torch.arange(12.0).reshape(3, 4)).sum().backward()
        o.step()
        to.step()
    assert not w.is_contiguous()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
