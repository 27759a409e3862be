"""Tensor indexing with PyTorch's semantics.

Basic indices (ints, slices with positive steps, None, Ellipsis) give views;
advanced indices (integer tensors, lists and arrays, bool and uint8 masks)
give copies (x[idx]) or write in place (x[idx] = v). Unlike NumPy, ints
always select (a view step applied first), even beside advanced indices;
advanced indices separated by a slice put their broadcast shape first. A list
holding a sequence, slice, None, Ellipsis or tensor is read as a tuple of
indices (PyTorch's and old NumPy's rule): x[[[0, 1], [1, 0]]] is
x[[0, 1], [1, 0]].
"""

import numbers

from . import _C

_ADVANCED = (list, tuple)
_WHERE = _C._op_ids()["where"]


def _is_advanced(k):
    from . import Tensor
    if isinstance(k, (Tensor, list, range)):  # (a range is a sequence of indices too, as in PyTorch)
        return True
    return type(k).__module__ == "numpy" and hasattr(k, "ndim") and k.ndim > 0


def _as_index_tensor(k):
    from . import Tensor, tensor
    if isinstance(k, Tensor):
        return k
    t = tensor(list(k) if isinstance(k, range) else k)
    if t.numel() == 0 and not t.dtype.is_floating_point:
        return t
    if t.dtype.is_floating_point and t.numel() == 0:
        from . import int64
        return t.to(int64)
    return t


def _as_tuple(key):
    from . import Tensor
    if isinstance(key, tuple):
        return key
    if isinstance(key, list) and len(key) < 32 and any(
            isinstance(k, (list, tuple, slice, Tensor)) or k is None or k is Ellipsis for k in key):
        return tuple(key)
    return (key,)


def _is_mask(t):
    from . import bool as bool_, uint8
    return t.dtype == bool_ or t.dtype == uint8


def _expand_key(x, key):
    """key as a tuple with Ellipsis replaced by the right number of slices."""
    key = _as_tuple(key)
    consumed = 0
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, bool):
            continue
        if _is_advanced(k):
            t = _as_index_tensor(k)
            consumed += t.ndim if _is_mask(t) else 1
        else:
            consumed += 1
    if consumed > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    out = []
    seen_ellipsis = False
    for k in key:
        if k is Ellipsis:
            if seen_ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            seen_ellipsis = True
            out.extend([slice(None)] * (x.ndim - consumed))
        else:
            out.append(k)
    return out


def _bool():
    from . import bool as b
    return b


def _apply(x, key):
    """Applies basic indices; returns (view, advanced [(dim, tensor)])."""
    key = _expand_key(x, key)
    adv = []
    d = 0
    for k in key:
        if k is None:
            x = _C._unsqueeze(x, d)
            d += 1
        elif isinstance(k, bool):  # x[True] adds a dim of size 1, x[False] of size 0
            x = _C._unsqueeze(x, d)
            if not k:
                x = _C._slice(x, d, 0, 0, 1)
            d += 1
        elif isinstance(k, numbers.Integral):
            x = _C._select(x, d, int(k))
        elif isinstance(k, slice):
            step = 1 if k.step is None else int(k.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start = 0 if k.start is None else int(k.start)
            stop = 2**62 if k.stop is None else int(k.stop)
            if x.ndim == 0:
                raise IndexError("slice() cannot be applied to a 0-dim tensor")
            x = _C._slice(x, d, start, stop, step)
            d += 1
        elif _is_advanced(k):
            t = _as_index_tensor(k)
            if _is_mask(t):  # a mask: the positions where it is True
                if tuple(t.shape) != tuple(x.shape[d:d + t.ndim]):
                    raise IndexError(f"the shape of the mask {tuple(t.shape)} does not match the "
                                     f"shape of the indexed tensor {tuple(x.shape[d:d + t.ndim])}")
                if t.ndim == 0:  # x[tensor(True)] works like x[True]
                    x = _C._unsqueeze(x, d)
                    t = t.reshape(1)
                for i, part in enumerate(_C._nonzero(t).unbind(1) if t.ndim else []):
                    adv.append((d + i, part))
                d += t.ndim
            else:
                if t.dtype.is_floating_point:
                    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
                adv.append((d, t))
                d += 1
        else:
            raise (TypeError if isinstance(k, (str, bytes)) else IndexError)(
                f"only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors "
                f"are valid indices (got {type(k).__name__})")
    return x, adv


def _lone_mask(x, key):
    """key when it is one bool tensor over x's leading dims (x[mask]), else None."""
    from . import Tensor, bool as bool_
    if isinstance(key, Tensor) and key.dtype == bool_ and 0 < key.ndim <= x.ndim and \
            tuple(key.shape) == tuple(x.shape[:key.ndim]):
        return key
    return None


def getitem(x, key):
    mask = _lone_mask(x, key)
    if mask is not None:  # the common x[mask]: no index tensors in between
        if mask.ndim == x.ndim:
            return _C._masked_select(x, mask)
        rows = _C._nonzero(mask.reshape(-1)).reshape(-1)
        return _C._index_select(x.reshape(-1, *x.shape[mask.ndim:]), 0, rows)
    view, adv = _apply(x, key)
    if not adv:
        return view
    return _C._index(view, [t for _, t in adv], [d for d, _ in adv])


def setitem(x, key, value):
    mask = _lone_mask(x, key)
    if mask is not None and (not isinstance(value, _C._TensorBase) or value.ndim == 0):
        # x[mask] = v is masked_fill_: an elementwise where, in place, with v
        # converted to x's dtype first (as assignment converts)
        v = value.to(x.dtype) if isinstance(value, _C._TensorBase) else _C.full((), value, dtype=x.dtype)
        _C._ew_(_WHERE, x, mask.reshape(*mask.shape, *([1] * (x.ndim - mask.ndim))), v, x)
        return
    if _C.is_grad_enabled() and (x.requires_grad or getattr(value, "requires_grad", False)):
        _setitem_recorded(x, key, value)
        return
    view, adv = _apply(x, key)
    if not adv:
        view.copy_(value)
        return
    _C._index_put(view, [t for _, t in adv], [d for d, _ in adv], value, False, True)


def _setitem_recorded(x, key, value):
    """x[key] = value as one index_put_ into x itself, which autograd records
    (a write through a view of x would not reach x's history): the key picks
    positions out of a grid of x's flat indices, unravelled per dim."""
    flat = _C.arange(x.numel()).reshape(tuple(x.shape)) if x.ndim else _C.arange(1).reshape(())
    picked = getitem(flat, key)
    idx = []
    for n in reversed(tuple(x.shape)):
        idx.append(picked.remainder(n))
        picked = picked.floor_divide(n)
    idx.reverse()
    if not idx:  # a 0-d x: the one element
        x.copy_(value)
        return
    _C._index_put(x, idx, list(range(len(idx))), value, False, True)


def index_put(x, indices, values, accumulate=False, inplace=False):
    """x[indices] = values (+= with accumulate), indices one per leading dim;
    a bool mask stands for the positions where it is True, over as many dims
    as it has."""
    idx, d = [], 0
    for i in indices:
        t = _as_index_tensor(i)
        if _is_mask(t):
            want = tuple(x.shape[d:d + t.ndim])
            if tuple(t.shape) != want:
                bad = next((k for k in range(t.ndim) if k >= len(want) or t.shape[k] != want[k]), 0)
                raise IndexError(f"The shape of the mask {list(t.shape)} at index {bad} does not match the shape "
                                 f"of the indexed tensor {list(x.shape)} at index {d + bad}")
            idx += list(_C._nonzero(t).unbind(1)) if t.ndim else []
            d += t.ndim
        else:
            idx.append(t)
            d += 1
    return _C._index_put(x, idx, list(range(len(idx))), values, bool(accumulate), bool(inplace))
