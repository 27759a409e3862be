"""Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop: updates written once, as
ember ops, for eager steps and traced ones alike.

Each follows PyTorch's single-tensor update rule operation for operation
(torch.optim, its default on the CPU), in the parameter's dtype; the
step-dependent scalars (bias corrections, NAdam's momentum schedule,
RAdam's rectification) are computed as float64 0-d tensors from the
step counter, so a compiled training step reads them from its state at
every call instead of baking in the first call's values. Eagerly each
update is a few elementwise ops per parameter; compiled, the fuser makes
them one kernel.

One deliberate difference: NAdam uses the published mu_{t+1} product
(PyTorch >= 2.0); PyTorch 1.13 multiplies mu_t into it twice."""

from .. import _C
from .._creation import full
from .._ops import where
from .optimizer import Optimizer, _step_tensor


def _check(name, value, low=0.0, high=None, closed=True):
    ok = (value >= low if closed else value > low) and (high is None or value < high)
    if not ok:
        raise ValueError(f"Invalid {name}: {value}")


class _Composed(Optimizer):
    """An optimizer whose update is _rule(p, grad, state, group, lr, step),
    with lr a float (eager) or a 0-d tensor (traced), step the counter as a
    float64 0-d tensor after this step."""

    def _fresh(self, p, group):
        """The state tensors of a parameter's first step."""
        raise NotImplementedError

    def _state(self, p, group, traced):
        st = self._traced_state(p) if traced else self.state[p]
        if not any(k != "step" for k in st):
            st.update(self._fresh(p, group))
        return st

    def _run(self, group, lr, traced):
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = self._state(p, group, traced)
            step = _step_tensor(st, traced=True).double()  # (the tensor: eager and traced alike)
            if group.get("maximize", False):
                grad = -grad
            if group.get("weight_decay", 0) != 0:  # (Rprop has none)
                grad = grad + p * group["weight_decay"]
            self._rule(p, grad, st, group, lr, step)

    def _update(self, group):
        self._run(group, group["lr"], False)

    def _update_traced(self, group, lr):
        self._run(group, lr, True)


def _scalar(x, like):
    """A float64 0-d value as a factor for `like` (its dtype), as PyTorch
    converts a Python scalar."""
    return x.to(like.dtype) if isinstance(x, _C._TensorBase) else x


class Adagrad(_Composed):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False):
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize))
        for g in self.param_groups:  # PyTorch makes the state here, not on the first step
            for p in g["params"]:
                self.state[p].update(self._fresh(p, g))
                self.state[p]["step"] = _C.zeros(())

    def _fresh(self, p, group):
        return {"sum": full(tuple(p.shape), group["initial_accumulator_value"], dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        clr = lr / (1 + (step - 1) * group["lr_decay"])
        st["sum"].add_(grad * grad)
        std = st["sum"].sqrt() + group["eps"]
        p.sub_(grad / std * _scalar(clr, p))


class Adadelta(_Composed):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, maximize=False):
        _check("learning rate", lr)
        _check("rho value", rho, high=1.0 + 1e-12)
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _fresh(self, p, group):
        return {"square_avg": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device),
                "acc_delta": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        rho, eps = group["rho"], group["eps"]
        sq, acc = st["square_avg"], st["acc_delta"]
        sq.mul_(rho).add_(grad * grad * (1 - rho))
        std = (sq + eps).sqrt()
        delta = (acc + eps).sqrt() / std * grad
        acc.mul_(rho).add_(delta * delta * (1 - rho))
        p.sub_(delta * _scalar(lr, p))


class Adamax(_Composed):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("beta parameter at index 0", betas[0], high=1.0)
        _check("beta parameter at index 1", betas[1], high=1.0)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _fresh(self, p, group):
        return {"exp_avg": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device),
                "exp_inf": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        b1, b2 = group["betas"]
        m, u = st["exp_avg"], st["exp_inf"]
        m.mul_(b1).add_(grad * (1 - b1))
        u.copy_((u * b2).maximum(grad.abs() + group["eps"]))
        clr = lr / (1 - b1 ** step)
        p.sub_(m / u * _scalar(clr, p))


class NAdam(_Composed):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 foreach=None):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("beta parameter at index 0", betas[0], high=1.0)
        _check("beta parameter at index 1", betas[1], high=1.0)
        _check("weight_decay value", weight_decay)
        _check("momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, foreach=foreach))

    def _fresh(self, p, group):
        return {"mu_product": _C.ones(()), "exp_avg": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device),
                "exp_avg_sq": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        b1, b2 = group["betas"]
        md = group["momentum_decay"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * md))
        st["mu_product"].mul_(mu.to(st["mu_product"].dtype))
        mu_product = st["mu_product"].double()
        m, v = st["exp_avg"], st["exp_avg_sq"]
        m.mul_(b1).add_(grad * (1 - b1))
        v.mul_(b2).add_(grad * grad * (1 - b2))
        denom = (v / _scalar(1 - b2 ** step, p)).sqrt() + group["eps"]
        p.sub_(grad / denom * _scalar(lr * (1.0 - mu) / (1.0 - mu_product), p))
        p.sub_(m / denom * _scalar(lr * mu_next / (1.0 - mu_product * mu_next), p))


class RAdam(_Composed):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("beta parameter at index 0", betas[0], high=1.0)
        _check("beta parameter at index 1", betas[1], high=1.0)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach))

    def _fresh(self, p, group):
        return {"exp_avg": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device),
                "exp_avg_sq": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        b1, b2 = group["betas"]
        m, v = st["exp_avg"], st["exp_avg_sq"]
        m.mul_(b1).add_(grad * (1 - b1))
        v.mul_(b2).add_(grad * grad * (1 - b2))
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        corrected = m / _scalar(bc1, p)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        # the variance is tractable once rho_t > 5: then rectify, else plain
        # momentum (both computed, chosen per step: the step is data here)
        tractable = rho_t > 5.0
        r = where(tractable, rho_t, rho_t.new_full((), 6.0))
        rect = ((r - 4) * (r - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * r)).sqrt()
        adaptive = bc2.sqrt().to(p.dtype) / (v.sqrt() + group["eps"])
        rectified = corrected * _scalar(lr, p) * adaptive * _scalar(rect, p)
        plain = corrected * _scalar(lr, p)
        p.sub_(where(tractable, rectified, plain))


class ASGD(_Composed):
    """Averaged SGD: SGD with a decaying step eta, and ax the running
    average of the parameters from step t0 on (PyTorch's state keeps eta
    and mu as float32 0-d tensors; so does this)."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, *,
                 maximize=False):
        _check("learning rate", lr)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _fresh(self, p, group):
        return {"eta": full((), group["lr"], dtype=_C.float32), "mu": _C.ones(()),
                "ax": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        lambd, eta, mu, ax = group["lambd"], st["eta"], st["mu"], st["ax"]
        eta64 = eta.double()
        p.mul_(_scalar(1 - lambd * eta64, p))
        p.sub_(grad * _scalar(eta64, p))
        # ax follows p from step t0 on; before, mu is 1 and ax is p itself
        ax.copy_(where(mu != 1, ax + (p - ax) * _scalar(mu.double(), p), p))
        eta.copy_((lr / (1 + lambd * lr * step) ** group["alpha"]).to(eta.dtype))
        mu.copy_((1 / (step - group["t0"]).clamp(min=1)).to(mu.dtype))


class Rprop(_Composed):
    """Resilient backpropagation: each element's step size grows by
    etas[1] while its gradient keeps its sign and shrinks by etas[0] when
    it flips (that step then skipped), within step_sizes; the update is
    the gradient's sign times the step size."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None, *, maximize=False):
        _check("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize))

    def _fresh(self, p, group):
        return {"prev": _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device),
                "step_size": full(tuple(p.shape), group["lr"], dtype=p.dtype, device=p.device)}

    def _rule(self, p, grad, st, group, lr, step):
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, size = st["prev"], st["step_size"]
        s = (grad * prev).sign()
        plus, minus, one = (full((), v, dtype=p.dtype) for v in (etaplus, etaminus, 1.0))
        factor = where(s > 0, plus, where(s < 0, minus, one))
        size.copy_((size * factor).clamp(lo, hi))
        # as PyTorch: where the factor is etaminus the gradient counts as 0
        grad = where(factor == minus, full((), 0.0, dtype=p.dtype), grad)
        p.sub_(grad.sign() * size)
        prev.copy_(grad)


class SparseAdam(Optimizer):
    """Adam for sparse gradients, which ember does not have (its
    embeddings' gradients are dense even with sparse=True): step raises,
    as PyTorch's does for dense gradients; use Adam (the same update on
    every row) instead."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("beta parameter at index 0", betas[0], high=1.0)
        _check("beta parameter at index 1", betas[1], high=1.0)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    def step(self, closure=None):
        for group in self.param_groups:
            if any(p.grad is not None for p in group["params"]):
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead "
                                   "(ember has no sparse gradients: nn.Embedding(sparse=True) gives dense ones)")
        return closure() if closure is not None else None
