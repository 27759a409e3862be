"""Datasets, as torch.utils.data.dataset: map-style (Dataset, with
__getitem__ and __len__) and iterable (IterableDataset, with __iter__), and
their combinations: TensorDataset, ConcatDataset, ChainDataset, Subset,
random_split."""

import bisect
import math
import numbers
import warnings
from typing import Generic, TypeVar

from ... import Tensor, randperm
from ..._generator import _state_of

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split"]

T_co = TypeVar("T_co", covariant=True)


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


class IterableDataset(Dataset):
    """A dataset of samples from __iter__ (a stream: files, generators). With
    worker processes every worker iterates its own copy; shard the stream in
    __iter__ with get_worker_info(), or each worker yields it all."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__ (an IterableDataset yields "
                                  f"its samples)")

    def __len__(self):
        # a stream has no length unless a subclass gives one: Python's own
        # TypeError, as for PyTorch's IterableDataset (list() then just
        # iterates, where Dataset's NotImplementedError would escape it)
        raise TypeError(f"object of type '{type(self).__name__}' has no len()")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """The samples of each IterableDataset in `datasets`, one stream after
    the other."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


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
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset (use ChainDataset)")
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
