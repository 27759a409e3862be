"""DistributedSampler: each rank of a data-parallel job gets its own part
of a dataset, as torch.utils.data.distributed.DistributedSampler.

The indices (shuffled with seed + epoch, the same on every rank, when
shuffle) are padded by repeating their start until they divide evenly
(or cut to a multiple with drop_last), and rank r takes every
num_replicas-th from r. So the ranks' parts are disjoint (up to the
padding), cover the dataset, and have one length. Call set_epoch(e) at
the start of every epoch, or every epoch has the same order.
"""
import math

from ... import Generator, randperm
from . import Sampler


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from ... import distributed as dist
        if num_replicas is None:
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: num_replicas not given and the default process group "
                                   "is not initialized (init_process_group)")
            num_replicas = dist.get_world_size()
        if rank is None:
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: rank not given and the default process group is not "
                                   "initialized (init_process_group)")
            rank = dist.get_rank()
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be positive, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            elif indices:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Sets the epoch that, with seed, draws the shuffled order."""
        self.epoch = epoch
