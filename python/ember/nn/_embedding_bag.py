"""F.embedding_bag: the sum, mean or max of each bag of embedding rows, as
PyTorch's. A bag is a row of a 2-d input, or the stretch of a 1-d input
from one offset to the next (include_last_offset: the offsets end with the
input's length). padding_idx's rows take no part (not counted in a mean);
an empty bag gives zeros; per_sample_weights scale the rows of a sum.

The rows are looked up with F.embedding (max_norm's renormalisation and
scale_grad_by_freq included) and reduced into their bags by the
reductions-into-positions machinery of ember._scatter_reduce, so the whole
is differentiable, traces and compiles.
"""

import math

from .. import _C, _creation, _ops
from .._scatter_reduce import _reduce_into


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    from .functional import embedding
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "the Pytorch GitHub.")
    if input.dtype not in (_C.int64, _C.int32):
        raise ValueError(f"embedding_bag: expected the indices to be int64 or int32, got {input.dtype}")
    bag_ids, bags = _bags(input, offsets, include_last_offset)
    idx = input.reshape(-1).long()
    n_rows, dim = weight.shape
    if padding_idx is not None:
        padding_idx = padding_idx + n_rows if padding_idx < 0 else padding_idx
        keep = idx != padding_idx
    else:
        keep = _creation.ones(idx.shape[0], dtype=_C.bool, device=idx.device)
    rows = embedding(idx, weight, None, max_norm, norm_type, scale_grad_by_freq)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1).to(rows.dtype)
    # every element of a row goes to its bag's element of the (bags, dim) output;
    # the padding rows go to a spare bag (index `bags`), dropped at the end
    target = _ops.where(keep, bag_ids, _creation.full_like(bag_ids, bags))
    dest = (target.unsqueeze(1) * dim + _creation.arange(dim, device=rows.device).unsqueeze(0)).reshape(-1)
    base = _creation.zeros(bags + 1, dim, dtype=rows.dtype, device=rows.device)
    vals = rows.reshape(-1)
    if mode == "max":
        out = _reduce_into(_creation.full((bags + 1, dim), -math.inf, dtype=rows.dtype, device=rows.device), dest, vals, "amax", False)
        count = _creation.zeros(bags + 1, dtype=rows.dtype, device=rows.device).scatter_add(0, target, _creation.ones_like(
            target, dtype=rows.dtype))
        out = _ops.where(count.unsqueeze(1) > 0, out, _creation.zeros_like(out))  # (an empty bag gives zeros)
    else:
        out = _reduce_into(base, dest, vals, "sum", True)
        if mode == "mean":
            count = _creation.zeros(bags + 1, dtype=rows.dtype, device=rows.device).scatter_add(0, target, _creation.ones_like(
                target, dtype=rows.dtype))
            out = out / count.clamp(min=1.0).unsqueeze(1)
    return out[:bags]


def _bags(input, offsets, include_last_offset):
    """(each index's bag, how many bags)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        b, n = input.shape
        return _creation.arange(b, device=input.device).unsqueeze(1).expand(b, n).reshape(-1), b
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    starts = offsets.long()
    bags = starts.shape[0] - 1 if include_last_offset else starts.shape[0]
    n = input.shape[0]
    # each position's bag: how many of the bags' starts are at or before it, less one
    position = _creation.arange(n, device=input.device)
    bag = (starts[:bags].unsqueeze(0) <= position.unsqueeze(1)).sum(1) - 1
    return bag.clamp(min=0), bags
