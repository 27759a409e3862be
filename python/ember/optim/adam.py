"""Adam and AdamW (decoupled weight decay)."""

from .. import _C
from .optimizer import Optimizer, _step_tensor


class Adam(Optimizer):
    _fused_steps = True

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      fused=fused))

    def _state(self, p, g, traced=False):
        """p's state, its moments made on the first step."""
        st = self._traced_state(p) if traced else self.state[p]
        if "exp_avg" not in st:
            st["exp_avg"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
            st["exp_avg_sq"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
            if g["amsgrad"]:
                st["max_exp_avg_sq"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
        return st

    def _update(self, g):
        ps, gs = self._with_grads(g)
        if not ps:
            return
        ms, vs, vmaxs, steps = [], [], [], []
        for p in ps:
            st = self._state(p, g)
            steps.append(_step_tensor(st))
            ms.append(st["exp_avg"])
            vs.append(st["exp_avg_sq"])
            vmaxs.append(st.get("max_exp_avg_sq"))
        b1, b2 = g["betas"]
        self._fused_step(_C._adam_step, ps, gs, ms, vs, vmaxs if g["amsgrad"] else None, steps, g["lr"], b1, b2,
                         g["eps"], g["weight_decay"], self._decoupled, g["amsgrad"], g["maximize"])

    def _update_traced(self, g, lr):
        b1, b2 = g["betas"]
        wd, eps = g["weight_decay"], g["eps"]
        for p in g["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = self._state(p, g, traced=True)
            step = _step_tensor(st, traced=True).double()
            m, v = st["exp_avg"], st["exp_avg_sq"]
            gi = -grad if g["maximize"] else grad
            if wd != 0 and self._decoupled:
                p.mul_(1 - lr * wd)
            elif wd != 0:
                gi = gi + p * wd
            m.mul_(b1).add_(gi * (1 - b1))
            v.mul_(b2).add_(gi * (1 - b2) * gi)
            if g["amsgrad"]:
                vmax = st["max_exp_avg_sq"]
                vmax.copy_(vmax.maximum(v))
                v = vmax
            step_size = (lr / (1 - b1 ** step)).to(p.dtype)
            bias2_sqrt = (1 - b2 ** step).sqrt().to(p.dtype)
            p.sub_(m / (v.sqrt() / bias2_sqrt + eps) * step_size)


class AdamW(Adam):
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, **kwargs):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)
