"""ember.nn: modules, parameters, functional, init, in PyTorch's idiom."""

from . import functional, init, parallel, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from .parallel import DataParallel  # noqa: F401


def factory_kwargs(kwargs):
    """The factory arguments (device, dtype, memory_format) in kwargs, and
    those in its own "factory_kwargs" entry, as one dict for empty() and
    friends; a TypeError for anything else, or for one given twice."""
    if kwargs is None:
        return {}
    simple = {"device", "dtype", "memory_format"}
    unexpected = kwargs.keys() - simple - {"factory_kwargs"}
    if unexpected:
        raise TypeError(f"unexpected kwargs {unexpected}")
    out = dict(kwargs.get("factory_kwargs", {}))
    for k in simple & kwargs.keys():
        if k in out:
            raise TypeError(f"{k} specified twice, in **kwargs and in factory_kwargs")
        out[k] = kwargs[k]
    return out
