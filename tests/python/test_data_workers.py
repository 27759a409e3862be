"""DataLoader with worker processes, samplers and the module layout of
torch.utils.data (issue 40, item 1): batches equal to one process's and in
its order, seeds per worker, get_worker_info, exceptions with the worker's
traceback, dead workers, timeouts, persistent workers, iterable datasets,
and no processes or shared-memory files left behind."""

import glob
import multiprocessing
import os
import time

import numpy as np
import pytest

import ember
from ember.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset, RandomSampler, SequentialSampler,
                              SubsetRandomSampler, TensorDataset, WeightedRandomSampler, get_worker_info)

torch = pytest.importorskip("torch")
from conftest import forks_workers  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:This DataLoader will create"), forks_workers]


def shm_files():
    return set(glob.glob(f"/dev/shm/ember_dl_{os.getpid()}_*"))


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_files()
    yield
    for _ in range(50):  # (workers unlink their last files as they exit)
        if shm_files() == before and not multiprocessing.active_children():
            break
        time.sleep(0.05)
    assert shm_files() == before, "a DataLoader left shared-memory files behind"
    assert not multiprocessing.active_children(), "a DataLoader left worker processes behind"


class Samples(Dataset):
    """Sample i: a float tensor, an int, a dict with a bool tensor and a
    string; every dtype the shared-memory path carries."""

    def __len__(self):
        return 29

    def __getitem__(self, i):
        return (ember.arange(3, dtype=ember.float32) + i, i,
                {"mask": ember.tensor([i % 2 == 0, True]), "name": f"s{i}",
                 "half": ember.tensor([i / 4], dtype=ember.bfloat16), "scalar": ember.tensor(i * 1.5),
                 "empty": ember.zeros(0, 2), "big": ember.full((64, 64), float(i), dtype=ember.float64)})


def flat(batches):
    out = []
    for b in batches:
        out.append((b[0].tolist(), b[1].tolist(), b[2]["mask"].tolist(), list(b[2]["name"]),
                    b[2]["half"].float().tolist(), b[2]["scalar"].tolist(), tuple(b[2]["empty"].shape),
                    b[2]["big"].sum().item()))
    return out


@pytest.mark.parametrize("workers,batch_size,drop_last", [(1, 4, False), (2, 4, False), (3, 5, True), (2, 1, False)])
def test_worker_batches_equal_one_process_batches_in_order(workers, batch_size, drop_last):
    one = flat(DataLoader(Samples(), batch_size=batch_size, drop_last=drop_last))
    many = flat(DataLoader(Samples(), batch_size=batch_size, drop_last=drop_last, num_workers=workers))
    assert many == one
    assert len(many) == len(DataLoader(Samples(), batch_size=batch_size, drop_last=drop_last, num_workers=workers))


def test_shuffled_order_with_a_generator_is_the_same_with_workers():
    def order(workers):
        g = ember.Generator().manual_seed(7)
        return [b[1].tolist() for b in DataLoader(Samples(), batch_size=6, shuffle=True, generator=g,
                                                  num_workers=workers)]
    assert order(2) == order(0)
    assert sorted(sum(order(2), [])) == list(range(29))


def test_batches_from_workers_are_ordinary_writable_tensors():
    b = next(iter(DataLoader(Samples(), batch_size=3, num_workers=2)))
    x = b[0]
    x.add_(1)  # mapped memory, writable
    assert x.tolist() == [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0]]
    assert (x * 2).sum().item() == 54.0 and x.dtype == ember.float32
    assert b[2]["half"].dtype == ember.bfloat16 and b[2]["mask"].dtype == ember.bool


class WhoAmI(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return ember.tensor([info.id, info.num_workers, info.seed % 1000003, len(info.dataset)]), ember.rand(1)


def test_get_worker_info_and_a_seed_per_worker():
    assert get_worker_info() is None  # in the main process
    ember.manual_seed(3)
    batches = list(DataLoader(WhoAmI(), batch_size=2, num_workers=2))
    ids = [b[0][0, 0].item() for b in batches]
    assert ids == [0, 1, 0, 1]  # round robin, handed out in order
    assert all(b[0][0, 1].item() == 2 and b[0][0, 3].item() == 8 for b in batches)
    seeds = {b[0][0, 0].item(): b[0][0, 2].item() for b in batches}
    assert (seeds[1] - seeds[0]) % 1000003 == 1  # base seed + worker id
    draws = [b[1].flatten().tolist() for b in batches]
    assert draws[0] != draws[1]  # workers draw different numbers
    ember.manual_seed(3)
    again = [b[1].flatten().tolist() for b in DataLoader(WhoAmI(), batch_size=2, num_workers=2)]
    assert again == draws  # ... reproducibly from ember's seed
    assert [b[1].flatten().tolist() for b in DataLoader(WhoAmI(), batch_size=2, num_workers=2)] != draws


def test_worker_init_fn_runs_in_each_worker_first():
    def init(worker_id):
        ember.manual_seed(100 + worker_id)

    batches = list(DataLoader(WhoAmI(), batch_size=2, num_workers=2, worker_init_fn=init))
    for worker in (0, 1):
        ember.manual_seed(100 + worker)
        want = [ember.rand(1).item() for _ in range(4)]
        assert batches[worker][1].flatten().tolist() == want[:2]
        assert batches[worker + 2][1].flatten().tolist() == want[2:]


class Broken(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 6:
            raise KeyError(f"no sample {i}")
        return i


def test_a_worker_exception_is_raised_in_the_main_process_with_its_traceback():
    loader = DataLoader(Broken(), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1]
    assert next(it).tolist() == [2, 3]
    assert next(it).tolist() == [4, 5]
    with pytest.raises(KeyError) as e:
        next(it)
    text = str(e.value)
    assert "Caught KeyError in DataLoader worker process 1" in text
    assert "Original Traceback" in text and "no sample 6" in text and "__getitem__" in text
    assert next(it).tolist() == [8, 9]  # the loader goes on past a failed batch, as PyTorch's
    with pytest.raises(StopIteration):
        next(it)


class Dies(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 3:
            os._exit(3)
        return i


def test_a_worker_that_dies_is_named():
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+, exit code 3\) exited unexpectedly"):
        list(DataLoader(Dies(), batch_size=2, num_workers=2))


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(3 if i == 2 else 0)
        return i


def test_timeout_bounds_each_wait():
    it = iter(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.5))
    assert next(it).item() == 0 and next(it).item() == 1
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        next(it)


def test_breaking_out_early_shuts_the_workers_down():
    loader = DataLoader(Samples(), batch_size=2, num_workers=3, prefetch_factor=4)
    it = iter(loader)
    next(it)
    workers = list(it._workers)
    del it
    for w in workers:
        w.join(5)
        assert not w.is_alive()


def test_persistent_workers_serve_every_epoch_and_survive_a_break():
    loader = DataLoader(Samples(), batch_size=4, num_workers=2, persistent_workers=True, shuffle=True)
    first = iter(loader)
    pids = {w.pid for w in first._workers}
    next(first)  # a pass left unfinished
    for _ in range(3):
        seen = sorted(sum((b[1].tolist() for b in loader), []))
        assert seen == list(range(29))
        assert {w.pid for w in loader._iterator._workers} == pids
    loader._iterator._shutdown()


class Stream(IterableDataset):
    def __init__(self, n, shard=True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False)])
def test_iterable_datasets_match_pytorch(workers, batch_size, drop_last):
    import torch.utils.data as tud

    class TStream(tud.IterableDataset):
        def __iter__(self):
            info = tud.get_worker_info()
            return iter(range(10)) if info is None else iter(range(info.id, 10, info.num_workers))

    def as_lists(batches):
        return [b if isinstance(b, int) else b.tolist() for b in batches]

    want = as_lists(tud.DataLoader(TStream(), batch_size=batch_size, drop_last=drop_last, num_workers=workers))
    got = as_lists(DataLoader(Stream(10), batch_size=batch_size, drop_last=drop_last, num_workers=workers))
    assert got == want


def test_an_unsharded_stream_is_read_by_every_worker_as_in_pytorch():
    got = sorted(x for b in DataLoader(Stream(5, shard=False), batch_size=2, num_workers=2) for x in b.tolist())
    assert got == sorted(list(range(5)) * 2)


def test_persistent_workers_restart_an_iterable_stream():
    loader = DataLoader(Stream(7), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(3):
        assert sorted(sum((b.tolist() for b in loader), [])) == list(range(7))
    loader._iterator._shutdown()


def test_a_spawned_worker_context():
    x = ember.arange(20, dtype=ember.float32).reshape(10, 2)
    got = [b[0].tolist() for b in DataLoader(TensorDataset(x, x * 2), batch_size=4, num_workers=1,
                                             multiprocessing_context="spawn")]
    assert got == [x[i:i + 4].tolist() for i in range(0, 10, 4)]


# ---- samplers and arguments, against PyTorch ----

def test_batch_sampler_and_batch_size_none():
    import torch.utils.data as tud
    for drop_last in (False, True):
        want = list(tud.BatchSampler(tud.SequentialSampler(range(10)), 3, drop_last))
        assert list(BatchSampler(SequentialSampler(range(10)), 3, drop_last)) == want
        assert len(BatchSampler(SequentialSampler(range(10)), 3, drop_last)) == len(want)
    loader = DataLoader(Samples(), batch_sampler=BatchSampler(SequentialSampler(range(29)), 5, False),
                        num_workers=2)
    assert [b[1].tolist() for b in loader][-1] == [25, 26, 27, 28]
    singles = list(DataLoader(Broken(), batch_size=None, sampler=[1, 0, 3]))
    assert singles == [1, 0, 3]
    arrays = list(DataLoader([np.arange(2), np.ones(2)], batch_size=None, num_workers=1))
    assert all(isinstance(a, ember.Tensor) for a in arrays) and arrays[1].tolist() == [1.0, 1.0]


def test_random_samplers():
    g = ember.Generator().manual_seed(0)
    perm = list(RandomSampler(range(10), generator=g))
    assert sorted(perm) == list(range(10)) and perm != list(range(10))
    drawn = list(RandomSampler(range(4), replacement=True, num_samples=100, generator=g))
    assert len(drawn) == 100 and set(drawn) == {0, 1, 2, 3}
    ten = list(RandomSampler(range(4), num_samples=10, generator=g))  # two permutations and part of a third
    counts = np.bincount(ten, minlength=4)
    assert len(ten) == 10 and sorted(ten[:4]) == sorted(ten[4:8]) == [0, 1, 2, 3] and set(counts) <= {2, 3}
    subset = list(SubsetRandomSampler([5, 7, 9], generator=g))
    assert sorted(subset) == [5, 7, 9]
    counts = np.bincount(list(WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=g)), minlength=3)
    assert counts[0] == 0 and 2.6 < counts[2] / counts[1] < 3.4
    once = list(WeightedRandomSampler([1.0, 1.0, 5.0], 3, replacement=False, generator=g))
    assert sorted(once) == [0, 1, 2]


def test_arguments_refused_as_pytorch_refuses_them():
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Samples(), batch_sampler=BatchSampler(range(3), 2, False), batch_size=4)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        DataLoader(Samples(), prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(Samples(), num_workers=-1)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(Samples(), persistent_workers=True)
    loader = DataLoader(Samples(), batch_size=4, pin_memory=True, num_workers=1, prefetch_factor=1, timeout=10)
    assert len(list(loader)) == 8


def test_the_module_paths_scripts_import():
    from ember.utils.data.dataloader import DataLoader as D, default_collate  # noqa: F401
    from ember.utils.data.dataset import ConcatDataset, IterableDataset as I, Subset  # noqa: F401
    from ember.utils.data.distributed import DistributedSampler  # noqa: F401
    from ember.utils.data.sampler import BatchSampler as B, WeightedRandomSampler as W  # noqa: F401
    assert D is DataLoader and I is IterableDataset and B is BatchSampler and W is WeightedRandomSampler
