"""Merging samples into batches, as torch.utils.data._utils.collate:
default_collate (stack tensors along a new first dim, field by field) and
default_convert (the same conversions without stacking: what a loader with
batch_size=None applies to each sample)."""

import collections.abc
import sys

from ... import Tensor, as_tensor, float64, stack, tensor

__all__ = ["default_collate", "default_convert"]


_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                  "lists; found {}")


def default_collate(batch):
    """Merges a list of samples into a batch, as torch's default_collate:
    tensors are stacked along a new first dimension; NumPy arrays become
    tensors first; Python floats become a float64 tensor, ints (and bools)
    an int64 (bool) tensor; strings stay a list; dicts, namedtuples, tuples
    and lists are collated field by field (a tuple gives a list, as torch)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    np = _numpy_if_loaded()
    if np is not None and isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":  # objects and strings have no tensor dtype
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return default_collate([as_tensor(b) for b in batch])
    if np is not None and isinstance(elem, (np.bool_, np.number)):
        # through an array: a list of NumPy scalars would lose their dtype
        # (ember.tensor infers bool/int64/float32 from Python values)
        return as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):  # bool included: a bool tensor, as torch.tensor gives
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(elem, batch)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        return _collate_sequence(elem, batch)
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def _numpy_if_loaded():
    """NumPy, if some sample could be a NumPy value: ember does not need
    NumPy to batch its own tensors, so do not import it for them."""
    return sys.modules.get("numpy")


def _collate_mapping(elem, batch):
    fields = {key: default_collate([d[key] for d in batch]) for key in elem}
    try:
        return type(elem)(fields)
    except TypeError:  # a Mapping type that cannot be built from a dict
        return fields


def _collate_sequence(elem, batch):
    size = len(elem)
    if any(len(s) != size for s in batch):
        raise RuntimeError("each element in list of batch should be of equal size")
    # each field's samples stay the tuple zip makes: strings in a tuple or
    # list sample collate to a tuple of strings, as in torch
    fields = [default_collate(s) for s in zip(*batch)]
    if isinstance(elem, tuple):
        return fields  # PyTorch returns a list for tuples (backward compatibility)
    try:
        return type(elem)(fields)
    except TypeError:  # e.g. range cannot be built from a list
        return fields


def default_convert(data):
    """NumPy arrays (not of strings or objects) and NumPy scalars become
    tensors, inside dicts, namedtuples, tuples and lists too; everything
    else is returned as it is."""
    np = _numpy_if_loaded()
    if isinstance(data, Tensor):
        return data
    if np is not None and isinstance(data, np.ndarray):
        return data if data.dtype.kind in "OSUV" else as_tensor(data)
    if np is not None and isinstance(data, (np.bool_, np.number)):
        return as_tensor(data)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
