"""Gradient clipping, applied in place to the .grad of parameters."""

import math

from ... import _C, _ops
from ...autograd import no_grad


def _grads(parameters):
    if isinstance(parameters, _C._TensorBase):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales all gradients together so that their joint norm is at most
    max_norm; returns the norm before clipping."""
    grads = _grads(parameters)
    norm_type = float(norm_type)
    if not grads:
        return _C.tensor(0.0)
    if norm_type == math.inf:
        total = _ops.stack([g.abs().max().double() for g in grads]).max()
    else:
        total = _ops.stack([g.norm(p=norm_type).double() for g in grads]).norm(p=norm_type)
    if error_if_nonfinite and not bool(total.isfinite()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           f"is non-finite, so it cannot be clipped. To disable this error and "
                           f"scale the gradients by the non-finite norm anyway, set "
                           f"`error_if_nonfinite=False`")
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))
    return total.to(grads[0].dtype)


@no_grad()
def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value]."""
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)
