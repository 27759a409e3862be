"""DataPipes, as torch.utils.data's (PyTorch 1.13): datasets built by
chaining functional forms, `IterDataPipe` over iterables and `MapDataPipe`
over indexable ones:

    pipe = IterableWrapper(range(10)).map(lambda x: x * 2).filter(lambda x: x % 3 != 0).batch(2)

A functional form is a DataPipe class registered under a name by
`@functional_datapipe("name")`; the built-in ones are map, filter,
batch, unbatch, shuffle, header, enumerate, zip, concat, collate and
sharding_filter (which, in a DataLoader worker, keeps the worker's own
share). DataLoader2 is the DataLoader, as PyTorch 1.13's experimental
one is for DataPipes. The type-validation decorators pass their
functions through: nothing here checks annotations.
"""

import contextlib
import random
import sys
import types

from ._collate import default_collate
from ._worker import get_worker_info
from .dataloader import DataLoader
from .dataset import Dataset, IterableDataset

__all__ = ["IterDataPipe", "MapDataPipe", "DFIterDataPipe", "DataChunk", "functional_datapipe", "DataLoader2",
           "argument_validation", "runtime_validation", "runtime_validation_disabled", "non_deterministic",
           "guaranteed_datapipes_determinism"]


class DataChunk(list):
    """A batch a DataPipe's batch() yields: a list, iterated as one."""

    def as_str(self, indent=""):
        return indent + "[" + ", ".join(str(i) for i in list.__iter__(self)) + "]"

    def raw_iterator(self):
        yield from list.__iter__(self)


class IterDataPipe(IterableDataset):
    functions = {}

    @classmethod
    def register_datapipe_as_function(cls, function_name, cls_to_register, enable_df_api_tracing=False):
        if function_name in cls.functions:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it is already taken")

        def fn(source, *args, **kwargs):
            return cls_to_register(source, *args, **kwargs)
        fn.__name__ = function_name
        cls.functions[function_name] = fn

    def __getattr__(self, name):
        fn = type(self).functions.get(name)
        if fn is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return lambda *args, **kwargs: fn(self, *args, **kwargs)

    def __repr__(self):
        return type(self).__qualname__


class DFIterDataPipe(IterDataPipe):
    """The DataFrame-aware IterDataPipe's marker class."""


class MapDataPipe(Dataset):
    functions = {}

    register_datapipe_as_function = classmethod(IterDataPipe.register_datapipe_as_function.__func__)
    __getattr__ = IterDataPipe.__getattr__
    __repr__ = IterDataPipe.__repr__


class functional_datapipe:  # noqa: N801 (torch's spelling)
    """@functional_datapipe("name") registers a DataPipe class as
    pipe.name(...) on the pipes of its kind."""

    def __init__(self, name, enable_df_api_tracing=False):
        self.name = name

    def __call__(self, cls):
        base = IterDataPipe if issubclass(cls, IterDataPipe) else MapDataPipe if issubclass(cls, MapDataPipe) \
            else None
        if base is None:
            raise TypeError("`functional_datapipe` can only decorate IterDataPipe or MapDataPipe")
        base.register_datapipe_as_function(self.name, cls)
        return cls


# ---------------------------------------------------------------- the built-in functional forms

class IterableWrapper(IterDataPipe):
    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        yield from self.iterable


@functional_datapipe("map")
class Mapper(IterDataPipe):
    def __init__(self, datapipe, fn):
        self.datapipe, self.fn = datapipe, fn

    def __iter__(self):
        for x in self.datapipe:
            yield self.fn(x)


@functional_datapipe("filter")
class Filter(IterDataPipe):
    def __init__(self, datapipe, filter_fn):
        self.datapipe, self.filter_fn = datapipe, filter_fn

    def __iter__(self):
        for x in self.datapipe:
            keep = self.filter_fn(x)
            if not isinstance(keep, bool):
                raise ValueError("Boolean output is required for `filter_fn` of FilterIterDataPipe, got",
                                 type(keep))
            if keep:
                yield x


@functional_datapipe("batch")
class Batcher(IterDataPipe):
    def __init__(self, datapipe, batch_size, drop_last=False, wrapper_class=DataChunk):
        if batch_size <= 0:
            raise AssertionError("Batch size is required to be larger than 0!")
        self.datapipe, self.batch_size, self.drop_last, self.wrapper_class = datapipe, batch_size, drop_last, \
            wrapper_class

    def __iter__(self):
        batch = []
        for x in self.datapipe:
            batch.append(x)
            if len(batch) == self.batch_size:
                yield self.wrapper_class(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.wrapper_class(batch)


@functional_datapipe("unbatch")
class UnBatcher(IterDataPipe):
    def __init__(self, datapipe, unbatch_level=1):
        self.datapipe, self.unbatch_level = datapipe, unbatch_level

    def _flat(self, x, level):
        if level == 0 or not isinstance(x, (list, tuple)):
            yield x
            return
        for y in x:
            yield from self._flat(y, level - 1)

    def __iter__(self):
        for x in self.datapipe:
            yield from self._flat(x, self.unbatch_level if self.unbatch_level >= 0 else 1 << 30)


@functional_datapipe("shuffle")
class Shuffler(IterDataPipe):
    """A buffer of buffer_size items, drawn from at random (Python's random,
    as PyTorch 1.13's; seed it with random.seed or set_seed)."""

    def __init__(self, datapipe, *, buffer_size=10000, unbatch_level=0):
        if buffer_size <= 0:
            raise AssertionError("buffer_size should be larger than 0")
        self.datapipe = UnBatcher(datapipe, unbatch_level) if unbatch_level else datapipe
        self.buffer_size = buffer_size
        self._rng = random.Random()

    def set_seed(self, seed):
        self._rng.seed(seed)
        return self

    def __iter__(self):
        buffer = []
        for x in self.datapipe:
            if len(buffer) == self.buffer_size:
                i = self._rng.randint(0, len(buffer) - 1)
                buffer[i], x = x, buffer[i]
                yield x
            else:
                buffer.append(x)
        self._rng.shuffle(buffer)
        yield from buffer


@functional_datapipe("header")
class Header(IterDataPipe):
    def __init__(self, source_datapipe, limit=10):
        self.source_datapipe, self.limit = source_datapipe, limit

    def __iter__(self):
        for i, x in enumerate(self.source_datapipe):
            if i >= self.limit:
                return
            yield x


@functional_datapipe("enumerate")
class Enumerator(IterDataPipe):
    def __init__(self, source_datapipe, starting_index=0):
        self.source_datapipe, self.starting_index = source_datapipe, starting_index

    def __iter__(self):
        yield from enumerate(self.source_datapipe, self.starting_index)


@functional_datapipe("zip")
class Zipper(IterDataPipe):
    def __init__(self, *datapipes):
        self.datapipes = datapipes

    def __iter__(self):
        yield from zip(*self.datapipes)


@functional_datapipe("concat")
class Concater(IterDataPipe):
    def __init__(self, *datapipes):
        if not datapipes:
            raise ValueError("Expected at least one DataPipe, but got nothing")
        self.datapipes = datapipes

    def __iter__(self):
        for dp in self.datapipes:
            yield from dp


@functional_datapipe("collate")
class Collator(IterDataPipe):
    def __init__(self, datapipe, collate_fn=default_collate):
        self.datapipe, self.collate_fn = datapipe, collate_fn

    def __iter__(self):
        for x in self.datapipe:
            yield self.collate_fn(x)


@functional_datapipe("sharding_filter")
class ShardingFilter(IterDataPipe):
    """Every item once across a DataLoader's workers: worker k of n keeps
    items k, k + n, ... (all of them outside workers)."""

    def __init__(self, source_datapipe):
        self.source_datapipe = source_datapipe
        self.num_of_instances, self.instance_id = 1, 0

    def apply_sharding(self, num_of_instances, instance_id):
        self.num_of_instances, self.instance_id = num_of_instances, instance_id

    def __iter__(self):
        n, k = self.num_of_instances, self.instance_id
        info = get_worker_info()
        if info is not None and n == 1:
            n, k = info.num_workers, info.id
        for i, x in enumerate(self.source_datapipe):
            if i % n == k:
                yield x


@functional_datapipe("map")
class MapMapper(MapDataPipe):
    def __init__(self, datapipe, fn):
        self.datapipe, self.fn = datapipe, fn

    def __getitem__(self, index):
        return self.fn(self.datapipe[index])

    def __len__(self):
        return len(self.datapipe)


class SequenceWrapper(MapDataPipe):
    def __init__(self, sequence):
        self.sequence = sequence

    def __getitem__(self, index):
        return self.sequence[index]

    def __len__(self):
        return len(self.sequence)


class DataLoader2(DataLoader):
    """PyTorch 1.13's experimental DataLoader for DataPipes: the DataLoader."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None, *,
                 prefetch_factor=2, persistent_workers=False, batch_outside_worker=False, parallelism_mode="mp"):
        if batch_outside_worker:
            raise NotImplementedError("DataLoader2(batch_outside_worker=True) is not implemented in ember")
        super().__init__(dataset, batch_size=batch_size, shuffle=bool(shuffle), sampler=sampler,
                         batch_sampler=batch_sampler, num_workers=num_workers, collate_fn=collate_fn,
                         pin_memory=pin_memory, drop_last=drop_last, timeout=timeout,
                         worker_init_fn=worker_init_fn,
                         **(dict(prefetch_factor=prefetch_factor, persistent_workers=persistent_workers)
                            if num_workers else {}))


def argument_validation(f):
    return f


def runtime_validation(f):
    return f


def non_deterministic(arg):
    return arg


@contextlib.contextmanager
def runtime_validation_disabled():
    yield


@contextlib.contextmanager
def guaranteed_datapipes_determinism():
    yield


# torch.utils.data.datapipes.iter and .map: the DataPipe classes by their names
iter = types.ModuleType(__name__ + ".iter", "The IterDataPipes.")  # noqa: A001 (torch's module name)
map = types.ModuleType(__name__ + ".map", "The MapDataPipes.")  # noqa: A001
for _cls in (IterableWrapper, Mapper, Filter, Batcher, UnBatcher, Shuffler, Header, Enumerator, Zipper, Concater,
             Collator, ShardingFilter):
    setattr(iter, _cls.__name__, _cls)
map.Mapper, map.SequenceWrapper = MapMapper, SequenceWrapper
sys.modules[iter.__name__], sys.modules[map.__name__] = iter, map
