"""Anomaly detection: while it is on, every autograd node records the
Python stack that made it, and (unless check_nan=False) a backward formula
returning NaN raises a RuntimeError naming the node and that stack."""

import functools
import warnings

from .. import _C


def _set(mode, check_nan):
    """Sets both switches; the previous (mode, check_nan)."""
    return _C._set_anomaly(mode), _C._set_anomaly_check_nan(check_nan)


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only "
                      "be enabled for debugging.", stacklevel=2)
        self.prev = _set(True, self.check_nan)

    def __exit__(self, *exc):
        _set(*self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turns anomaly detection on or off from here (or for a with block)."""

    def __init__(self, mode, check_nan=True):
        self.prev = _set(bool(mode), check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(*self.prev)


def is_anomaly_enabled():
    return _C._anomaly()


def is_anomaly_check_nan_enabled():
    return _C._anomaly_check_nan()


def set_anomaly_enabled(enabled, check_nan=True):
    """torch.set_anomaly_enabled: the switches set_detect_anomaly sets."""
    _set(bool(enabled), check_nan)
