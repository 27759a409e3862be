"""ember.Generator: a random number stream of its own, as torch.Generator.

    g = ember.Generator().manual_seed(0)
    ember.randperm(10, generator=g)   # the same permutations for the same seed,
    ember.rand(3, generator=g)        # whatever ember.manual_seed's stream did

ember's random ops draw Philox counters from a (seed, offset) state; each op
reserves the counters it uses. A Generator is such a state of its own: an
op given one draws from it instead of the global state, advancing it and
leaving the global one untouched (python/csrc/generator.c swaps it in).
rand, randn, randint and randperm take generator=.
"""

import numbers
import struct

from . import _C
from ._tensor import device as _device

__all__ = ["Generator"]

# EM_DEFAULT_SEED: the seed a fresh process and a fresh Generator start from
# (PyTorch's default seed too)
_DEFAULT_SEED = 67280421310721
_SEED_MASK = 2**64 - 1


class Generator:
    """A seeded random stream for ember's random ops (CPU)."""

    def __init__(self, device="cpu"):
        if str(device) not in ("cpu", "cpu:0"):
            raise RuntimeError(f"Generator(device={str(device)!r}): ember runs on the CPU only")
        # [seed, next unused Philox counter]: the C side reads it and stores
        # the advanced counter back after every draw
        self._state = [_DEFAULT_SEED, 0]

    @property
    def device(self):
        return _device("cpu")

    def manual_seed(self, seed):
        """Restarts the stream from `seed` (an int; taken modulo 2**64, so
        negative seeds work as in PyTorch). Returns the generator."""
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
            raise TypeError(f"Generator.manual_seed(): seed must be an int, got "
                            f"{type(seed).__name__}")
        self._state[:] = [int(seed) & _SEED_MASK, 0]
        return self

    def initial_seed(self):
        """The seed the stream was last started from."""
        return self._state[0]

    def seed(self):
        """Restarts the stream from a nondeterministic seed; returns it."""
        s = _fresh_seed()
        self.manual_seed(s)
        return s

    def get_state(self):
        """The stream's state as a uint8 tensor (16 bytes: seed and offset,
        little-endian), for set_state."""
        return _pack(*self._state)

    def set_state(self, new_state):
        """Puts back a state get_state returned. Returns the generator."""
        self._state[:] = _unpack(new_state, "Generator.set_state")
        return self

    def __repr__(self):
        return f"<ember.Generator seed={self._state[0]} offset={self._state[1]}>"


class _DefaultGenerator(Generator):
    """ember.default_generator: the global stream (what random ops draw from
    when given no generator), as a Generator object."""

    def __init__(self):
        pass

    @property
    def _state(self):
        return list(_C._rng_state())

    def manual_seed(self, seed):
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
            raise TypeError(f"manual_seed(): seed must be an int, got {type(seed).__name__}")
        _C.manual_seed(int(seed) & _SEED_MASK)
        return self

    def set_state(self, new_state):
        _C._set_rng_state(*_unpack(new_state, "set_rng_state"))
        return self


def _fresh_seed():
    import os
    return int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)


def _pack(seed, offset):
    return _C.tensor(list(struct.pack("<QQ", seed, offset)), dtype=_C.uint8)


def _unpack(state, op):
    """(seed, offset) from a state tensor, refusing anything else by name."""
    if not isinstance(state, _C._TensorBase) or state.dtype != _C.uint8:
        raise TypeError(f"{op}: expected a uint8 tensor (from get_rng_state/get_state), got "
                        f"{getattr(state, 'dtype', type(state).__name__)}")
    if state.numel() != 16:
        raise RuntimeError(f"{op}: expected ember's 16-byte random state (seed and offset), got {state.numel()} "
                           "bytes (a PyTorch generator's state cannot be read by ember)")
    return struct.unpack("<QQ", bytes(state.reshape(-1).tolist()))

def _state_of(op, generator):
    """What the C random ops take for `generator`: None (the global state)
    or the Generator's state list."""
    if generator is None or isinstance(generator, _DefaultGenerator):
        return None
    if not isinstance(generator, Generator):
        raise TypeError(f"{op}(): generator must be an ember.Generator, got "
                        f"{type(generator).__module__}.{type(generator).__name__}")
    return generator._state
