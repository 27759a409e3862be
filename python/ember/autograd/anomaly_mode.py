"""Anomaly detection: while it is on, every autograd node records the
Python stack that made it, and a backward formula returning NaN raises a
RuntimeError naming the node and that stack."""

import functools
import warnings

from .. import _C


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only "
                      "be enabled for debugging.", stacklevel=2)
        self.prev = _C._set_anomaly(self.check_nan)

    def __exit__(self, *exc):
        _C._set_anomaly(self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turns anomaly detection on or off from here (or for a with block)."""

    def __init__(self, mode, check_nan=True):
        self.prev = _C._set_anomaly(bool(mode) and check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_anomaly(self.prev)


def is_anomaly_enabled():
    return _C._anomaly()
