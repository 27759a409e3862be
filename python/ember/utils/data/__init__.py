"""ember.utils.data: datasets, samplers and batching, as torch.utils.data.

    ds = TensorDataset(x, y)                       # x: (N, ...), y: (N, ...)
    train, val = random_split(ds, [0.8, 0.2])
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True, num_workers=2):
        ...

- dataset: Dataset (__getitem__, __len__; `a + b` concatenates),
  IterableDataset (__iter__), TensorDataset, ConcatDataset, ChainDataset,
  Subset, random_split.
- sampler: SequentialSampler, RandomSampler, SubsetRandomSampler,
  WeightedRandomSampler, BatchSampler; distributed.DistributedSampler gives
  each rank of a data-parallel job its own part.
- datapipes: IterDataPipe, MapDataPipe and their functional forms
  (map, filter, batch, shuffle, ..., sharding_filter), DataLoader2.
- dataloader: DataLoader with PyTorch's arguments (batch_sampler,
  batch_size=None, worker processes with prefetch_factor, worker_init_fn,
  timeout, persistent_workers, generator; pin_memory is accepted and, with
  no accelerator, changes nothing), get_worker_info, default_collate and
  default_convert.

Random orders come from ember's generators (`generator`, else the global
stream of ember.manual_seed), afresh at every pass. A TensorDataset with
the default collation, in one process, takes a fast path: one index op per
tensor per batch (tensor[idx]) instead of stacking samples, with the same
result.
"""

from ._collate import default_collate, default_convert
from .dataloader import DataLoader
from ._worker import get_worker_info
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "DataLoader", "default_collate", "default_convert", "get_worker_info", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]
from .distributed import DistributedSampler  # noqa: E402  (it imports Sampler from here)
from .datapipes import (DataChunk, DataLoader2, DFIterDataPipe, IterDataPipe, MapDataPipe,  # noqa: E402,F401
                        argument_validation, functional_datapipe, guaranteed_datapipes_determinism,
                        non_deterministic, runtime_validation, runtime_validation_disabled)
