"""ember.utils.data: datasets and batching, as torch.utils.data (map-style
datasets, one process).

    ds = TensorDataset(x, y)                       # x: (N, ...), y: (N, ...)
    train, val = random_split(ds, [0.8, 0.2])
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True):
        ...

- Dataset: __getitem__ and __len__ to override; `a + b` concatenates.
- TensorDataset, Subset, ConcatDataset, random_split: as in PyTorch.
- DataLoader: batches of `batch_size` indices in order, or in the order of
  ember.randperm(n, generator=generator) when shuffle=True, drawn afresh for
  every epoch (every iter()): from `generator` (an ember.Generator) when
  given, else from ember's global stream (ember.manual_seed). Samples are
  merged by `collate_fn`, default_collate unless given. A TensorDataset with
  the default collation takes a fast path: one index op per tensor per batch
  (tensor[idx]) instead of stacking samples, with the same result.

- Sampler: an iterable of dataset indices; DataLoader(sampler=...) takes
  its order instead of shuffle's (distributed.DistributedSampler gives each
  rank of a data-parallel job its own part of the dataset).

Not here (yet): worker processes, batch samplers, IterableDataset.
"""

import bisect
import collections.abc
import math
import numbers
import sys
import warnings
from typing import Generic, TypeVar

# the public API (ember/__init__ imports this package last, so it is all there)
from ... import Tensor, arange, as_tensor, float64, int64, randperm, stack, tensor
from ..._generator import _state_of

__all__ = ["Dataset", "TensorDataset", "ConcatDataset", "Subset", "DataLoader",
           "random_split", "default_collate"]

T_co = TypeVar("T_co", covariant=True)


# ---- datasets ----

class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses give __getitem__(i) for 0 <= i < len
    and __len__. Generic, so `Dataset[int]` works in annotations as in torch."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__ "
                                  f"(subclasses of Dataset define how to load sample `index`)")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __len__ "
                                  f"(DataLoader and random_split need the number of samples)")

    def __add__(self, other):
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); all tensors share their first
    dimension, the number of samples."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for k, t in enumerate(tensors):
            if not isinstance(t, Tensor) or t.ndim == 0:
                what = type(t).__name__ if not isinstance(t, Tensor) else "a 0-d tensor"
                raise TypeError(f"TensorDataset: argument {k} must be a tensor with at least "
                                f"one dimension (the samples), got {what}")
        sizes = [t.shape[0] for t in tensors]
        if any(n != sizes[0] for n in sizes):
            raise ValueError(f"Size mismatch between tensors: the first dimensions are {sizes}; "
                             f"every tensor needs one row per sample")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The samples of each dataset in `datasets`, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"ConcatDataset: index {index} is out of range for {n} samples")
        index = index + n if index < 0 else index
        k = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][index - start]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Splits `dataset` at random into Subsets of the given `lengths`: ints
    summing to len(dataset), or fractions summing to 1 (each split gets
    floor(frac * n), the remainder handed out one by one from the first, as
    PyTorch does). The permutation is ember.randperm's, drawn from
    `generator` (an ember.Generator) or else ember's global stream."""
    _state_of("random_split", generator)  # so that a wrong kind is named as ours
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_of_fractions(lengths, n)
    for k, length in enumerate(lengths):
        if not isinstance(length, numbers.Integral) or length < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints or fractions "
                             f"summing to 1, got {lengths[k]!r} at index {k}")
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths ({sum(lengths)}) does not equal the length of "
                         f"the input dataset ({n})!")
    indices = randperm(n, generator=generator).tolist()
    splits, start = [], 0
    for length in lengths:
        splits.append(Subset(dataset, indices[start:start + length]))
        start += length
    return splits


def _lengths_of_fractions(fractions, n):
    lengths = []
    for k, frac in enumerate(fractions):
        if frac < 0 or frac > 1:
            raise ValueError(f"random_split: fraction at index {k} is not between 0 and 1 "
                             f"({frac})")
        lengths.append(int(math.floor(n * frac)))
    for k in range(n - sum(lengths)):
        lengths[k % len(lengths)] += 1
    for k, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {k} is 0. This might result in an empty "
                          f"dataset.")
    return lengths


# ---- collation ----

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


# ---- samplers ----

class Sampler(Generic[T_co]):
    """Base of samplers: __iter__ yields dataset indices, __len__ says how
    many."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


# ---- loader ----

class DataLoader:
    """Iterates over `dataset` in batches of `batch_size` samples merged by
    `collate_fn` (default_collate); shuffle=True draws a new order from
    ember.randperm (with `generator`, if given) for every pass; drop_last
    drops a final short batch."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, drop_last=False, generator=None,
                 collate_fn=None, num_workers=0):
        if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) \
                or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size!r}")
        _state_of("DataLoader", generator)  # a wrong kind fails now, not at the first pass
        if num_workers:
            raise NotImplementedError(f"DataLoader(num_workers={num_workers}): ember loads "
                                      f"batches in the calling process only; use num_workers=0")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.generator = generator
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.num_workers = 0

    def __len__(self):
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        # a generator function: the order is drawn at the first next(), as in torch
        if self.sampler is not None:
            order = as_tensor(list(iter(self.sampler)), dtype=int64)
        else:
            order = randperm(len(self.dataset), generator=self.generator) if self.shuffle \
                else arange(len(self.dataset))
        n = len(order)
        stop = n - n % self.batch_size if self.drop_last else n
        fast = self._is_plain_tensor_dataset()
        positions = None if fast else order.tolist()
        for start in range(0, stop, self.batch_size):
            end = min(start + self.batch_size, n)
            if fast:
                idx = order[start:end]  # int64 index tensor: one gather per tensor
                yield [t[idx] for t in self.dataset.tensors]
            else:
                yield self.collate_fn([self.dataset[i] for i in positions[start:end]])

    def _is_plain_tensor_dataset(self):
        """True when tensor[idx] per tensor gives what default_collate of the
        samples would: a TensorDataset whose __getitem__ is not overridden."""
        return (self.collate_fn is default_collate and isinstance(self.dataset, TensorDataset)
                and type(self.dataset).__getitem__ is TensorDataset.__getitem__)
