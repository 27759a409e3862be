"""Grad mode: whether ops record the autograd graph (per thread, on by
default). Each switch works as a context manager and as a decorator."""

import functools

from .. import _C

is_grad_enabled = _C.is_grad_enabled


class _GradModeSwitch:
    """Sets grad mode to `self.mode` for a `with` block or a decorated
    function, restoring the previous mode on the way out (exceptions too)."""

    mode = None

    def __enter__(self):
        self._prev = _C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_GradModeSwitch):
    """Ops inside record no graph: for evaluation and parameter updates."""
    mode = False


class enable_grad(_GradModeSwitch):
    """Turns recording back on inside a no_grad region."""
    mode = True


_INFERENCE = [0]  # open inference_mode(True) blocks (torch.is_inference_mode_enabled)


def inference_depth():
    return _INFERENCE[0]


class inference_mode(_GradModeSwitch):
    """PyTorch's inference_mode; in ember the same as no_grad."""

    def __init__(self, mode=True):
        self.mode = not mode

    def __enter__(self):
        if not self.mode:
            _INFERENCE[0] += 1
        return super().__enter__()

    def __exit__(self, *exc):
        if not self.mode:
            _INFERENCE[0] -= 1
        return super().__exit__(*exc)

    def clone(self):
        return self.__class__(not self.mode)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class set_grad_enabled(_GradModeSwitch):
    """set_grad_enabled(mode): sets grad mode now (as a function call) and,
    used as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._prev = _C._set_grad_enabled(self.mode)

    def __enter__(self):
        return self

    def clone(self):
        return self.__class__(self.mode)

    def __call__(self, fn):
        _C._set_grad_enabled(self._prev)  # as a decorator it must not switch now

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.mode):
                return fn(*args, **kwargs)
        return wrapper
