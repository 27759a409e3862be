"""DataLoader worker processes: the loop a worker runs, what it knows about
itself (get_worker_info), how its batches reach the main process (tensors
in shared memory), and how its exceptions do (with its traceback).

Tensors cross in shared memory, as PyTorch's do: a worker writes each
tensor of a batch once, into a file of its own under /dev/shm, and sends
the file's name through the result queue; the main process maps the file,
unlinks it at once (the mapping keeps the memory until the last tensor on
it is freed) and wraps the mapping as a tensor, with no further copy. A
pipe would copy every batch three times. Files of batches a shutdown left
in flight are unlinked by their worker as it exits. (A main process killed
outright leaves its workers' last few files in /dev/shm, named
ember_dl_<its pid>_*.)
"""

import collections
import ctypes
import mmap
import os
import queue
import random
import sys
import tempfile
import traceback
from dataclasses import dataclass

from ... import Tensor, _C

# How often a waiting worker or main process checks that the other side is
# still there (seconds), as torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL.
STATUS_CHECK_INTERVAL = 5.0

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker process knows about itself: id (0..num_workers-1),
    num_workers, seed (the base seed of this epoch plus id: ember's,
    Python's random and NumPy's generators were seeded from it), and its
    copy of the dataset."""
    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """In a DataLoader worker process, its WorkerInfo; in the main process,
    None. An IterableDataset shards its stream with it."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, with the worker's traceback as text,
    to be raised again in the main process."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:  # KeyError quotes its message: keep the text readable
            msg = KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except TypeError:  # an exception class that wants other arguments
            raise RuntimeError(msg) from None
        raise exc


class KeyErrorMessage(str):
    def __repr__(self):
        return self


class StopWorker:
    """What a worker sends when its IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


# ---- tensors through shared memory ----

def _shm_dir():
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def _reduce_to_shared(t):
    """Pickling a tensor in a worker: its bytes into a new shared-memory file,
    whose name travels instead (rebuilt by _rebuild_from_shared)."""
    c = t.detach().contiguous()
    nbytes = c.numel() * c.element_size()
    fd, path = tempfile.mkstemp(prefix=f"ember_dl_{os.getppid()}_", dir=_shm_dir())
    try:
        if nbytes:
            view = memoryview((ctypes.c_char * nbytes).from_address(c._address("a DataLoader worker's batch"))).cast("B")
            written = 0
            while written < nbytes:
                written += os.write(fd, view[written:])
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    if _made:
        _made[-1].append(path)
    return (_rebuild_from_shared, (path, str(c.dtype).split(".")[-1], tuple(c.shape), nbytes))


# In a worker: the files of its last few batches (the main process maps and
# unlinks each file as it receives it, but at a shutdown the batches still
# in flight are never received; the worker unlinks those as it exits, and
# unlinking one the main process already has is harmless). No more batches
# than the loader keeps in flight can be unreceived, so a short window does.
_made = collections.deque(maxlen=64)


def _rebuild_from_shared(path, dtype, shape, nbytes):
    """In the main process: the tensor a worker wrote to `path`, mapped
    (not copied); the file is unlinked at once."""
    if not os.path.basename(path).startswith("ember_dl_") or os.path.dirname(path) != _shm_dir():
        raise RuntimeError(f"DataLoader: a worker sent a tensor file outside ember's shared-memory folder: {path!r}")
    try:
        fd = os.open(path, os.O_RDONLY if nbytes == 0 else os.O_RDWR)
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    try:
        if os.fstat(fd).st_size != nbytes:
            raise RuntimeError(f"DataLoader: a worker's tensor file {path} holds {os.fstat(fd).st_size} bytes, "
                               f"not the {nbytes} its tensor needs")
        dt = getattr(_C, dtype)
        if nbytes == 0:
            return _C.zeros(shape, dtype=dt)
        buf = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    import numpy as np  # (the buffer protocol route to a tensor over the mapping)
    raw = _C.from_numpy(np.frombuffer(buf, dtype=np.uint8))
    return raw.view(dt).reshape(shape)


# ---- the worker loop ----

def _seed_everything(seed):
    random.seed(seed)
    _C.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:  # NumPy's own, from a mix of the seed (NumPy wants 32 bits)
        np.random.seed((seed * 2654435761 + 0x9E3779B9) % (2 ** 32))


def worker_loop(dataset, iterable, index_queue, data_queue, done_event, auto_collation, collate_fn, drop_last,
                base_seed, init_fn, worker_id, num_workers, in_flight):
    """Runs in a worker process: fetch what index_queue asks for, put
    (task, batch) or (task, ExceptionWrapper) on data_queue, until None
    arrives or the main process is gone."""
    global _worker_info, _made
    parent = os.getppid()
    _made = collections.deque(maxlen=in_flight + 2)
    try:
        from multiprocessing.reduction import ForkingPickler
        ForkingPickler.register(Tensor, _reduce_to_shared)
        for cls in Tensor.__subclasses__():  # (nn.Parameter and the like pickle the same way)
            ForkingPickler.register(cls, _reduce_to_shared)
        _C.set_num_threads(1)  # the workers share the cores: one thread each, as PyTorch's
        seed = base_seed + worker_id
        _seed_everything(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            stream = iter(dataset) if iterable else None
        except Exception:
            init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
        exhausted = False
        while True:
            try:
                task = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent or done_event.is_set():
                    break  # the main process is gone, or shutting down without us
                continue
            if task is None:
                break
            idx, index = task
            if idx is None:  # a new pass of persistent workers: the stream starts again
                exhausted = False
                if iterable and init_error is None:
                    try:
                        stream = iter(dataset)
                    except Exception:
                        init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
                continue
            if done_event.is_set() or exhausted:
                continue
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = _fetch(dataset, stream, index, auto_collation, collate_fn, drop_last)
                except StopIteration:
                    data, exhausted = StopWorker(worker_id), True
                except Exception:
                    data = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
            _made.append([])
            data_queue.put(_serialize(idx, data, worker_id))
    except KeyboardInterrupt:
        pass  # the main process handles ^C and shuts us down
    if done_event.is_set() or os.getppid() != parent:
        # shutting down early: what is still in flight will not be received
        data_queue.cancel_join_thread()
        for paths in _made:
            for p in paths:
                _unlink_quietly(p)
    data_queue.close()


def _serialize(idx, data, worker_id):
    """(idx, data) pickled here, in the worker's own thread, so the tensors'
    shared-memory files exist (and are in _made) before it moves on, not
    later in the queue's feeder thread, where an exit could orphan them; a
    batch that cannot be pickled becomes the exception saying why."""
    from multiprocessing.reduction import ForkingPickler
    try:
        return bytes(ForkingPickler.dumps((idx, data)))
    except Exception:
        error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id} (sending a batch)")
        return bytes(ForkingPickler.dumps((idx, error)))


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _fetch(dataset, stream, index, auto_collation, collate_fn, drop_last):
    """One batch (or one sample, without auto collation) of a map-style
    dataset at `index`, or the next of an iterable one's `stream`."""
    if stream is None:
        if auto_collation:
            return collate_fn([dataset[i] for i in index])
        return collate_fn(dataset[index])
    if not auto_collation:
        return collate_fn(next(stream))
    batch = []
    for _ in range(index):  # (index: the batch size)
        try:
            batch.append(next(stream))
        except StopIteration:
            break
    if not batch or (drop_last and len(batch) < index):
        raise StopIteration
    return collate_fn(batch)

