"""ember.multiprocessing, as torch.multiprocessing: Python's multiprocessing
(everything it exports is here), plus spawn() and the sharing-strategy
calls.

Tensors sent through its queues and pipes are pickled (their bytes
copied), not moved to shared memory as torch.multiprocessing's are; a
DataLoader's workers do send theirs through shared memory
(ember.utils.data). To share one tensor's memory between processes, create
it before forking: a forked child sees the parent's tensors."""

import multiprocessing as _mp
import os as _os
import sys as _sys
from multiprocessing import *  # noqa: F401,F403

__all__ = list(getattr(_mp, "__all__", [])) + ["spawn", "start_processes", "ProcessRaisedException",
                                               "ProcessExitedException", "set_sharing_strategy",
                                               "get_sharing_strategy", "get_all_sharing_strategies"]

_strategy = "file_system"


def get_all_sharing_strategies():
    return {"file_system"}


def get_sharing_strategy():
    return _strategy


def set_sharing_strategy(new_strategy):
    if new_strategy not in ("file_system", "file_descriptor"):
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r}")
    global _strategy
    _strategy = "file_system"  # (ember's one way: files under /dev/shm)


class ProcessException(Exception):
    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process spawn() started raised; its traceback is in the message."""


class ProcessExitedException(ProcessException):
    """A process spawn() started exited with a non-zero code or a signal."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_queue):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        import traceback
        error_queue.put(traceback.format_exc())
        _sys.exit(1)


class ProcessContext:
    """The processes spawn() started: join() waits for them, raising the
    first failure (the others are then terminated)."""

    def __init__(self, processes, error_queues):
        self.processes, self.error_queues = processes, error_queues

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            alive = [p for p in self.processes if p.is_alive()]
            for i, p in enumerate(self.processes):
                if p.is_alive() or p.exitcode == 0:
                    continue
                for q in alive:
                    q.terminate()
                for q in alive:
                    q.join()
                if not self.error_queues[i].empty():
                    tb = self.error_queues[i].get()
                    raise ProcessRaisedException(f"\n\n-- Process {i} terminated with the following error:\n{tb}",
                                                 i, p.pid)
                if p.exitcode < 0:
                    import signal
                    name = signal.Signals(-p.exitcode).name
                    raise ProcessExitedException(f"process {i} terminated with signal {name}", i, p.pid,
                                                 p.exitcode, name)
                raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i, p.pid,
                                             p.exitcode)
            if not alive:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            alive[0].join(0.05)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Starts nprocs processes running fn(i, *args), i = 0..nprocs-1; with
    join, waits for all and raises the first failure with its traceback."""
    ctx = _mp.get_context(start_method)
    error_queues, processes = [], []
    for i in range(nprocs):
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_wrap, args=(fn, i, args, q), daemon=daemon)
        p.start()
        error_queues.append(q)
        processes.append(p)
    context = ProcessContext(processes, error_queues)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """torch.multiprocessing.spawn: start_processes with the spawn method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
