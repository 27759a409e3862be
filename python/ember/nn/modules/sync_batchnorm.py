"""SyncBatchNorm: batch normalisation whose training statistics are those of
the whole batch across the ranks of an ember.distributed (MPI) job, as
PyTorch's, on the CPU. In a world of one, without a process group, or in
eval mode it is BatchNorm.

Forward: each rank's per-channel count, mean and sum of squared deviations
are gathered and combined exactly (Chan's parallel formula, so no
E[x^2] - E[x]^2 cancellation); the running statistics take the global
mean and unbiased variance. Backward: the input's gradient needs the
global sums of dy and dy * x_hat, one all_reduce; the weight's and bias's
gradients are this rank's own, which DistributedDataParallel then reduces
as it does every parameter's."""

from ... import _C, _creation, _ops
from ...autograd import Function
from .normalization import _BatchNorm


def _channels_last(x):
    """x as (C, everything else): the per-channel reductions' layout."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


class _SyncBatchNormFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, group, world):
        import ember.distributed as dist
        flat = _channels_last(input).double()
        n_local = flat.shape[1]
        mean_local = flat.mean(1)
        m2_local = ((flat - mean_local.unsqueeze(1)) ** 2).sum(1)
        mine = _ops.cat([_creation.full((1,), float(n_local), dtype=_C.float64), mean_local, m2_local])
        gathered = _creation.zeros(world, mine.shape[0], dtype=_C.float64)
        dist.all_gather_into_tensor(gathered, mine, group=group)
        counts, means, m2s = gathered[:, :1], gathered[:, 1:1 + flat.shape[0]], gathered[:, 1 + flat.shape[0]:]
        total = counts.sum()
        if total.item() <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)} on each rank ({int(total.item())} in all)")
        mean = (counts * means).sum(0) / total
        m2 = (m2s + counts * (means - mean) ** 2).sum(0)
        var = m2 / total
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_((mean * momentum).to(running_mean.dtype))
            running_var.mul_(1 - momentum).add_((m2 / (total - 1) * momentum).to(running_var.dtype))
        invstd = (var + eps).rsqrt()
        shape = [1, -1] + [1] * (input.ndim - 2)
        x_hat = (input - mean.to(input.dtype).reshape(shape)) * invstd.to(input.dtype).reshape(shape)
        out = x_hat
        if weight is not None:
            out = out * weight.reshape(shape) + bias.reshape(shape)
        ctx.save_for_backward(x_hat, invstd.to(input.dtype), weight)
        ctx.total, ctx.group, ctx.shape = total.item(), group, shape
        return out

    @staticmethod
    def backward(ctx, grad_out):
        import ember.distributed as dist
        x_hat, invstd, weight = ctx.saved_tensors
        shape = ctx.shape
        dims = [0] + list(range(2, grad_out.ndim))
        sum_dy = grad_out.sum(dims)
        sum_dy_xhat = (grad_out * x_hat).sum(dims)
        both = _ops.cat([sum_dy, sum_dy_xhat]).double()
        dist.all_reduce(both, group=ctx.group)
        c = sum_dy.shape[0]
        g_dy = (both[:c] / ctx.total).to(grad_out.dtype)
        g_dy_xhat = (both[c:] / ctx.total).to(grad_out.dtype)
        scale = invstd if weight is None else invstd * weight
        grad_in = (grad_out - g_dy.reshape(shape) - x_hat * g_dy_xhat.reshape(shape)) * scale.reshape(shape)
        grad_w = sum_dy_xhat if weight is not None else None
        grad_b = sum_dy if weight is not None else None
        return grad_in, grad_w, grad_b, None, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over (N, C, ...) input with statistics synchronised across
    process_group (the world by default)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    def _normalize(self, input, use_batch, momentum):
        import ember.distributed as dist
        world = 1
        if use_batch and self.training and dist.is_initialized():
            world = dist.get_world_size(self.process_group)
        if world <= 1:
            return super()._normalize(input, use_batch, momentum)
        track = self.track_running_stats
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, self.running_mean if track else None,
                                            self.running_var if track else None, self.eps, momentum,
                                            self.process_group, world)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d in it replaced by a SyncBatchNorm
        holding the same parameters and statistics."""
        out = module
        if isinstance(module, _BatchNorm) and type(module).__name__.startswith("BatchNorm"):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
