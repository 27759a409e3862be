"""Sorting, selection, counting and bucketing under PyTorch's names: sort,
argsort, msort, topk, kthvalue, median, nanmedian, mode, unique,
unique_consecutive, searchsorted, bucketize, bincount, histc.

Each is one op of the table (runtime/cpu/sort.c, bucket.c) called through
_C._op; this layer only turns PyTorch's arguments into attributes. Sorts are
always stable (stable=True is PyTorch's guarantee; ember gives it without
asking). The values of sort, topk, kthvalue, the medians and mode carry a
gradient to where each came from.
"""

import collections
import math
import numbers

from . import _C
from ._ops import _ID, _method, _export, return_types

_OP = {name: _ID[name] for name in (
    "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "unique", "unique_consecutive",
    "searchsorted", "bincount", "histc")}

for _name in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode"):
    _t = collections.namedtuple(_name, ["values", "indices"])
    _t.__module__ = "ember.return_types"
    setattr(return_types, _name, _t)


def _op(name, tensors, **attrs):
    return _C._op(_OP[name], tensors, attrs)


def _dim(dim, name):
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return int(dim)


def _k(k, name):
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise TypeError(f"{name}(): argument 'k' must be int, not {type(k).__name__}")
    return int(k)


@_method
def sort(input, dim=-1, descending=False, *, stable=False):
    """(values, indices) along dim, ascending unless descending; NaN sorts
    above everything; equal values keep their order (always stable)."""
    values, indices = _op("sort", [input], dims=[_dim(dim, "sort")], descending=descending, stable=True)
    return return_types.sort(values, indices)


@_method
def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort input along dim (sort(...).indices)."""
    return sort(input, dim, descending, stable=stable).indices


@_method
def msort(input):
    """input sorted along its first dim."""
    return sort(input, 0).values


@_method
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) values along dim and their indices, in
    order when sorted (else in the order they lie in input)."""
    values, indices = _op("topk", [input], dims=[_dim(dim, "topk")], k=_k(k, "topk"), descending=largest,
                          sorted=sorted)
    return return_types.topk(values, indices)


@_method
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest value along dim (k from 1) and its index."""
    values, indices = _op("kthvalue", [input], dims=[_dim(dim, "kthvalue")], k=_k(k, "kthvalue"),
                          keepdim=keepdim)
    return return_types.kthvalue(values, indices)


def _median(name, input, dim, keepdim):
    if dim is None:  # of all elements: the value only
        if input.numel() == 0 and input.is_floating_point():  # PyTorch: NaN
            return input.new_full((), math.nan)
        return _op(name, [input.reshape(-1)], dims=[0])[0]
    values, indices = _op(name, [input], dims=[_dim(dim, name)], keepdim=keepdim)
    return getattr(return_types, name)(values, indices)


@_method
def median(input, dim=None, keepdim=False):
    """The lower median: of all elements (a value), or along dim ((values,
    indices)). A NaN makes the median NaN."""
    return _median("median", input, dim, keepdim)


@_method
def nanmedian(input, dim=None, keepdim=False):
    """median, leaving out the NaNs (all NaN: NaN)."""
    return _median("nanmedian", input, dim, keepdim)


@_method
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest of equally frequent
    ones) and the index of its last occurrence."""
    values, indices = _op("mode", [input], dims=[_dim(dim, "mode")], keepdim=keepdim)
    return return_types.mode(values, indices)


def _unique_results(name, input, return_inverse, return_counts, dim):
    attrs = {} if dim is None else {"dims": [_dim(dim, name)]}
    values, inverse, counts = _op(name, [input], **attrs)
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


@_method
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (or slices along dim), sorted; with
    return_inverse where each element went, with return_counts how often
    each occurs. NaNs are each their own value, as in PyTorch."""
    return _unique_results("unique", input, return_inverse, return_counts, dim)


@_method
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """unique over runs of equal neighbours, in input order."""
    return _unique_results("unique_consecutive", input, return_inverse, return_counts, dim)


def _as_tensor_like(value, like):
    if isinstance(value, numbers.Number):
        return like.new_tensor(value, dtype=_C.result_type(like, value))
    return value


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value of input would go in sorted_sequence (its last dim)
    to keep it sorted: the first such place, or with right (side='right')
    the last. sorted_sequence is 1-d, or has input's leading dims."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted(): side can only be 'left' or 'right' but got '{side}'")
        if right and side == "left":
            raise RuntimeError("searchsorted(): side and right can't be set to opposites, got side of "
                               "left while right was True")
        right = side == "right"
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    input = _as_tensor_like(input, sorted_sequence)
    return _op("searchsorted", [sorted_sequence, input], right=right,
               dtype=_C.int32 if out_int32 else _C.int64)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value: i with boundaries[i-1] < v <= boundaries[i]
    (right: boundaries[i-1] <= v < boundaries[i])."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, _as_tensor_like(input, boundaries), out_int32=out_int32, right=right)


_export(searchsorted)
_export(bucketize)


@_method
def bincount(input, weights=None, minlength=0):
    """How often each non-negative integer occurs in the 1-d input (summing
    weights instead of ones when given); at least minlength bins."""
    tensors = [input] if weights is None else [input, weights]
    return _op("bincount", tensors, minlength=minlength)


@_method
def histc(input, bins=100, min=0, max=0):
    """A histogram of bins equal bins over [min, max] (both 0: the data's
    range); values outside it and NaNs are left out."""
    return _op("histc", [input], shape=[bins], start=float(min), end=float(max))


__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "unique",
           "unique_consecutive", "searchsorted", "bucketize", "bincount", "histc"]
