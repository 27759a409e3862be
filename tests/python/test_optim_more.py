"""Adagrad, Adadelta, Adamax, NAdam, RAdam, LBFGS, the learning-rate
schedules and swa_utils against PyTorch 1.13: the same parameters, the
same gradients, step for step; the composed optimizers also compiled
against eager."""

import numpy as np
import pytest
import torch

import ember

pytestmark = pytest.mark.filterwarnings("ignore:The epoch parameter")


def params(m, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    return [m.tensor(rng.standard_normal(s), dtype=getattr(m, dtype), requires_grad=True) for s in ((3, 4), (4,))]


def loss_of(m, ps, k):
    w, b = ps
    x = m.tensor(np.random.default_rng(100 + k).standard_normal((5, 3)), dtype=w.dtype)
    return ((x @ w + b).tanh() ** 2).sum() + (w * w).sum() * 0.01


def run(m, cls, kwargs, steps=6, dtype="float64"):
    ps = params(m, dtype)
    opt = cls(ps, **kwargs)
    for k in range(steps):
        opt.zero_grad()
        loss_of(m, ps, k).backward()
        opt.step()
    return [p.detach().numpy() for p in ps], opt


def nadam_reference(ps_np, grads_fn, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                    steps=6):
    """NAdam as published (and in PyTorch >= 2.0): mu_{t+1}'s product is
    prod(mu_1..mu_t) * mu_{t+1}. PyTorch 1.13 multiplies mu_t in twice."""
    b1, b2 = betas
    ps = [p.copy() for p in ps_np]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    mu_product = 1.0
    for t in range(1, steps + 1):
        gs = grads_fn(ps, t - 1)
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_product = float(np.float32(mu_product) * np.float32(mu))  # kept as float32, as PyTorch's state
        for i, (p, g) in enumerate(zip(ps, gs)):
            g = g + weight_decay * p
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            denom = np.sqrt(v[i] / (1 - b2 ** t)) + eps
            p -= lr * (1 - mu) / (1 - mu_product) * g / denom
            p -= lr * mu_next / (1 - mu_product * mu_next) * m[i] / denom
    return ps


CASES = [
    ("Adagrad", {}), ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.2)),
    ("Adagrad", dict(maximize=True)),
    ("Adadelta", {}), ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.05, maximize=True)),
    ("Adamax", {}), ("Adamax", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    ("RAdam", {}), ("RAdam", dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1)),  # rectified from step 5
    ("ASGD", {}), ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1, maximize=True)),
    ("Rprop", {}), ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.06), maximize=True)),
]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch(name, kwargs, dtype):
    got, _ = run(ember, getattr(ember.optim, name), kwargs, dtype=dtype)
    want, _ = run(torch, getattr(torch.optim, name), kwargs, dtype=dtype)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, **tol)


@pytest.mark.parametrize("kwargs", [{}, dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)])
def test_nadam_matches_the_published_rule(kwargs):
    got, _ = run(ember, ember.optim.NAdam, kwargs)

    def grads_fn(ps_np, k):
        ts = [torch.tensor(p, requires_grad=True) for p in ps_np]
        loss_of(torch, ts, k).backward()
        return [t.grad.numpy() for t in ts]
    want = nadam_reference([p.detach().numpy() for p in params(torch)], grads_fn, **kwargs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"])
def test_compiled_step_matches_eager(name):
    kwargs = {"RAdam": dict(lr=0.05, betas=(0.5, 0.6)), "Rprop": dict(lr=0.05),
              "ASGD": dict(lr=0.05, t0=3, weight_decay=0.01)}.get(name, dict(lr=0.05, weight_decay=0.01))

    def make():
        ps = params(ember, "float32")
        opt = getattr(ember.optim, name)(ps, **kwargs)
        x = ember.tensor(np.random.default_rng(3).standard_normal((5, 3)), dtype=ember.float32)

        def step():
            opt.zero_grad()
            loss = ((x @ ps[0] + ps[1]).tanh() ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        return ps, opt, step
    pe, oe, se = make()
    pc, oc, sc = make()
    sc = ember.compile(sc)
    for _ in range(7):
        np.testing.assert_allclose(sc().item(), se().item(), rtol=1e-5)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    stats = sc._stats()
    assert stats["hits"] >= 5 and stats["eager_calls"] == 0, stats
    # and the state is PyTorch's: the same keys, the step counted
    st = oc.state_dict()["state"][0]
    assert float(st["step"]) == 7.0


def test_state_dict_round_trip_with_torch_layout():
    _, opt = run(ember, ember.optim.Adamax, {})
    _, topt = run(torch, torch.optim.Adamax, {})
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert set(sd["state"][0]) == set(tsd["state"][0])
    assert sd["param_groups"][0].keys() == tsd["param_groups"][0].keys()
    ps = params(ember)
    again = ember.optim.Adamax(ps)
    again.load_state_dict(sd)
    np.testing.assert_array_equal(again.state[ps[0]]["exp_inf"].numpy(), sd["state"][0]["exp_inf"].numpy())


@pytest.mark.parametrize("kwargs", [dict(lr=0.8, max_iter=10),
                                    dict(lr=1, max_iter=30, line_search_fn="strong_wolfe"),
                                    dict(lr=1, max_iter=8, history_size=3, line_search_fn="strong_wolfe")])
def test_lbfgs_matches_torch(kwargs):
    def solve(m):
        x = m.tensor([-1.5, 2.0, 0.5], dtype=m.float64, requires_grad=True)
        opt = m.optim.LBFGS([x], **kwargs)

        def closure():
            opt.zero_grad()
            loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()  # Rosenbrock
            loss.backward()
            return loss
        losses = [float(opt.step(closure)) for _ in range(3)]
        return x.detach().numpy(), losses, opt.state[x]["func_evals"], opt.state[x]["n_iter"]
    got, want = solve(ember), solve(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-8, atol=1e-12)
    assert got[2:] == want[2:]


def test_lbfgs_errors():
    x = ember.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        ember.optim.LBFGS([x], line_search_fn="armijo").step(lambda: (x * x).sum())
    with pytest.raises(ValueError, match="parameter groups"):
        ember.optim.LBFGS([{"params": [x]}, {"params": [ember.zeros(1, requires_grad=True)]}])


# ---------------------------------------------------------------- schedules

def lrs(m, make, steps=14, momentum=False, metrics=None):
    w = m.zeros(1, requires_grad=True)
    opt = m.optim.SGD([{"params": [w]}, {"params": [m.zeros(1, requires_grad=True)], "lr": 0.5}], lr=1.0,
                      momentum=0.9)
    sched = make(m, opt)
    out = []
    for k in range(steps):
        opt.step()
        if metrics is not None:
            sched.step(metrics[k])
        else:
            sched.step()
        out.append([g["lr"] for g in opt.param_groups] + ([g["momentum"] for g in opt.param_groups] if momentum else []))
    return out


L = lambda m: m.optim.lr_scheduler  # noqa: E731
SCHEDULES = [
    lambda m, o: L(m).MultiStepLR(o, [2, 5, 5, 9], gamma=0.5),
    lambda m, o: L(m).ExponentialLR(o, 0.8),
    lambda m, o: L(m).LinearLR(o, start_factor=0.1, total_iters=4),
    lambda m, o: L(m).LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=6),
    lambda m, o: L(m).ConstantLR(o, factor=0.25, total_iters=3),
    lambda m, o: L(m).PolynomialLR(o, total_iters=8, power=2.0),
    lambda m, o: L(m).MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 1.0),
    lambda m, o: L(m).SequentialLR(o, [L(m).LinearLR(o, start_factor=0.1, total_iters=3),
                                       L(m).CosineAnnealingLR(o, T_max=8)], milestones=[3]),
    lambda m, o: L(m).SequentialLR(o, [L(m).ConstantLR(o, factor=0.5, total_iters=2),
                                       L(m).ExponentialLR(o, 0.9), L(m).StepLR(o, 2)], milestones=[2, 6]),
    lambda m, o: L(m).ChainedScheduler([L(m).LinearLR(o, start_factor=0.2, total_iters=4),
                                        L(m).ExponentialLR(o, 0.9)]),
    lambda m, o: L(m).CosineAnnealingWarmRestarts(o, T_0=3),
    lambda m, o: L(m).CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.01),
]
CYCLIC = [dict(base_lr=0.1, max_lr=1.0, step_size_up=3), dict(base_lr=[0.1, 0.2], max_lr=1.0, step_size_up=2,
                                                             step_size_down=4, mode="triangular2"),
          dict(base_lr=0.1, max_lr=0.5, step_size_up=2, mode="exp_range", gamma=0.9, base_momentum=0.7),
          dict(base_lr=0.1, max_lr=0.5, step_size_up=3, scale_fn=lambda x: 0.5 ** x, scale_mode="iterations",
               cycle_momentum=False)]


@pytest.mark.parametrize("kwargs", CYCLIC, ids=range(len(CYCLIC)))
def test_cyclic_lr_matches_torch(kwargs):
    make = lambda m, o: L(m).CyclicLR(o, **kwargs)  # noqa: E731
    momentum = kwargs.get("cycle_momentum", True)
    np.testing.assert_allclose(lrs(ember, make, momentum=momentum), lrs(torch, make, momentum=momentum),
                               rtol=1e-12)


def test_warm_restarts_take_fractional_epochs_like_torch():
    def run_(m):
        w = m.zeros(1, requires_grad=True)
        opt = m.optim.SGD([w], lr=1.0)
        sched = L(m).CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3, eta_min=0.1)
        out = []
        for epoch in (0.5, 1.0, 2.25, 5.0, 7.9, 8.0, 30.0):
            sched.step(epoch)
            out.append((opt.param_groups[0]["lr"], sched.T_i, sched.last_epoch))
        return out
    np.testing.assert_allclose(run_(ember), run_(torch), rtol=1e-12)
    for m in (ember, torch):
        opt = m.optim.SGD([m.zeros(1, requires_grad=True)], lr=1.0)
        with pytest.raises(ValueError, match="T_0"):
            L(m).CosineAnnealingWarmRestarts(opt, T_0=0)
        with pytest.raises(ValueError, match="momentum"):
            L(m).CyclicLR(m.optim.Adam([m.zeros(1, requires_grad=True)]), 0.1, 1.0)


def test_sparse_adam_refuses_dense_gradients_like_torch():
    for m in (ember, torch):
        w = m.ones(3, requires_grad=True)
        opt = m.optim.SparseAdam([w])
        (w * 2).sum().backward()
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            opt.step()


@pytest.mark.parametrize("make", SCHEDULES, ids=range(len(SCHEDULES)))
def test_schedules_match_torch(make):
    np.testing.assert_allclose(lrs(ember, make), lrs(torch, make), rtol=1e-12)


@pytest.mark.parametrize("kwargs", [dict(total_steps=14), dict(epochs=2, steps_per_epoch=7, three_phase=True),
                                    dict(total_steps=14, anneal_strategy="linear", pct_start=0.5)])
def test_one_cycle_matches_torch(kwargs):
    make = lambda m, o: L(m).OneCycleLR(o, max_lr=[0.1, 0.05], **kwargs)  # noqa: E731
    np.testing.assert_allclose(lrs(ember, make, momentum=True), lrs(torch, make, momentum=True), rtol=1e-12)
    with pytest.raises(ValueError, match="Tried to step"):
        lrs(ember, make, steps=16)


def test_one_cycle_cycles_adams_beta1():
    for m in (ember, torch):
        w = m.zeros(1, requires_grad=True)
        opt = m.optim.Adam([w], lr=0.01)
        sched = m.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
        betas = []
        for _ in range(9):
            opt.step()
            sched.step()
            betas.append(opt.param_groups[0]["betas"])
        if m is ember:
            mine = betas
    np.testing.assert_allclose(mine, betas)


@pytest.mark.parametrize("kwargs", [dict(patience=2), dict(mode="max", factor=0.5, patience=1, cooldown=2),
                                    dict(threshold_mode="abs", threshold=0.1, patience=0, min_lr=[0.3, 0.1])])
def test_reduce_on_plateau_matches_torch(kwargs):
    metrics = [1.0, 0.9, 0.95, 0.97, 0.96, 0.85, 0.86, 0.86, 0.9, 0.7, 0.71, 0.72, 0.73, 0.74]
    make = lambda m, o: L(m).ReduceLROnPlateau(o, **kwargs)  # noqa: E731
    np.testing.assert_allclose(lrs(ember, make, metrics=metrics), lrs(torch, make, metrics=metrics), rtol=1e-12)


def test_schedule_errors():
    w = ember.zeros(1, requires_grad=True)
    opt = ember.optim.SGD([w], lr=1.0)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        ember.optim.lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        ember.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=2)
    with pytest.raises(ValueError, match="momentum"):
        ember.optim.lr_scheduler.OneCycleLR(ember.optim.Adagrad([w]), max_lr=1.0, total_steps=3)
    with pytest.raises(ValueError, match="number of milestone"):
        ember.optim.lr_scheduler.SequentialLR(opt, [ember.optim.lr_scheduler.ExponentialLR(opt, 0.5)], [1])


# ---------------------------------------------------------------- swa_utils

def test_swa_matches_torch():
    res = {}
    for m in (ember, torch):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.ReLU(), m.nn.Linear(4, 2))
        rng = np.random.default_rng(0)
        for p in net.parameters():
            with m.no_grad():
                p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype))
        swa = m.optim.swa_utils.AveragedModel(net)
        opt = m.optim.SGD(net.parameters(), lr=0.1)
        sched = m.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3)
        seen = []
        xs = [m.tensor(rng.standard_normal((6, 3)), dtype=m.float32) for _ in range(5)]
        for x in xs:
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
            swa.update_parameters(net)
            sched.step()
            seen.append(opt.param_groups[0]["lr"])
        m.optim.swa_utils.update_bn(xs, swa)
        res[m] = ([p.detach().numpy() for p in swa.parameters()], seen, swa.module[1].running_mean.numpy(),
                  swa.module[1].running_var.numpy(), int(swa.n_averaged))
    for a, b in zip(res[ember][0], res[torch][0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[ember][1], res[torch][1], rtol=1e-12)
    np.testing.assert_allclose(res[ember][2], res[torch][2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[ember][3], res[torch][3], rtol=1e-5, atol=1e-6)
    assert res[ember][4] == res[torch][4] == 5
