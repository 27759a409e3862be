"""Samplers, as torch.utils.data.sampler: iterables of dataset indices (or,
for BatchSampler, of lists of them) that fix the order a DataLoader reads
a map-style dataset in.

Random orders come from ember's generators: `generator` (an ember.Generator)
when given, else ember's global stream (ember.manual_seed), drawn afresh at
every iter(), so every epoch has its own order.
"""

import numbers
from typing import Generic, Iterator, TypeVar

from ... import Tensor, as_tensor, double, multinomial, randint, randperm
from ..._generator import _state_of

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base of samplers: __iter__ yields dataset indices; __len__, where
    defined, says how many."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _positive_int(name, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


class RandomSampler(Sampler[int]):
    """A random permutation of the indices; with replacement=True,
    num_samples indices drawn uniformly with repetition (num_samples may
    also cut or, in blocks of permutations, extend the permutation)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        _state_of("RandomSampler", generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            _positive_int("num_samples", num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            for start in range(0, self.num_samples, 32):
                yield from randint(0, n, (min(32, self.num_samples - start),), generator=self.generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=self.generator).tolist()
        if self.num_samples % n:
            yield from randperm(n, generator=self.generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices, in a random order (without replacement)."""

    def __init__(self, indices, generator=None):
        _state_of("SubsetRandomSampler", generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """num_samples indices of range(len(weights)), index i drawn with
    probability weights[i] / sum(weights) (ember.multinomial), with or
    without replacement."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _positive_int("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        _state_of("WeightedRandomSampler", generator)
        w = weights if isinstance(weights, Tensor) else as_tensor(weights, dtype=double)
        w = w.to(double)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Groups the indices of `sampler` into lists of batch_size (the last
    one shorter, unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler = sampler
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
