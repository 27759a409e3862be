"""ember.amp, as torch.amp: autocast (mixed precision) and GradScaler.

autocast("cpu") runs matmuls and convolutions (nn.Linear, nn.Conv*, @,
bmm, addmm, F.conv*) in bfloat16, as PyTorch's CPU autocast does: their
float32 operands are cast first, as ops of their own, so their results are
bfloat16, gradients come back to the float32 parameters in float32, and
ember.compile traces the casts (a function compiled under autocast is a
specialisation of its own: autocast is part of its guards). Other ops run
in the dtype of their inputs. It nests, and works as a decorator;
enabled=False turns it off inside. autocast("cuda") (and
ember.cuda.amp.autocast) warns that ember has no CUDA device and stays
off, as PyTorch does on a machine without one.

GradScaler scales the loss so small float16 gradients do not flush to
zero, unscales the gradients before the step, skips steps whose gradients
overflowed and adapts the scale, as torch.amp.GradScaler. On the CPU it
works as PyTorch 2.3+'s GradScaler("cpu") does; ember.cuda.amp.GradScaler
warns and disables itself (no CUDA), and every method then passes through,
as PyTorch's does.
"""

import functools
import math
import warnings

from . import _C

__all__ = ["autocast", "GradScaler", "is_autocast_available"]

_CPU_DTYPES = ("bfloat16",)


def is_autocast_available(device_type):
    return device_type == "cpu"


class autocast:
    """with ember.autocast("cpu"): ... (or as a decorator)."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        self.fast_dtype = _C.bfloat16 if dtype is None else dtype
        self._enabled = bool(enabled)
        if device_type == "cuda":
            if enabled:
                from . import cuda
                warnings.warn("User provided device_type of 'cuda', but ember has no CUDA autocast yet (its CUDA "
                              "matmuls are not built). Disabling" if cuda.is_available() else
                              "User provided device_type of 'cuda', but CUDA is not available. Disabling")
            self._enabled = False
        elif device_type != "cpu":
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        elif self._enabled and repr(self.fast_dtype).split(".")[-1] not in _CPU_DTYPES:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtype of ember.bfloat16 currently.")
            self._enabled = False

    def __enter__(self):
        if self.device != "cpu":
            self._prev = None
            return self
        self._prev = _C._set_autocast(self.fast_dtype if self._enabled else None)
        return self

    def __exit__(self, *exc):
        if self.device == "cpu":
            _C._set_autocast(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapped


# torch's switch-level autocast API (what autocast's __enter__ calls in
# PyTorch): the CPU dtype in effect when set_autocast_cpu_enabled turns it
# on, the GPU settings kept for get_, the nesting count, the cache flag.
_SETTINGS = {"cpu_dtype": None, "gpu_dtype": None, "nesting": 0, "cache": True}


def is_autocast_cpu_enabled():
    return _C._autocast_dtype() is not None


def get_autocast_cpu_dtype():
    dt = _C._autocast_dtype()
    return dt if dt is not None else _SETTINGS["cpu_dtype"] or _C.bfloat16


def set_autocast_cpu_enabled(enabled):
    _C._set_autocast(get_autocast_cpu_dtype() if enabled else None)


def set_autocast_cpu_dtype(dtype):
    """The dtype CPU autocast runs in; bfloat16 only, as PyTorch 1.13's."""
    if repr(dtype).split(".")[-1] not in _CPU_DTYPES:
        raise RuntimeError("Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype")
    _SETTINGS["cpu_dtype"] = dtype
    if is_autocast_cpu_enabled():
        _C._set_autocast(dtype)


def is_autocast_enabled():
    """CUDA autocast: never on (ember has no CUDA device)."""
    return False


def set_autocast_enabled(enabled):
    """CUDA autocast: ember has no CUDA device, so turning it on warns (as
    autocast("cuda") does) and it stays off."""
    if enabled:
        warnings.warn("set_autocast_enabled(True): CUDA autocast is not available (ember has no CUDA device "
                      "yet); it stays off. CPU autocast: set_autocast_cpu_enabled or autocast('cpu').")


def get_autocast_gpu_dtype():
    return _SETTINGS["gpu_dtype"] or _C.float16


def set_autocast_gpu_dtype(dtype):
    _SETTINGS["gpu_dtype"] = dtype


def autocast_increment_nesting():
    _SETTINGS["nesting"] += 1
    return _SETTINGS["nesting"]


def autocast_decrement_nesting():
    _SETTINGS["nesting"] -= 1
    return _SETTINGS["nesting"]


def clear_autocast_cache():
    """Nothing to clear: ember's autocast casts each operand where an op
    uses it and keeps no cache of cast weights."""


def is_autocast_cache_enabled():
    return _SETTINGS["cache"]


def set_autocast_cache_enabled(enabled):
    _SETTINGS["cache"] = bool(enabled)


class GradScaler:
    """Loss scaling for mixed-precision training (see the module docstring)."""

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not isinstance(device, str):  # GradScaler(init_scale=...) positionally, as torch.cuda.amp's
            device, init_scale = "cuda", device
        self._device = device
        if enabled and device == "cuda":
            from . import cuda
            warnings.warn("ember.cuda.amp.GradScaler is enabled, but ember has no CUDA autocast yet. Disabling."
                          if cuda.is_available() else
                          "ember.cuda.amp.GradScaler is enabled, but CUDA is not available. Disabling.")
            enabled = False
        self._enabled = bool(enabled)
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": "ready", "found_inf": False})

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale (once per step),
        noting whether any is inf or NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == "unscaled":
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == "stepped":
            raise RuntimeError("unscale_() is being called after step().")
        inv = 1.0 / self._scale
        found = False
        with _no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    if not found and not bool(p.grad.isfinite().all()):
                        found = True
        st["found_inf"] = found
        st["stage"] = "unscaled"

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(), unless the unscaled gradients hold inf or NaN
        (then the step is skipped); returns what step returned, or None."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == "stepped":
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == "ready":
            self.unscale_(optimizer)
        result = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = "stepped"
        return result

    def update(self, new_scale=None):
        """Backs off the scale after a step that overflowed, grows it after
        growth_interval clean steps in a row (or sets new_scale)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            found = any(st["found_inf"] for st in self._per_optimizer.values())
            if found:
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if math.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _no_grad():
    from .autograd import no_grad
    return no_grad()


# ---- ember.cuda.amp and ember.cpu.amp, as torch.cuda.amp and torch.cpu.amp ----

class _CudaAutocast(autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype, enabled, cache_enabled)


class _CudaGradScaler(GradScaler):
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


class _CpuAutocast(autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cpu", dtype, enabled, cache_enabled)


def _submodule(name, doc, **attrs):
    import sys
    import types
    m = types.ModuleType(name, doc)
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


cuda_amp = _submodule("ember.cuda.amp", "torch.cuda.amp: warns and stays off (ember has no CUDA device yet).",
                      autocast=_CudaAutocast, GradScaler=_CudaGradScaler)
cpu_amp = _submodule("ember.cpu.amp", "torch.cpu.amp: CPU autocast in bfloat16.", autocast=_CpuAutocast)
