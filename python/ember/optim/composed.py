"""Adagrad, Adadelta, Adamax, NAdam and RAdam: updates written once, as
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
            if group["weight_decay"] != 0:
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
        return {"sum": full(tuple(p.shape), group["initial_accumulator_value"], dtype=p.dtype)}

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
        return {"square_avg": _C.zeros(tuple(p.shape), dtype=p.dtype),
                "acc_delta": _C.zeros(tuple(p.shape), dtype=p.dtype)}

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
        return {"exp_avg": _C.zeros(tuple(p.shape), dtype=p.dtype),
                "exp_inf": _C.zeros(tuple(p.shape), dtype=p.dtype)}

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
        return {"mu_product": _C.ones(()), "exp_avg": _C.zeros(tuple(p.shape), dtype=p.dtype),
                "exp_avg_sq": _C.zeros(tuple(p.shape), dtype=p.dtype)}

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
        return {"exp_avg": _C.zeros(tuple(p.shape), dtype=p.dtype),
                "exp_avg_sq": _C.zeros(tuple(p.shape), dtype=p.dtype)}

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
