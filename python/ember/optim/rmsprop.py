"""RMSprop (optionally centered, with momentum)."""

from .. import _C
from .optimizer import Optimizer, _step_tensor


class RMSprop(Optimizer):
    _fused_steps = True

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def _state(self, p, g, traced=False):
        """p's state, its averages made on the first step."""
        st = self._traced_state(p) if traced else self.state[p]
        if "square_avg" not in st:
            st["square_avg"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
            if g["momentum"] > 0:
                st["momentum_buffer"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
            if g["centered"]:
                st["grad_avg"] = _C.zeros(tuple(p.shape), dtype=p.dtype, device=p.device)
        return st

    def _update(self, g):
        ps, gs = self._with_grads(g)
        if not ps:
            return
        sq, ga, bufs = [], [], []
        for p in ps:
            st = self._state(p, g)
            _step_tensor(st)
            sq.append(st["square_avg"])
            ga.append(st.get("grad_avg"))
            bufs.append(st.get("momentum_buffer"))
        self._fused_step(_C._rmsprop_step, ps, gs, sq, ga if g["centered"] else None,
                         bufs if g["momentum"] > 0 else None, g["lr"], g["alpha"], g["eps"],
                         g["weight_decay"], g["momentum"], g["centered"], g["maximize"])

    def _update_traced(self, g, lr):
        alpha, eps, wd, mom = g["alpha"], g["eps"], g["weight_decay"], g["momentum"]
        for p in g["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = self._state(p, g, traced=True)
            _step_tensor(st, traced=True)
            gi = -grad if g["maximize"] else grad
            if wd != 0:
                gi = gi + p * wd
            sq = st["square_avg"]
            sq.mul_(alpha).add_(gi * (1 - alpha) * gi)
            if g["centered"]:
                ga = st["grad_avg"]
                ga.mul_(alpha).add_(gi * (1 - alpha))
                avg = (sq - ga * ga).sqrt() + eps
            else:
                avg = sq.sqrt() + eps
            if mom > 0:
                buf = st["momentum_buffer"]
                buf.mul_(mom).add_(gi / avg)
                p.sub_(buf * lr)
            else:
                p.sub_(gi / avg * lr)
