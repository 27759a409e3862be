"""ember.random, as torch.random: the global random stream.

ember's random ops draw counter-based Philox numbers from one global state,
(seed, offset); get_rng_state() returns it as a 16-byte uint8 tensor and
set_rng_state() puts it back, so a stretch of random draws can be repeated
exactly. fork_rng() restores it on leaving its block. The state is ember's
own: a PyTorch generator state (5056 bytes of Mersenne Twister) is refused
by name, and ember's draws are not PyTorch's.

Inside a compiled function these read or move the stream outside any op, so
a trace that reaches them runs eagerly, as ember.manual_seed does.
"""

import contextlib

from . import _C
from ._generator import _DefaultGenerator, _fresh_seed, _pack

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]

default_generator = _DefaultGenerator()


def manual_seed(seed):
    """Restarts the global stream from `seed` (taken modulo 2**64);
    returns ember.default_generator, as PyTorch returns its generator."""
    return default_generator.manual_seed(seed)


def seed():
    """Restarts the global stream from a nondeterministic seed; returns it."""
    s = _fresh_seed()
    manual_seed(s)
    return s


def initial_seed():
    """The seed the global stream was last started from."""
    return _C._rng_state()[0]


def get_rng_state():
    """The global stream's state: a uint8 tensor of 16 bytes (seed and
    offset, little-endian)."""
    return _pack(*_C._rng_state())


def set_rng_state(new_state):
    """Puts back a state get_rng_state returned."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices"):
    """Draws inside the block do not move the global stream outside it: its
    state is saved on entry and restored on exit (devices: ember's CPU
    stream is the only one)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


