"""ember.futures, as torch.futures: a Future holds a result that may come
later (set_result or set_exception), runs its callbacks when it does, and
chains with then(). ember.jit.fork (and ember.fork) runs its function
at once, in the calling thread, and returns a completed Future, which is
what PyTorch's fork does outside TorchScript too."""

import threading

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """A result to come: wait() blocks until it is set and returns it (or
    raises the exception set instead)."""

    def __init__(self, *, devices=None):
        self._cond = threading.Condition()
        self._done = False
        self._value = None
        self._error = None
        self._callbacks = []

    def done(self):
        return self._done

    def _complete(self, value, error):
        with self._cond:
            if self._done:
                raise RuntimeError("Future: this Future is already completed; a result can be set only once")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def set_result(self, result):
        self._complete(result, None)

    def set_exception(self, result):
        if not isinstance(result, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got {type(result).__name__}")
        self._complete(None, result)

    def wait(self):
        with self._cond:
            self._cond.wait_for(lambda: self._done)
        if self._error is not None:
            raise self._error
        return self._value

    def value(self):
        """The result of a completed Future (raises its exception)."""
        if not self._done:
            raise RuntimeError("Future.value: the Future is not completed yet; wait() for it")
        if self._error is not None:
            raise self._error
        return self._value

    def add_done_callback(self, callback):
        """callback(self) once the Future completes (now, if it has)."""
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback):
        """A new Future completed with callback(self) once this one
        completes (or with the exception callback raises)."""
        out = Future()

        def run(fut):
            try:
                result = callback(fut)
            except Exception as e:  # noqa: BLE001 (handed to the chained Future, as PyTorch does)
                out.set_exception(e)
            else:
                out.set_result(result)
        self.add_done_callback(run)
        return out

    def __repr__(self):
        return f"<ember.futures.Future {'done' if self._done else 'pending'}>"


def collect_all(futures):
    """A Future completed, with the list of futures, once all of them are."""
    futures = list(futures)
    out = Future()
    remaining = [len(futures)]
    lock = threading.Lock()
    if not futures:
        out.set_result([])

    def one(_):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            out.set_result(futures)
    for f in futures:
        f.add_done_callback(one)
    return out


def wait_all(futures):
    """The results of all the futures (raising the first error)."""
    return [f.wait() for f in futures]


def _fork(func, *args, **kwargs):
    """Runs func(*args, **kwargs) now and returns its completed Future."""
    fut = Future()
    try:
        fut.set_result(func(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 (raised again by wait, as PyTorch's fork does)
        fut.set_exception(e)
    return fut


def _wait(future):
    return future.wait()
