"""SGD with momentum, dampening, Nesterov and weight decay."""

from .. import _C
from .optimizer import Optimizer, required


class SGD(Optimizer):
    _fused_steps = True

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable))

    def _update(self, g):
        ps, gs = self._with_grads(g)
        if not ps:
            return
        bufs, firsts = None, [False] * len(ps)
        if g["momentum"] != 0:
            bufs = []
            for i, p in enumerate(ps):
                st = self.state[p]
                if st.get("momentum_buffer") is None:
                    st["momentum_buffer"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
                    firsts[i] = True
                bufs.append(st["momentum_buffer"])
        self._fused_step(_C._sgd_step, ps, gs, bufs, firsts, g["lr"], g["momentum"], g["dampening"],
                         g["weight_decay"], g["nesterov"], g["maximize"])

    def _update_traced(self, g, lr):
        wd, mom, damp = g["weight_decay"], g["momentum"], g["dampening"]
        for p in g["params"]:
            grad = p.grad
            if grad is None:
                continue
            d = -grad if g["maximize"] else grad
            if wd != 0:
                d = d + p * wd
            if mom != 0:
                st = self._traced_state(p)
                buf = st.get("momentum_buffer")
                if buf is None:
                    buf = st["momentum_buffer"] = d.clone()
                else:
                    buf.mul_(mom).add_(d * (1 - damp))
                d = d + buf * mom if g["nesterov"] else buf
            p.sub_(d * lr)
