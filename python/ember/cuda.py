"""ember.cuda: present on every build, so that device-agnostic code runs
unchanged on the CPU.

    device = "cuda" if ember.cuda.is_available() else "cpu"

ember's CUDA tensors are not built yet (their kernels are generated from
the op table and compiled to PTX by NVRTC, not yet run): `is_available()`
is False and `device_count()` 0, as `torch.cuda` says on a machine without
a GPU; seeding is accepted and does nothing (PyTorch defers it until CUDA
starts, which here it never does); anything that needs a device raises the
error that `.to("cuda")` raises, saying why (`why_unavailable()`: no
driver, no device, and the missing tensors).
"""

from . import _C


def _device(device):
    """The device `.cuda(device)` names: "cuda", "cuda:N" for an index N,
    or the device given."""
    return "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device


def why_unavailable():
    """Why CUDA cannot be used: no NVIDIA driver (or no device), and ember's
    CUDA tensors not built yet."""
    return _C._cuda_status()[1]


def _unavailable(what, device="cuda"):
    """The error anything that needs a CUDA device raises (also
    _C's em_py_device_arg, in the same words)."""
    return NotImplementedError(f"{what}: device '{device}' is not available: tensors live on the CPU (or meta) only: "
                               f"{why_unavailable()}")


def is_available():
    """False: this build has no CUDA device."""
    return False


def device_count():
    """0: this build has no CUDA device."""
    return 0


def is_initialized():
    return False


def manual_seed(seed):
    """Accepted and ignored: there is no CUDA generator to seed."""
    int(seed)


def manual_seed_all(seed):
    """Accepted and ignored: there is no CUDA generator to seed."""
    int(seed)


def current_device():
    raise _unavailable("cuda.current_device")


def set_device(device):
    raise _unavailable("cuda.set_device")


def get_device_name(device=None):
    raise _unavailable("cuda.get_device_name")


def synchronize(device=None):
    raise _unavailable("cuda.synchronize")


# Memory: with CUDA never started there is none, and these answer as
# torch.cuda's do before CUDA starts (0, {}), so that code that logs them
# runs here. The caching allocator (runtime/cuda/caching_allocator.c) keeps
# the figures once a device runs.

OutOfMemoryError = _C.CudaOutOfMemoryError


def memory_allocated(device=None):
    """Bytes held by tensors on the device: 0, CUDA has not started."""
    return 0


def max_memory_allocated(device=None):
    """The peak of memory_allocated(): 0, CUDA has not started."""
    return 0


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the driver: 0, CUDA has not started."""
    return 0


def max_memory_reserved(device=None):
    return 0


def memory_stats(device=None):
    """The caching allocator's counters: empty, CUDA has not started."""
    return {}


def reset_peak_memory_stats(device=None):
    """Nothing to reset: CUDA has not started."""


def empty_cache():
    """Nothing to release: CUDA has not started."""
