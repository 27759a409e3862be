"""ember.cuda: present on every build, so that device-agnostic code runs
unchanged on the CPU.

    device = "cuda" if ember.cuda.is_available() else "cpu"

This build has no CUDA device: `is_available()` is False and
`device_count()` 0, as `torch.cuda` says on a machine without a GPU;
seeding is accepted and does nothing (PyTorch defers it until CUDA starts,
which here it never does); anything that needs a device raises the error
that `.to("cuda")` raises.
"""


def _device(device):
    """The device `.cuda(device)` names: "cuda", "cuda:N" for an index N,
    or the device given."""
    return "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device


def _unavailable(what):
    return NotImplementedError(
        f"{what}: device 'cuda' is not available; this build of ember runs on the CPU only")


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


def memory_allocated(device=None):
    raise _unavailable("cuda.memory_allocated")


def max_memory_allocated(device=None):
    raise _unavailable("cuda.max_memory_allocated")


def empty_cache():
    """Nothing to release: there is no CUDA memory."""
