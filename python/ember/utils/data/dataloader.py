"""DataLoader, as torch.utils.data.dataloader: batches from a map-style
dataset in the order a sampler gives, or from an iterable dataset's stream,
in the calling process or in worker processes.

With num_workers > 0 (as PyTorch does it, in _worker.py):
- each worker process gets its own copy of the dataset (fork, or the given
  multiprocessing_context) and a queue of batch requests; a worker seeds
  ember's, Python's and NumPy's generators from the epoch's base seed plus
  its id, then runs worker_init_fn(id);
- at most prefetch_factor requests per worker are in flight; batches come
  back through one queue, their tensors in shared memory, and are handed
  out in the sampler's order whatever order the workers finish in;
- an exception in a worker is raised again in the main process, with the
  worker's traceback in its message; a worker that dies makes the next
  batch raise, naming its pid and exit code; `timeout` bounds each wait;
- the workers are shut down when the iterator is exhausted or dropped,
  or kept for the next epoch with persistent_workers=True.
"""

import itertools
import multiprocessing
import numbers
import os
import pickle
import queue
import warnings

from ... import arange, int64, randint, randperm
from ..._generator import _state_of
from . import _worker
from ._collate import default_collate, default_convert
from ._worker import get_worker_info
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable dataset: None forever (the stream decides
    when to stop)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterates over `dataset` in batches of `batch_size` samples merged by
    `collate_fn` (default_collate); shuffle=True draws a new order for every
    pass (RandomSampler, from `generator` if given); batch_size=None hands
    out single samples (default_convert). See the module docstring for
    num_workers > 0."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device=""):
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        _state_of("DataLoader", generator)  # a wrong kind fails now, not at the first pass

        self.dataset = dataset
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory  # (no accelerator: batches stay where they are, as PyTorch without CUDA)
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)

        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")
        elif not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size!r}")

        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))

        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)  # (a TypeError if the stream has no length, as in PyTorch)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return self._single_process()
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _WorkerIterator(self)
            else:
                self._iterator._reset()
            return self._iterator
        return _WorkerIterator(self)

    def _single_process(self):
        # a generator function: the order is drawn at the first next(). The
        # workers' base seed is drawn first even with no workers, as PyTorch
        # draws it, so a generator gives the same order with and without them.
        _base_seed(self.generator)
        if self._fast_tensor_batches():
            yield from self._tensor_batches()
            return
        if self._iterable:
            stream = iter(self.dataset)
            while True:
                try:
                    yield _worker._fetch(self.dataset, stream, self.batch_size, self._auto_collation,
                                         self.collate_fn, self.drop_last)
                except StopIteration:
                    return
        for index in self._index_sampler:
            if self._auto_collation:
                yield self.collate_fn([self.dataset[i] for i in index])
            else:
                yield self.collate_fn(self.dataset[index])

    def _fast_tensor_batches(self):
        """True when tensor[idx] per tensor gives what default_collate of the
        samples would: a plain TensorDataset, default collation, and the
        loader's own sequential or shuffled order."""
        return (self.collate_fn is default_collate and isinstance(self.dataset, TensorDataset)
                and type(self.dataset).__getitem__ is TensorDataset.__getitem__
                and type(self.batch_sampler) is BatchSampler
                and type(self.sampler) in (SequentialSampler, RandomSampler)
                and not (type(self.sampler) is RandomSampler
                         and (self.sampler.replacement or self.sampler._num_samples is not None)))

    def _tensor_batches(self):
        n = len(self.dataset)
        order = randperm(n, generator=self.sampler.generator) if type(self.sampler) is RandomSampler \
            else arange(n)
        bs = self.batch_size
        stop = n - n % bs if self.drop_last else n
        for start in range(0, stop, bs):
            idx = order[start:min(start + bs, n)]  # int64 index tensor: one gather per tensor
            yield [t[idx] for t in self.dataset.tensors]

    def __del__(self):
        it = getattr(self, "_iterator", None)
        if it is not None:
            it._shutdown()


def _base_seed(generator):
    """The epoch's seed for the workers, drawn from `generator` (or ember's
    global stream) as PyTorch draws it."""
    return int(randint(0, 2 ** 62, (), generator=generator, dtype=int64).item())


class _WorkerIterator:
    """One pass (or, with persistent workers, every pass) over a DataLoader
    with worker processes."""

    def __init__(self, loader):
        self._loader = loader
        self._n = loader.num_workers
        self._in_flight = loader.prefetch_factor * self._n
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                              else None)
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._ctx = ctx
        self._done_event = ctx.Event()
        self._data_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        self._shut = False
        self._pid = os.getpid()
        self._base_seed = _base_seed(loader.generator)
        for wid in range(self._n):
            iq = ctx.Queue()
            iq.cancel_join_thread()  # (never block exit on requests a dead worker will not read)
            w = ctx.Process(target=_worker.worker_loop, daemon=True,
                            args=(loader.dataset, loader._iterable, iq, self._data_queue, self._done_event,
                                  loader._auto_collation, loader.collate_fn, loader.drop_last, self._base_seed,
                                  loader.worker_init_fn, wid, self._n, self._in_flight))
            w.start()
            self._index_queues.append(iq)
            self._workers.append(w)
        self._reset(first=True)

    def _reset(self, first=False):
        loader = self._loader
        if not first:
            # a new pass with persistent workers: what the last pass left in
            # flight is received and dropped, and iterable datasets' workers
            # start their streams again (their seeds stay those of the first
            # pass, as in PyTorch; the order is drawn afresh)
            while any(not isinstance(v, tuple) and self._active[v] for v in self._pending.values()):
                idx, data = self._get()
                if isinstance(data, _worker.StopWorker):
                    self._active[data.worker_id] = False
                self._pending.pop(idx, None)
            if loader._iterable:
                for iq in self._index_queues:
                    iq.put((None, None))
        self._sampler_iter = iter(loader._index_sampler)
        self._send_idx = 0   # the next request's number
        self._rcvd_idx = 0   # the next batch to hand out
        self._pending = {}   # request number -> worker id, or (worker id, batch) once received
        self._active = [True] * self._n
        self._worker_cycle = itertools.cycle(range(self._n))
        for _ in range(self._in_flight):
            if not self._request():
                break

    def _request(self):
        """Sends the next batch's indices to the next worker still going;
        False when the sampler has no more."""
        wid = None
        for _ in range(self._n):
            k = next(self._worker_cycle)
            if self._active[k]:
                wid = k
                break
        if wid is None:
            return False
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return False
        if self._loader._iterable:
            index = self._loader.batch_size if self._loader._auto_collation else None
        self._index_queues[wid].put((self._send_idx, index))
        self._pending[self._send_idx] = wid
        self._send_idx += 1
        return True

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                slot = self._pending.get(self._rcvd_idx)
                if isinstance(slot, tuple) or (slot is not None and self._active[slot]):
                    break
                self._pending.pop(self._rcvd_idx, None)  # its worker's stream ended before it
                self._rcvd_idx += 1
            if self._rcvd_idx >= self._send_idx:
                if not self._loader.persistent_workers:
                    self._shutdown()
                raise StopIteration
            slot = self._pending[self._rcvd_idx]
            if isinstance(slot, tuple):  # arrived earlier, out of order
                del self._pending[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._deliver(slot[1])
            idx, data = self._get()
            if isinstance(data, _worker.StopWorker):
                self._active[data.worker_id] = False
                del self._pending[idx]
                continue
            if idx != self._rcvd_idx:
                self._pending[idx] = (self._pending[idx], data)
                continue
            del self._pending[idx]
            self._rcvd_idx += 1
            return self._deliver(data)

    def _deliver(self, data):
        self._request()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _get(self):
        """The next result from any worker; raises when a worker died or
        `timeout` passed."""
        timeout = self._loader.timeout
        waited = 0.0
        # (the main process polls more often than a worker does: a dead
        # worker is reported within half a second, not five)
        step = 0.5 if not timeout else min(timeout, 0.5)
        while True:
            try:
                return pickle.loads(self._data_queue.get(timeout=step))
            except queue.Empty:
                waited += step
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    pids = ", ".join(f"pid {w.pid}, exit code {w.exitcode}" for w in dead)
                    self._shutdown()
                    raise RuntimeError(f"DataLoader worker ({pids}) exited unexpectedly") from None
                if timeout and waited >= timeout:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None

    def _shutdown(self):
        if self._shut or os.getpid() != self._pid:
            return
        self._shut = True
        try:
            self._done_event.set()
            for iq in self._index_queues:
                try:
                    iq.put(None)
                except (OSError, ValueError):
                    pass
            for w in self._workers:
                w.join(timeout=_worker.STATUS_CHECK_INTERVAL)
                if w.is_alive():
                    w.terminate()
                    w.join()
            for iq in self._index_queues:
                iq.close()
            self._data_queue.cancel_join_thread()
            self._data_queue.close()
        except Exception as e:  # noqa: BLE001 - at interpreter exit queues may already be gone
            warnings.warn(f"DataLoader: shutting the workers down failed: {e}")

    def __del__(self):
        self._shutdown()
