"""Stochastic weight averaging, as torch.optim.swa_utils: AveragedModel
(a running average of a model's parameters), SWALR (anneal to a constant
SWA learning rate) and update_bn (recompute BatchNorm statistics for the
averaged weights)."""

import copy
import math

from .. import _C
from ..autograd import no_grad
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler


class AveragedModel(Module):
    """A copy of `model` whose parameters are the average of the models
    passed to update_parameters (avg_fn(averaged, new, n) decides how;
    default the equal-weight running mean). With use_buffers, buffers are
    averaged too; otherwise they are left as copied."""

    def __init__(self, model, device=None, avg_fn=None, use_buffers=False):
        super().__init__()
        self.module = copy.deepcopy(model)
        self.register_buffer("n_averaged", _C.zeros((), dtype=_C.int64))
        self.avg_fn = avg_fn or (lambda averaged, new, n: averaged + (new - averaged) / (n + 1))
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @no_grad()
    def update_parameters(self, model):
        mine = list(self.module.parameters()) + (list(self.module.buffers()) if self.use_buffers else [])
        theirs = list(model.parameters()) + (list(model.buffers()) if self.use_buffers else [])
        n = int(self.n_averaged.item())
        for a, b in zip(mine, theirs):
            b = b.detach().to(a.dtype)
            if n == 0 or not a.is_floating_point():
                a.copy_(b)
            else:
                a.copy_(self.avg_fn(a.detach(), b, self.n_averaged.to(a.dtype)))
        self.n_averaged += 1


@no_grad()
def update_bn(loader, model, device=None):
    """One pass over loader (inputs, or (input, ...) tuples) in train mode,
    with every BatchNorm's running statistics reset and accumulated as a
    plain average (momentum None), then restored to their momentum."""
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            m.running_mean.zero_()
            m.running_var.fill_(1.0)
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
        m.num_batches_tracked.zero_()
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to swa_lr over anneal_epochs (cos or
    linear), then holds it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        n = len(optimizer.param_groups)
        lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * n
        if len(lrs) != n:
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: swa_lr has {len(lrs)}, "
                             f"optimizer.param_groups has {n}")
        for lr, g in zip(lrs, optimizer.param_groups):
            g["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_func = (lambda t: (1 - math.cos(math.pi * t)) / 2) if anneal_strategy == "cos" else (lambda t: t)
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        groups = self.optimizer.param_groups
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev)]
