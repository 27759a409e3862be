"""ember.cuda, as torch.cuda: present on every build, so that
device-agnostic code runs unchanged.

    device = "cuda" if ember.cuda.is_available() else "cpu"

Tensors on "cuda" live in ember's CUDA device (cuda/device.c):
memory from a caching allocator over the driver's cuMemAlloc, eager ops
generated from the op table as CUDA C and compiled by NVRTC. It needs an
NVIDIA driver with a GPU and NVRTC (the CUDA Toolkit's runtime compiler),
both loaded at run time. Without them `is_available()` is False and
`device_count()` 0, as torch.cuda answers on a machine without a GPU,
seeding is accepted and does nothing, and anything that needs a device
raises the error `.to("cuda")` raises, saying why (`why_unavailable()`).
"""

from . import _C


def _device(device):
    """The device `.cuda(device)` names: "cuda", "cuda:N" for an index N,
    or the device given."""
    return "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device


def _index(device):
    """The device index `device` (None, an int, "cuda:N", an ember.device) names."""
    if device is None:
        return _current[0]
    if isinstance(device, int):
        return device
    text = str(device)
    if text == "cuda":
        return _current[0]
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise ValueError(f"Expected a cuda device, but got: {text}")


def why_unavailable():
    """Why CUDA cannot be used ("" when it can): no NVIDIA driver, no
    device, or no NVRTC."""
    return _C._cuda_status()[1]


def _unavailable(what, device="cuda"):
    """The error anything that needs a CUDA device raises where there is
    none (also _C's em_py_device_arg, in the same words)."""
    return NotImplementedError(f"{what}: device '{device}' is not available: tensors live on the CPU (or meta) only: "
                               f"{why_unavailable()}")


def is_available():
    """Can tensors live on a CUDA device here?"""
    return bool(_C._cuda_status()[2])


def device_count():
    """The CUDA devices ember can use (0 where is_available() is False)."""
    devices, _, available = _C._cuda_status()
    return devices if available else 0


def is_initialized():
    """Has a CUDA device started (a tensor made there)?"""
    return is_available() and _C._cuda_memory(0, "stats")["segment.all.allocated"] > 0


def _require(what):
    if not is_available():
        raise _unavailable(what)


def manual_seed(seed):
    """Accepted: CUDA tensors draw from the one Philox stream that
    ember.manual_seed seeds (the CPU's numbers), so there is no second
    generator to seed."""
    int(seed)


def manual_seed_all(seed):
    """As manual_seed."""
    int(seed)


_current = [0]


def current_device():
    _require("cuda.current_device")
    return _current[0]


def set_device(device):
    _require("cuda.set_device")
    index = _index(device)
    if not 0 <= index < device_count():
        raise RuntimeError(f"CUDA error: invalid device ordinal (cuda:{index}; {device_count()} device(s))")
    _current[0] = index


def get_device_name(device=None):
    _require("cuda.get_device_name")
    return _C._cuda_device(_index(device))[0]


def get_device_capability(device=None):
    _require("cuda.get_device_capability")
    return _C._cuda_device(_index(device))[1]


class _CudaDeviceProperties:
    """What get_device_properties answers, in torch's names."""

    def __init__(self, name, capability, total_memory, multi_processor_count):
        self.name = name
        self.major, self.minor = capability
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    _require("cuda.get_device_properties")
    return _CudaDeviceProperties(*_C._cuda_device(_index(device)))


def synchronize(device=None):
    """Waits for everything queued on the device."""
    _require("cuda.synchronize")
    _C._cuda_synchronize(_index(device))


# Memory: the caching allocator's figures, in torch.cuda's names (0 and {}
# before a device starts, and without CUDA, as torch.cuda answers).
OutOfMemoryError = _C.CudaOutOfMemoryError


def memory_stats(device=None):
    """The caching allocator's counters, in torch.cuda.memory_stats' names."""
    if not is_available():
        return {}
    return _C._cuda_memory(_index(device), "stats")


def memory_allocated(device=None):
    """Bytes held by tensors on the device."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    """The peak of memory_allocated() since the last reset."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the driver."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    if is_available():
        _C._cuda_memory(_index(device), "reset")


def empty_cache():
    """Gives the driver back the cached memory no tensor uses."""
    if is_available():
        for i in range(device_count()):
            _C._cuda_memory(i, "empty")



def precompile(device=None, capability=None, threads=None):
    """Compiles every eager kernel ember's CUDA device generates into the
    disk cache (EMBER_CACHE_DIR), so that no op's first use waits for NVRTC
    (a tenth of a second or more per kernel, once per machine). For the
    GPU `device` (default: the current one), or for `capability`, a
    (major, minor) pair, without a GPU (to prepare a cache for one). Runs on
    `threads` threads (default: the CPUs'). Returns how many kernels the
    cache holds for it. ember's own: PyTorch ships its kernels compiled."""
    import os

    if capability is None:
        capability = get_device_capability(device)
    major, minor = capability
    if not (5 <= int(major) < 100 and 0 <= int(minor) < 10):
        raise ValueError(f"cuda.precompile: compute capability {major}.{minor} is not one (a GPU's, as (9, 0))")
    if threads is None:
        threads = os.cpu_count() or 1
    return _C._cuda_precompile(int(major) * 10 + int(minor), int(threads))[0]


# ---- streams and events, in torch.cuda's words ----
#
# ember queues all of a device's work on one stream, in order, so every
# Stream of a device is that stream: code written for side streams runs
# correctly (nothing can be reordered), with no overlap between them.
# Events are real points in that stream (cuEventRecord), and time it.

class Event:
    """torch.cuda.Event: a point in a device's work, timed with
    enable_timing=True (elapsed_time, in milliseconds)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise NotImplementedError("cuda.Event(interprocess=True): events shared between processes are not "
                                      "implemented in ember")
        self.enable_timing = bool(enable_timing)
        self._handle = None

    def record(self, stream=None):
        _require("cuda.Event.record")
        if self._handle is None:
            index = stream.device_index if stream is not None else _current[0]
            self._handle = _C._cuda_event_new(index, self.enable_timing)
        _C._cuda_event(self._handle, "record")

    def synchronize(self):
        if self._handle is not None:
            _C._cuda_event(self._handle, "synchronize")

    def wait(self, stream=None):
        """Work queued later waits for this event: already so, one stream."""

    def query(self):
        return True if self._handle is None else _C._cuda_event(self._handle, "query")

    def elapsed_time(self, end_event):
        if self._handle is None or end_event._handle is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return _C._cuda_event_elapsed(self._handle, end_event._handle)


class Stream:
    """torch.cuda.Stream: in ember, the device's one stream (see above)."""

    def __init__(self, device=None, priority=0, **kwargs):
        _require("cuda.Stream")
        self.device_index = _index(device)
        self.priority = priority

    @property
    def device(self):
        from ._tensor import device
        return device("cuda", self.device_index)

    def synchronize(self):
        synchronize(self.device_index)

    def query(self):
        synchronize(self.device_index)  # (one stream: done once its work is)
        return True

    def wait_event(self, event):
        """Work queued later waits for event: already so, one stream."""

    def wait_stream(self, stream):
        """Work queued later waits for stream's: already so, one stream."""

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device_index == self.device_index

    def __hash__(self):
        return hash(("ember.cuda.Stream", self.device_index))

    def __repr__(self):
        return f"<ember.cuda.Stream device=cuda:{self.device_index}>"


def current_stream(device=None):
    return Stream(device)


def default_stream(device=None):
    return Stream(device)


class stream:
    """with ember.cuda.stream(s): work inside goes to s, which in ember is
    the device's one stream."""

    def __init__(self, s):
        self.stream = s

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False
