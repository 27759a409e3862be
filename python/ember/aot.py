"""Ahead of time: functions, models and whole training steps compiled to
shared objects that C programs load and run with no Python.

    ember.aot.compile(model.eval(), (x,), "out/model.so")     # writes model.so, model.h
    run = ember.aot.load("out/model.so")                       # a callable over it
    y = run(x)

The shared object holds the traced graph after the passes: its kernels
(LLVM, for this machine's CPU), the calls in order (BLAS included), the
memory plan, and the state the function reads (weights, buffers; for a
training step, parameters, optimizer state and gradients), embedded, or
with weights="external" in out/model.safetensors beside it. It needs
libc, libm and the BLAS ember was built with; its C ABI is
include/ember/aot.h, the same for every model, and out/model.h adds typed
wrappers for this one.

A module's forward runs under no_grad (a C caller gets values); a
function returning tensors with autograd history must call backward()
itself (a training step) or run under ember.no_grad().

compile() calls the function once on the example inputs, as the first
call of ember.compile(fn) does, recording what it does; the state that
call changes (parameters, optimizer state, gradients, the random stream)
is then put back as it was, and the shared object starts from it. A
function that creates state on its first call (an optimizer's moment
buffers) runs once more first, as under ember.compile. What the graph
reads from Python (scalars, the training mode) is fixed at that call.
"""

import ctypes
import os
import threading

from . import _C
from ._tensor import Tensor

__all__ = ["compile", "load", "Model", "AOTError", "GuardError"]

_MAX_ATTEMPTS = 4  # the traced call, and the retries ember.compile makes


class AOTError(RuntimeError):
    """A compiled model's run or creation failed."""


class GuardError(AOTError):
    """A value the trace relied on differs: the run stopped before writing
    anything (run the function in Python for this input)."""


def _runtime_dir():
    return os.path.join(os.path.dirname(_C.__file__), "aot")


def _objects(fn):
    """(name, object) pairs a function reaches: its closure and the globals
    its code names (and a bound method's self), for naming the state."""
    code = getattr(fn, "__code__", None)
    found = []
    if hasattr(fn, "__self__"):
        found.append(("self", fn.__self__))
    if code is not None:
        for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                found.append((name, cell.cell_contents))
            except ValueError:
                pass
        g = getattr(fn, "__globals__", {})
        found += [(name, g[name]) for name in code.co_names if name in g]
    return found


def _state_names(fn):
    """[(tensor, name)]: the names of the tensors fn may capture, as a
    module's state_dict and an optimizer's state name them."""
    from .nn import Module
    from .optim.optimizer import Optimizer
    pairs = [("", fn)] if isinstance(fn, Module) else _objects(fn)
    modules = [(n, o) for n, o in pairs if isinstance(o, Module)]
    optimizers = [(n, o) for n, o in pairs if isinstance(o, Optimizer)]
    named, param_names = [], {}
    for var, module in modules:
        prefix = "" if len(modules) == 1 else var + "."
        for key, t in list(module.named_parameters()) + list(module.named_buffers()):
            if isinstance(t, Tensor) and id(t) not in param_names:
                named.append((t, prefix + key))
                param_names[id(t)] = prefix + key
    for var, opt in optimizers:
        prefix = "optimizer" if len(optimizers) == 1 else var
        index = 0
        for group in opt.param_groups:
            for p in group["params"]:
                pname = param_names.get(id(p), f"param{index}")
                index += 1
                for key, value in opt.state.get(p, {}).items():
                    if isinstance(value, Tensor):
                        named.append((value, f"{prefix}.state.{pname}.{key}"))
    return named


def _forward_of(module, n):
    """A function calling module (its forward) under no_grad, whose n
    parameters have the forward's names (the model's input names)."""
    import inspect
    from .autograd import no_grad
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values() if p.kind in kinds]
    except (TypeError, ValueError):
        params = []
    params = (params + [f"input{i}" for i in range(len(params), n)])[:n]
    name = type(module).__name__ if type(module).__name__.isidentifier() else "forward"
    args = ", ".join(params)
    ns = {"_no_grad": no_grad, "_module": module}
    exec(f"def {name}({args}):\n    with _no_grad():\n        return _module({args})\n", ns)
    return ns[name]


def compile(fn, example_inputs, path, *, weights="embedded"):
    """Compile fn (a function, or an nn.Module's forward) for inputs like
    example_inputs (a tensor or a tuple of tensors) into the shared object
    `path` and its header (path with .h). weights="external" writes the
    state to path with .safetensors instead of embedding it. Returns path."""
    from .nn import Module
    if weights not in ("embedded", "external"):
        raise ValueError(f"ember.aot.compile: weights must be 'embedded' or 'external', got {weights!r}")
    if not _C._has_llvm():
        raise NotImplementedError("ember.aot.compile needs the LLVM backend, and this ember was built without it")
    if isinstance(example_inputs, Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    for i, x in enumerate(example_inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"ember.aot.compile: example input {i} is a {type(x).__name__}; the inputs of a "
                            f"model compiled ahead of time are tensors")
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    target = _forward_of(fn, len(example_inputs)) if isinstance(fn, Module) else fn
    cf = _C.CompiledFunction(target, 1, None)
    for _ in range(_MAX_ATTEMPTS):
        named = _state_names(fn)  # (again after a call that made state: an optimizer's moments)
        cf._export_next(path, weights == "external", [t for t, _ in named], [n for _, n in named],
                        _runtime_dir(), "")
        cf(*example_inputs)
        try:
            cf._export_status()
            return path
        except NotImplementedError as e:
            reason = e
            if cf._specializations():  # (traced to the end: no second try makes it better)
                break
    raise NotImplementedError(str(reason)) from None


# ---- loading: the C ABI through ctypes ----

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", _DLDataType), ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


_DTYPES = {(2, 32): "float32", (2, 64): "float64", (2, 16): "float16", (4, 16): "bfloat16",
           (0, 64): "int64", (0, 32): "int32", (0, 16): "int16", (0, 8): "int8", (1, 8): "uint8",
           (6, 8): "bool"}
_CODES = {name: code for code, name in _DTYPES.items()}
_GUARD = 6


def _signatures(lib):
    p, i, c = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    for name, res, args in [
            ("ember_abi_version", i, []), ("ember_model_name", c, []), ("ember_last_error", c, []),
            ("ember_model_create", i, [c, ctypes.POINTER(p)]), ("ember_model_destroy", None, [p]),
            ("ember_model_num_inputs", i, [p]), ("ember_model_num_outputs", i, [p]),
            ("ember_model_num_states", i, [p]),
            ("ember_model_input", i, [p, i, ctypes.POINTER(_TensorInfo)]),
            ("ember_model_output", i, [p, i, ctypes.POINTER(_TensorInfo)]),
            ("ember_model_state", i, [p, i, ctypes.POINTER(_TensorInfo)]),
            ("ember_model_run", i, [p, ctypes.POINTER(_DLTensor), i, ctypes.POINTER(_DLTensor), i]),
            ("ember_model_save_state", i, [p, c]), ("ember_model_load_state", i, [p, c]),
            ("ember_model_draws_random", i, [p]),
            ("ember_model_set_rng", None, [p, ctypes.c_uint64, ctypes.c_uint64]),
            ("ember_model_get_rng", None, [p, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)])]:
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


# Shared objects loaded in this process, by the file they came from:
# realpath -> [(identity, library)]. dlopen hands back the library already
# open under a path, so a model exported again to the same path would load
# as the old one; each distinct file (device, inode, size, time) is opened
# instead through a descriptor held for the process's life
# (/proc/self/fd/N: a name no other file gets while it is held), and
# instances of one file share its library (the model's read-only part).
_libraries = {}
_libraries_lock = threading.Lock()


def _library(path):
    real = os.path.realpath(path)
    fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _libraries_lock:
            for known, lib in _libraries.get(real, ()):
                if known == identity:
                    return lib
            by_fd = f"/proc/self/fd/{fd}"
            lib = ctypes.CDLL(by_fd if os.path.exists(by_fd) else real, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            _signatures(lib)
            _libraries.setdefault(real, []).append((identity, lib))
            fd = -1  # (held: its number names this library for dlopen)
            return lib
    finally:
        if fd >= 0:
            os.close(fd)


def _info(t):
    shape = tuple(t.shape[d] for d in range(t.ndim)) if t.ndim >= 0 else None
    return t.name.decode(), _DTYPES.get((t.dtype.code, t.dtype.bits), "?"), shape


class Model:
    """One instance of a model compiled ahead of time (its own state), run
    through the C ABI: calls take and return ember tensors, handed to the
    model without copies (DLPack's DLTensor over their memory). Safe to call
    from any number of threads: the instance's calls take turns (aot.h);
    load one instance per thread to run them in parallel. A file exported
    again to the same path loads as the new model."""

    def __init__(self, path, weights=None):
        self.path = os.fspath(path)
        self._lib = _library(self.path)
        self._lock = threading.Lock()  # (close() must not free the instance under a running call)
        self._handle = ctypes.c_void_p()
        w = None if weights is None else os.fsencode(weights)
        self._check(self._lib.ember_model_create(w, ctypes.byref(self._handle)))
        self.name = self._lib.ember_model_name().decode()
        self.inputs = self._infos(self._lib.ember_model_num_inputs, self._lib.ember_model_input)
        self.outputs = self._infos(self._lib.ember_model_num_outputs, self._lib.ember_model_output)

    def _check(self, status):
        if status != 0:
            msg = self._lib.ember_last_error().decode(errors="replace")
            raise (GuardError if status == _GUARD else AOTError)(msg)

    def _infos(self, count, get):
        out, info = [], _TensorInfo()
        for i in range(count(self._handle)):
            self._check(get(self._handle, i, ctypes.byref(info)))
            out.append(_info(info))
        return out

    def states(self):
        """[(name, dtype, shape or None when absent)] of the state it holds."""
        return self._infos(self._lib.ember_model_num_states, self._lib.ember_model_state)

    @staticmethod
    def _dl(t, keep):
        shape = (ctypes.c_int64 * max(t.ndim, 1))(*t.shape)
        strides = (ctypes.c_int64 * max(t.ndim, 1))(*t.stride())
        keep += [shape, strides]
        code, bits = _CODES[str(t.dtype).replace("ember.", "")]
        return _DLTensor(t._address("an AOT model's input"), _DLDevice(1, 0), t.ndim, _DLDataType(code, bits, 1), shape, strides, 0)

    def __call__(self, *inputs):
        import ember
        if len(inputs) != len(self.inputs):
            raise TypeError(f"{self.name} takes {len(self.inputs)} inputs, got {len(inputs)}")
        keep = []
        ins = (_DLTensor * max(len(inputs), 1))(*[self._dl(x, keep) for x in inputs])
        results = [ember.empty(*shape, dtype=getattr(ember, dtype)) for _, dtype, shape in self.outputs]
        outs = (_DLTensor * max(len(results), 1))(*[self._dl(y, keep) for y in results])
        self._check(self._call(self._lib.ember_model_run, ins, len(inputs), outs, len(results)))
        return results[0] if len(results) == 1 else tuple(results)

    def _call(self, fn, *args):
        """fn(handle, *args), never on a closed instance nor racing close()."""
        with self._lock:
            if not self._handle:
                raise AOTError(f"{self.name}: the model was closed")
            return fn(self._handle, *args)

    def save_state(self, path):
        self._check(self._call(self._lib.ember_model_save_state, os.fsencode(path)))

    def load_state(self, path):
        self._check(self._call(self._lib.ember_model_load_state, os.fsencode(path)))

    def set_rng(self, seed, offset=0):
        self._call(self._lib.ember_model_set_rng, seed, offset)

    def get_rng(self):
        seed, offset = ctypes.c_uint64(), ctypes.c_uint64()
        self._call(self._lib.ember_model_get_rng, ctypes.byref(seed), ctypes.byref(offset))
        return seed.value, offset.value

    def close(self):
        lock = getattr(self, "_lock", None)
        if lock is None or not getattr(self, "_handle", None):
            return
        with lock:
            if self._handle:
                self._lib.ember_model_destroy(self._handle)
                self._handle = None

    def __del__(self):
        self.close()


def load(path, weights=None):
    """A Model over the shared object at path (a new instance: its own
    state, from the embedded or external weights, or from `weights`)."""
    return Model(path, weights)
