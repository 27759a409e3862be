"""Interop: DLPack both ways (NumPy, PyTorch, hand-made capsules), the buffer
protocol, NumPy conversion of every dtype, and pickling.

Shared memory is checked by writing on one side and reading on the other;
lifetimes by deleting the producer, collecting, and overwriting freed memory
before reading; ownership by weak references to the producer, deleter call
counts, sys.getrefcount and ember's live-tensor counter. Hand-made capsules
(ctypes) check the DLPack ABI field by field and reach the cases NumPy and
PyTorch never produce (kDLBool, NULL strides, byte_offset, other devices).

Versions matter for bool: NumPy 1.24 and PyTorch 1.13 have no DLPack bool
(kDLBool came with DLPack 0.8); feature probes below decide whether a bool
exchange is expected to work or to be refused by the other library.
"""

import copy
import ctypes
import gc
import hashlib
import pickle
import sys
import warnings
import weakref

import numpy as np
import pytest

import ember
from conftest import requires_torch, torch

# ---- dtypes and sample values ----

NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
      "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
      "uint8": np.uint8, "bool": np.bool_}
ALL = list(NP) + ["bfloat16"]  # every ember dtype; NumPy has no bfloat16
EM = {name: getattr(ember._C, name) for name in ALL}
# (DLPack type code, bits) per the DLPack 0.8 spec.
DL_CODES = {"float32": (2, 32), "float64": (2, 64), "float16": (2, 16), "bfloat16": (4, 16),
            "int64": (0, 64), "int32": (0, 32), "int16": (0, 16), "int8": (0, 8),
            "uint8": (1, 8), "bool": (6, 8)}
FORMATS = {"float32": "f", "float64": "d", "float16": "e", "int64": "q", "int32": "i",
           "int16": "h", "int8": "b", "uint8": "B", "bool": "?"}
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
            "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


def sample(name, shape=(3, 4)):
    """Distinct values exactly representable in dtype `name`, covering signs
    and the dtype's width (int64 past 2**32, uint8 past 127); bfloat16
    samples come as float32 (halves and small ints: exact in bfloat16)."""
    n = int(np.prod(shape))
    i = np.arange(n)
    if name == "bool":
        v = i % 3 == 1
    elif name == "uint8":
        v = (i * 37 + 200) % 256
    elif name.startswith("int"):
        v = (i - n // 2) * 7 + {"int64": 2**40, "int32": 2**20, "int16": 300, "int8": 0}[name]
    else:
        v = (i - 5) * 0.5
    return v.astype(np.float32 if name == "bfloat16" else NP[name]).reshape(shape)


def make(name, shape=(3, 4)):
    """An ember tensor of dtype `name` with ember-owned memory (a copy)."""
    if name == "bfloat16":
        return ember.tensor(sample(name, shape)).to(EM["bfloat16"])
    return ember.tensor(sample(name, shape))


def values(t):
    """An ember tensor's values as a NumPy array (bfloat16 widened exactly)."""
    return t.float().numpy() if t.dtype == EM["bfloat16"] else t.numpy()


def assert_tensor(t, name, expected):
    assert isinstance(t, ember.Tensor)
    assert t.dtype == EM[name], f"dtype {t.dtype}, expected {name}"
    assert tuple(t.shape) == expected.shape
    np.testing.assert_array_equal(values(t), expected)


def _probe(fn):
    try:
        fn()
        return True
    except (RuntimeError, BufferError, TypeError):
        return False


NP_DLPACK_BOOL = _probe(lambda: np.from_dlpack(np.ones(1, bool)))
TORCH_DLPACK_BOOL = torch is not None and _probe(
    lambda: torch.utils.dlpack.to_dlpack(torch.ones(1, dtype=torch.bool)))


def torch_dtype(name):
    return getattr(torch, name)


def scrub():
    """Collects garbage and churns the allocator so freed memory is reused
    with other contents: reading a dangling tensor after this sees junk."""
    gc.collect()
    junk = [np.full(n, 0x5A, np.uint8) for n in (16, 48, 96, 192, 512, 4096) for _ in range(32)]
    del junk
    gc.collect()


@pytest.fixture
def live():
    """Asserts that ember's live-tensor count returns to where it started."""
    gc.collect()
    start = ember.memory_stats()["live_tensors"]
    yield
    gc.collect()
    assert ember.memory_stats()["live_tensors"] == start


# ---- a ctypes view of the DLPack ABI ----

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
DLTENSOR = b"dltensor"  # lives as long as the module: capsules keep a pointer to it


def read_capsule(capsule):
    """The DLTensor inside an unconsumed ember capsule, as plain Python values."""
    m = DLManagedTensor.from_address(_capsule_get(capsule, DLTENSOR))
    dl = m.dl_tensor
    return {"data": dl.data or 0, "device": (dl.device.device_type, dl.device.device_id),
            "ndim": dl.ndim, "dtype": (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
            "shape": tuple(dl.shape[i] for i in range(dl.ndim)),
            "strides": None if not dl.strides else tuple(dl.strides[i] for i in range(dl.ndim)),
            "byte_offset": dl.byte_offset, "has_deleter": bool(m.deleter)}


class HandMade:
    """A DLPack producer written in ctypes: owns `array`'s memory view and
    counts deleter calls. Keep the object alive while tensors use it."""

    def __init__(self, array, code, bits, lanes=1, device=(1, 0), strides=True,
                 byte_offset=0, shape=None, data=None):
        self.array = array
        self.deleted = 0
        nd = array.ndim if shape is None else len(shape)
        self.shape = (ctypes.c_int64 * max(nd, 1))(*(array.shape if shape is None else shape))
        st = [s // array.itemsize for s in array.strides] if strides is True else strides
        self.strides = (ctypes.c_int64 * max(nd, 1))(*st) if st is not None else None
        self.deleter = DELETER(self._delete)
        self.managed = DLManagedTensor()
        dl = self.managed.dl_tensor
        dl.data = array.ctypes.data - byte_offset if data is None else data
        dl.device = DLDevice(*device)
        dl.ndim = nd
        dl.dtype = DLDataType(code, bits, lanes)
        dl.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            dl.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        dl.byte_offset = byte_offset
        self.managed.deleter = self.deleter

    def _delete(self, ptr):
        assert ctypes.addressof(ptr.contents) == ctypes.addressof(self.managed)
        self.deleted += 1

    def capsule(self):
        # No capsule destructor: an unconsumed hand-made capsule leaks nothing.
        return _capsule_new(ctypes.addressof(self.managed), DLTENSOR, None)


# ---- export: Tensor.__dlpack__ ----

@pytest.mark.parametrize("name", ALL)
def test_capsule_abi_every_dtype(name, live):
    t = make(name)
    c = t.__dlpack__()
    assert type(c).__name__ == "PyCapsule" and _capsule_name(c) == b"dltensor"
    d = read_capsule(c)
    assert d["dtype"] == DL_CODES[name] + (1,)
    assert d["device"] == (1, 0) and t.__dlpack_device__() == (1, 0)
    assert d["ndim"] == 2 and d["shape"] == (3, 4) and d["strides"] == (4, 1)
    assert d["data"] == t.data_ptr() and d["byte_offset"] == 0 and d["has_deleter"]
    del c, t


@pytest.mark.parametrize("view,shape,strides", [
    (lambda t: t.T, (4, 3), (1, 4)),
    (lambda t: t.permute(1, 0).reshape(4, 3), (4, 3), (1, 4)),
    (lambda t: t.reshape(3, 1, 4).expand(3, 5, 4), (3, 5, 4), (4, 0, 1)),
    (lambda t: t.sum(), (), ()),
], ids=["T", "permute", "expand", "0-d"])
def test_capsule_abi_geometry(view, shape, strides):
    t = view(make("int32"))
    d = read_capsule(t.__dlpack__())
    assert d["ndim"] == len(shape) and d["shape"] == shape and d["strides"] == strides
    assert d["data"] == t.data_ptr()


def test_dlpack_stream_must_be_none_on_cpu(live):
    t = make("float32")
    before = sys.getrefcount(t)
    for stream in (1, 0, object()):
        with pytest.raises(RuntimeError, match="stream must be None for CPU tensors"):
            t.__dlpack__(stream=stream)
    assert read_capsule(t.__dlpack__(stream=None))["ndim"] == 2
    assert sys.getrefcount(t) == before


def test_unconsumed_capsule_releases_the_tensor(live):
    t = make("float64")
    before = sys.getrefcount(t)
    live_with_t = ember.memory_stats()["live_tensors"]
    caps = [t.__dlpack__() for _ in range(5)]
    assert sys.getrefcount(t) == before  # capsules hold the C tensor, not the object
    del t
    gc.collect()
    # The capsules keep the C tensor alive after its Python object died...
    assert ember.memory_stats()["live_tensors"] == live_with_t
    del caps
    gc.collect()
    # ...and dropping them unconsumed runs the deleter.
    assert ember.memory_stats()["live_tensors"] == live_with_t - 1


# ---- NumPy as consumer and producer ----

NP_NAMES = [n for n in NP if n != "bool" or NP_DLPACK_BOOL]


@pytest.mark.parametrize("name", NP_NAMES)
def test_numpy_from_ember_every_dtype(name, live):
    t = make(name)
    a = np.from_dlpack(t)
    assert a.dtype == NP[name] and a.shape == (3, 4)
    np.testing.assert_array_equal(a, sample(name))
    assert a.ctypes.data == t.data_ptr()  # zero-copy
    del a, t


@pytest.mark.skipif(NP_DLPACK_BOOL, reason="this NumPy reads DLPack bool")
def test_numpy_without_dlpack_bool_refuses_ember_bool():
    # ember exports kDLBool (checked in the ABI test); NumPy 1.x refuses it.
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(make("bool"))


@pytest.mark.parametrize("name", NP_NAMES)
def test_ember_from_numpy_every_dtype(name, live):
    a = sample(name)
    t = ember.from_dlpack(a)
    assert_tensor(t, name, a)
    assert t.data_ptr() == a.ctypes.data
    del t


@pytest.mark.parametrize("view", [lambda a: a.T, lambda a: a[::2], lambda a: a[1:],
                                  lambda a: a[1:, ::3], lambda a: a[:, 2],
                                  lambda a: a.reshape(2, 3, 2).transpose(2, 0, 1)[1:]],
                         ids=["T", "[::2]", "[1:]", "[1:,::3]", "[:,2]", "permuted+offset"])
def test_ember_from_numpy_views(view, live):
    base = sample("float64", (4, 3))
    a = view(base)
    t = ember.from_dlpack(a)
    assert_tensor(t, "float64", a)
    assert t.data_ptr() == a.ctypes.data
    assert t.stride() == tuple(s // 8 for s in a.strides)
    # ...and back to NumPy: the same memory, the same strides.
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data and b.strides == a.strides
    np.testing.assert_array_equal(b, a)
    del t, b


EMBER_INDEXING = _probe(lambda: ember.arange(4)[1::2])
requires_indexing = pytest.mark.skipif(not EMBER_INDEXING, reason="ember indexing unavailable")
SLICES = [lambda a: a[::2], lambda a: a[1:], lambda a: a[1:, 1::2], lambda a: a[:, 3],
          lambda a: a[2], lambda a: a[1:3].T, lambda a: a[3:, 5:]]
SLICE_IDS = ["[::2]", "[1:]", "[1:,1::2]", "[:,3]", "[2]", "[1:3].T", "[3:,5:]"]


@requires_indexing
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("view", SLICES, ids=SLICE_IDS)
def test_ember_slices_export(name, view, live):
    # Views made on the ember side: strided and offset into their storage.
    x = make(name, (4, 6))
    expected = view(values(x))
    v = view(x)
    d = read_capsule(v.__dlpack__())
    assert d["data"] == v.data_ptr() and d["byte_offset"] == 0
    assert d["shape"] == expected.shape and d["strides"] == v.stride()
    if name in NP_NAMES:
        a = np.from_dlpack(v)
        assert a.ctypes.data == v.data_ptr() and a.dtype == NP[name]
        np.testing.assert_array_equal(a, expected)
    if torch is not None and name in TORCH_NAMES:
        y = torch.from_dlpack(v)
        assert y.data_ptr() == v.data_ptr() and y.dtype == torch_dtype(name)
        np.testing.assert_array_equal(torch_values(y), expected)
    u = ember.from_dlpack(v)
    del x, v
    scrub()  # the producer is gone; every consumer's memory is still valid
    np.testing.assert_array_equal(values(u), expected)
    if name in NP_NAMES:
        np.testing.assert_array_equal(a, expected)
    if torch is not None and name in TORCH_NAMES:
        np.testing.assert_array_equal(torch_values(y), expected)


@pytest.mark.parametrize("name", ["float32", "int16", "uint8"])
def test_numpy_round_trip_of_ember_views(name, live):
    t = make(name, (4, 6))
    for v in (t.T, t.reshape(2, 2, 6).permute(2, 0, 1), t.reshape(4, 1, 6).expand(4, 3, 6)):
        a = np.from_dlpack(v)
        np.testing.assert_array_equal(a, values(v))
        assert a.strides == tuple(s * ITEMSIZE[name] for s in v.stride())
        if not a.flags.writeable:  # NumPy 1.x marks DLPack imports read-only...
            with pytest.raises(BufferError, match="readonly"):  # ...and won't re-export them
                ember.from_dlpack(a)
            continue
        back = ember.from_dlpack(a)
        assert back.stride() == v.stride() and back.data_ptr() == v.data_ptr()
        np.testing.assert_array_equal(values(back), values(v))


def test_numpy_0d_and_empty(live):
    for a in (np.array(2.5), np.array(-3, np.int16), np.zeros((0, 3), np.float32),
              np.zeros((2, 0, 4), np.int8), np.zeros(0)):
        t = ember.from_dlpack(a)
        assert tuple(t.shape) == a.shape and t.numel() == a.size
        np.testing.assert_array_equal(t.numpy(), a)
        b = np.from_dlpack(t)
        assert b.shape == a.shape and b.dtype == a.dtype
        np.testing.assert_array_equal(b, a)
    for t in (ember.tensor(1.5), make("int8").sum(), ember.zeros(0, 3), ember.zeros(3, 0, 2)):
        b = np.from_dlpack(t)
        assert b.shape == tuple(t.shape)
        np.testing.assert_array_equal(b, t.numpy())


def test_numpy_shares_memory_both_ways(live):
    a = np.zeros((3, 4), np.float32)
    t = ember.from_dlpack(a[1:, ::2])
    a[2, 2] = 7.0  # NumPy writes, ember reads
    assert values(t)[1, 1] == 7.0
    t.numpy()[0, 0] = -1.0  # a write through ember's memory, seen by NumPy
    assert a[1, 0] == -1.0
    u = make("int32")
    b = np.from_dlpack(u)  # read-only in NumPy 1.x: write on the ember side
    u.numpy()[2, 3] = 12345
    assert b[2, 3] == 12345 and b[0, 0] == sample("int32")[0, 0]


def test_numpy_memory_outlives_the_array(live):
    a = np.arange(12, dtype=np.int64).reshape(3, 4) * 3 + 1
    ref = weakref.ref(a)
    t = ember.from_dlpack(a[:, 1:])
    del a
    scrub()
    assert ref() is not None  # the capsule's owner keeps the array alive
    np.testing.assert_array_equal(t.numpy(), (np.arange(12).reshape(3, 4) * 3 + 1)[:, 1:])
    del t
    gc.collect()
    assert ref() is None  # ...and lets it go with the last ember tensor


def test_ember_memory_outlives_the_tensor(live):
    t = make("float64")
    a = np.from_dlpack(t.T)
    del t
    scrub()
    np.testing.assert_array_equal(a, sample("float64").T)
    del a


def test_numpy_refuses_negative_strides():
    with pytest.raises(ValueError, match="negative stride"):
        ember.from_dlpack(np.arange(6.0)[::-1])


# ---- PyTorch as consumer and producer ----

def same_strides(shape, a, b):
    """Strides equal where they matter: PyTorch exports size-1 dims with
    normalised strides."""
    return all(n == 1 or sa == sb for n, sa, sb in zip(shape, a, b))


def torch_values(x):
    """A torch tensor's values as a NumPy array (bfloat16 widened exactly)."""
    return x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()


def torch_sample(name, shape=(3, 4)):
    return torch.from_numpy(sample(name, shape).copy()).to(torch_dtype(name))


TORCH_NAMES = [n for n in ALL if n != "bool" or TORCH_DLPACK_BOOL]


@requires_torch
@pytest.mark.parametrize("name", TORCH_NAMES)
def test_torch_from_ember_every_dtype(name, live):
    t = make(name)
    x = torch.from_dlpack(t)
    assert x.dtype == torch_dtype(name) and tuple(x.shape) == (3, 4)
    assert torch.equal(x, torch_sample(name)) and x.data_ptr() == t.data_ptr()
    y = torch.utils.dlpack.from_dlpack(t.__dlpack__())  # the capsule path
    assert torch.equal(y, x) and y.data_ptr() == t.data_ptr()
    del x, y, t


@requires_torch
@pytest.mark.parametrize("name", TORCH_NAMES)
def test_ember_from_torch_every_dtype(name, live):
    x = torch_sample(name)
    t = ember.from_dlpack(x)
    assert t.dtype == EM[name] and tuple(t.shape) == (3, 4) and t.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(values(t), torch_values(x))
    u = ember.from_dlpack(torch.utils.dlpack.to_dlpack(x))  # a raw capsule
    assert u.dtype == EM[name] and u.data_ptr() == x.data_ptr()
    del t, u


@requires_torch
@pytest.mark.skipif(TORCH_DLPACK_BOOL, reason="this PyTorch exchanges DLPack bool")
def test_torch_without_dlpack_bool_refuses_ember_bool():
    with pytest.raises(RuntimeError, match="Unsupported code 6"):  # 6 = kDLBool
        torch.from_dlpack(make("bool"))


@requires_torch
@pytest.mark.parametrize("name", ["float32", "bfloat16", "int64", "uint8"])
@pytest.mark.parametrize("view", [lambda x: x.t(), lambda x: x[::2], lambda x: x[1:],
                                  lambda x: x[1:, 1::2], lambda x: x[:, 2],
                                  lambda x: x.reshape(2, 3, 2).permute(2, 0, 1)[:, 1:]],
                         ids=["t", "[::2]", "[1:]", "[1:,1::2]", "[:,2]", "permuted+offset"])
def test_ember_from_torch_views(name, view, live):
    x = view(torch_sample(name, (4, 3)))
    t = ember.from_dlpack(x)
    assert tuple(t.shape) == tuple(x.shape) and same_strides(t.shape, t.stride(), x.stride())
    assert t.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(values(t), torch_values(x))
    y = torch.from_dlpack(t)  # back again: same memory, same geometry
    assert y.data_ptr() == x.data_ptr() and same_strides(y.shape, y.stride(), x.stride())
    assert torch.equal(y, x)
    del t, y


@requires_torch
@pytest.mark.parametrize("name", ["float16", "bfloat16", "int8"])
def test_torch_from_ember_views(name, live):
    t = make(name, (4, 6))
    for v in (t.T, t.reshape(2, 2, 6).permute(2, 0, 1), t.reshape(4, 1, 6).expand(4, 3, 6)):
        x = torch.from_dlpack(v)
        assert x.stride() == v.stride() and x.data_ptr() == v.data_ptr()
        np.testing.assert_array_equal(torch_values(x), values(v))


@requires_torch
def test_torch_0d_and_empty(live):
    for x in (torch.tensor(2.5), torch.tensor(7, dtype=torch.int32), torch.zeros(0, 3),
              torch.zeros(2, 0, dtype=torch.bfloat16), torch.tensor(1.5, dtype=torch.bfloat16)):
        t = ember.from_dlpack(x)
        assert tuple(t.shape) == tuple(x.shape) and t.dtype == EM[str(x.dtype)[6:]]
        np.testing.assert_array_equal(values(t), torch_values(x))
        y = torch.from_dlpack(t)
        assert y.shape == x.shape and y.dtype == x.dtype and torch.equal(y, x)
    # An empty tensor without memory (PyTorch's have a NULL data pointer) is
    # exported with a dummy address: PyTorch 1.x would never call the deleter
    # of a NULL one, leaking the tensor (the live fixture checks).
    t = ember.from_dlpack(torch.zeros(2, 0))
    assert read_capsule(t.__dlpack__())["data"] != 0
    assert torch.from_dlpack(t).shape == (2, 0)
    for t in (ember.tensor(-4.0), ember.zeros(0, 3), make("bfloat16").sum().to(EM["bfloat16"])):
        y = torch.from_dlpack(t)
        assert tuple(y.shape) == tuple(t.shape)
        np.testing.assert_array_equal(torch_values(y), values(t))


@requires_torch
def test_torch_shares_memory_both_ways(live):
    x = torch.zeros(4, 5, dtype=torch.bfloat16)
    t = ember.from_dlpack(x[1:, ::2])
    x[2, 2] = 3.5  # torch writes, ember reads
    assert values(t)[1, 1] == 3.5
    u = make("int16")
    y = torch.from_dlpack(u.T)
    y[3, 0] = -1234  # torch writes into ember's memory
    assert u.numpy()[0, 3] == -1234
    u.numpy()[1, 2] = 999  # a write through ember, seen by torch
    assert y[2, 1].item() == 999


@requires_torch
def test_torch_memory_outlives_the_producer(live):
    x = torch.arange(24, dtype=torch.float64).reshape(4, 6) * 2 + 1
    t = ember.from_dlpack(x[1:, ::2])
    del x
    scrub()
    expected = (np.arange(24.0).reshape(4, 6) * 2 + 1)[1:, ::2]
    np.testing.assert_array_equal(t.numpy(), expected)
    u = make("int64")
    y = torch.from_dlpack(u.T)
    del u
    scrub()
    np.testing.assert_array_equal(y.numpy(), sample("int64").T)
    del t, y


@requires_torch
def test_torch_capsule_consumed_once(live):
    t = make("float32")
    c = t.__dlpack__()
    x = torch.utils.dlpack.from_dlpack(c)
    assert _capsule_name(c) == b"used_dltensor"
    with pytest.raises(RuntimeError, match="already consumed"):
        ember.from_dlpack(c)
    c2 = torch.utils.dlpack.to_dlpack(torch.ones(3))
    u = ember.from_dlpack(c2)
    assert _capsule_name(c2) == b"used_dltensor"
    with pytest.raises(RuntimeError):  # torch refuses the used capsule too
        torch.utils.dlpack.from_dlpack(c2)
    np.testing.assert_array_equal(u.numpy(), np.ones(3, np.float32))
    del x, c, c2, u


@requires_torch
def test_torch_refused_imports(live):
    with pytest.raises(TypeError, match=r"unsupported DLPack dtype complex64 \(code 5, bits 64"):
        ember.from_dlpack(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="9 dimensions.*at most 8"):
        ember.from_dlpack(torch.zeros([1] * 9))
    # A refused capsule is not consumed: its producer still owns and frees it.
    c = torch.utils.dlpack.to_dlpack(torch.ones(2, dtype=torch.complex128))
    with pytest.raises(TypeError, match="complex128"):
        ember.from_dlpack(c)
    assert _capsule_name(c) == b"dltensor"
    assert torch.equal(torch.utils.dlpack.from_dlpack(c), torch.ones(2, dtype=torch.complex128))


# ---- ember to ember, and hand-made capsules ----

@pytest.mark.parametrize("name", ALL)
def test_ember_to_ember_every_dtype(name, live):
    t = make(name)
    u = ember.from_dlpack(t.T)
    assert u.dtype == t.dtype and u.stride() == (1, 4) and u.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(values(u), values(t).T)
    del t
    scrub()
    np.testing.assert_array_equal(values(u), values(make(name)).T)
    del u


def test_capsule_consumed_once(live):
    t = make("int64")
    c = t.__dlpack__()
    u = ember.from_dlpack(c)
    assert _capsule_name(c) == b"used_dltensor"
    with pytest.raises(RuntimeError, match="already consumed.*only once"):
        ember.from_dlpack(c)
    del u, c, t


@pytest.mark.parametrize("name", ALL)
def test_hand_made_every_dtype(name):
    a = sample("float32" if name == "bfloat16" else name)
    raw = a
    if name == "bfloat16":  # float32 -> bfloat16 by truncation: exact for these samples
        raw = (a.view(np.uint32) >> 16).astype(np.uint16)
    p = HandMade(raw, *DL_CODES[name])
    t = ember.from_dlpack(p.capsule())
    assert t.dtype == EM[name] and tuple(t.shape) == (3, 4) and t.data_ptr() == raw.ctypes.data
    np.testing.assert_array_equal(values(t), a)
    assert p.deleted == 0
    del t
    gc.collect()
    assert p.deleted == 1


def test_hand_made_uint8_bits8_is_uint8_and_bool_is_bool():
    a = np.array([0, 1, 255, 2], np.uint8)
    p = HandMade(a, 1, 8)  # kDLUInt, 8 bits: how PyTorch 1.x would have sent a bool
    assert ember.from_dlpack(p.capsule()).dtype == EM["uint8"]
    b = np.array([0, 1, 1, 0], np.uint8)
    q = HandMade(b, 6, 8)  # kDLBool
    t = ember.from_dlpack(q.capsule())
    assert t.dtype == EM["bool"] and t.numpy().tolist() == [False, True, True, False]


def test_hand_made_null_strides_and_byte_offset(live):
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    p = HandMade(a, 0, 32, strides=None)  # NULL strides: compact row-major
    t = ember.from_dlpack(p.capsule())
    assert t.stride() == (12, 4, 1) and t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), a)
    # byte_offset: data points 16 bytes before the first element.
    b = np.arange(10, dtype=np.float64)
    q = HandMade(b[2:], 2, 64, byte_offset=16)
    u = ember.from_dlpack(q.capsule())
    assert u.data_ptr() == b[2:].ctypes.data
    np.testing.assert_array_equal(u.numpy(), b[2:])
    # Size-1 dims may carry any stride, even a negative one.
    r = HandMade(a[:1], 0, 32, strides=[-5, 4, 1])
    assert ember.from_dlpack(r.capsule()).numpy().tolist() == a[:1].tolist()
    del t, u
    gc.collect()
    assert p.deleted == q.deleted == r.deleted == 1


@pytest.mark.parametrize("device,label", [((2, 0), "cuda:0"), ((10, 1), "rocm:1"),
                                          ((3, 0), "cuda_host:0"),
                                          ((99, 2), "device type 99:2")])
def test_hand_made_other_devices(device, label):
    if label == "cuda:0" and ember.cuda.is_available():
        pytest.skip("ember holds cuda:0 memory here (a capsule claiming it is taken at its word)")
    p = HandMade(np.zeros(3, np.float32), 2, 32, device=device)
    c = p.capsule()
    with pytest.raises(RuntimeError, match=f"on {label} .*CPU memory.*copy it to the CPU"):
        ember.from_dlpack(c)
    assert _capsule_name(c) == b"dltensor" and p.deleted == 0  # not consumed


@pytest.mark.parametrize("code,bits,lanes,label", [(2, 8, 1, "float8"), (5, 64, 1, "complex64"),
                                                   (2, 32, 4, "float32x4"), (1, 16, 1, "uint16"),
                                                   (6, 16, 1, "bool16"), (0, 4, 1, "int4"),
                                                   (3, 64, 1, "opaque64"), (9, 8, 1, "unknown8")])
def test_hand_made_unsupported_dtypes(code, bits, lanes, label):
    p = HandMade(np.zeros(4, np.uint64), code, bits, lanes)
    with pytest.raises(TypeError, match=f"unsupported DLPack dtype {label} "):
        ember.from_dlpack(p.capsule())


def test_hand_made_malformed():
    a = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="negative stride"):
        ember.from_dlpack(HandMade(a, 2, 32, strides=[-1]).capsule())
    with pytest.raises(ValueError, match="negative size"):
        ember.from_dlpack(HandMade(a, 2, 32, shape=[-2]).capsule())
    with pytest.raises(ValueError, match="data is NULL"):
        ember.from_dlpack(HandMade(a, 2, 32, data=0).capsule())
    with pytest.raises(ValueError, match="not aligned"):
        ember.from_dlpack(HandMade(a, 2, 32, data=a.ctypes.data + 2, shape=[3]).capsule())
    with pytest.raises(ValueError, match="overflows"):
        ember.from_dlpack(HandMade(a, 2, 32, shape=[2**62, 3], strides=[2**62, 1]).capsule())
    # An empty tensor may have no data at all.
    t = ember.from_dlpack(HandMade(a, 2, 32, shape=[0, 5], data=0).capsule())
    assert tuple(t.shape) == (0, 5)


def test_from_dlpack_argument_errors():
    with pytest.raises(TypeError, match="expected an object with a __dlpack__ method.*got int"):
        ember.from_dlpack(3)
    with pytest.raises(TypeError, match="got list"):
        ember.from_dlpack([1.0, 2.0])
    other = _capsule_new(ctypes.addressof(ctypes.c_int(0)), b"something_else", None)
    with pytest.raises(TypeError, match="capsule named 'dltensor'.*another kind"):
        ember.from_dlpack(other)

    class BadReturn:
        def __dlpack__(self, stream=None):
            return 42

    with pytest.raises(TypeError, match="capsule named 'dltensor', got int"):
        ember.from_dlpack(BadReturn())

    class Raises:
        def __dlpack__(self, stream=None):
            raise BufferError("producer says no")

    with pytest.raises(BufferError, match="producer says no"):
        ember.from_dlpack(Raises())


def test_from_dlpack_checks_the_device_before_exporting():
    class OnGPU:
        exported = False

        def __dlpack_device__(self):
            return (2, 1)

        def __dlpack__(self, stream=None):
            OnGPU.exported = True
            raise AssertionError("must not be called")

    with pytest.raises(RuntimeError, match="on cuda:1 .*DLPack device type 2"):
        ember.from_dlpack(OnGPU())
    assert not OnGPU.exported

    class BadDevice(OnGPU):
        def __dlpack_device__(self):
            return "cpu"

    with pytest.raises(TypeError, match=r"__dlpack_device__\(\) must return"):
        ember.from_dlpack(BadDevice())


def test_dlpack_refcounts_and_live_tensors(live):
    t = make("float32")
    before = sys.getrefcount(t)
    for _ in range(3):
        c = t.__dlpack__()
        del c
        u = ember.from_dlpack(t)
        a = np.from_dlpack(t)
        del u, a
    gc.collect()
    assert sys.getrefcount(t) == before
    del t


# ---- the buffer protocol ----

@pytest.mark.parametrize("name", list(NP))
def test_memoryview_every_dtype(name, live):
    t = make(name, (2, 3))
    before = sys.getrefcount(t)
    m = memoryview(t)
    assert sys.getrefcount(t) == before + 1  # the view keeps the tensor alive
    assert m.format == FORMATS[name] and m.itemsize == ITEMSIZE[name]
    assert m.shape == (2, 3) and m.strides == (3 * ITEMSIZE[name], ITEMSIZE[name])
    assert m.ndim == 2 and not m.readonly and m.c_contiguous
    assert m.nbytes == 6 * ITEMSIZE[name]
    np.testing.assert_array_equal(np.asarray(m), sample(name, (2, 3)))
    assert np.asarray(m).ctypes.data == t.data_ptr()  # zero-copy
    m.release()
    assert sys.getrefcount(t) == before
    del t


def test_memoryview_tolist_and_write_through(live):
    t = make("int32")
    m = memoryview(t)
    assert m.tolist() == sample("int32").tolist()
    flat = memoryview(t).cast("B").cast("i")
    flat[5] = -77  # memoryview writes into the tensor
    assert t.numpy()[1, 1] == -77
    f = memoryview(make("float16"))  # memoryview can't index 'e' items; NumPy can
    assert f.format == "e" and np.asarray(f)[0].tolist() == [-2.5, -2.0, -1.5, -1.0]


def test_memoryview_non_contiguous_and_0d(live):
    t = make("float64", (3, 4))
    m = memoryview(t.T)
    assert m.shape == (4, 3) and m.strides == (8, 32) and not m.c_contiguous and m.f_contiguous
    np.testing.assert_array_equal(np.asarray(m), sample("float64").T)
    e = memoryview(t.reshape(3, 1, 4).expand(3, 2, 4))
    assert e.strides == (32, 0, 8)
    s = memoryview(t.sum())
    assert s.ndim == 0 and s.shape == () and s.strides == ()
    assert s.tolist() == float(sample("float64").sum()) == 3.0
    z = memoryview(ember.zeros(0, 3))
    assert z.shape == (0, 3) and z.nbytes == 0 and z.tolist() == []


@requires_indexing
def test_memoryview_of_ember_slices(live):
    x = make("int16", (4, 6))
    v = x[1:, 1::2]
    m = memoryview(v)
    assert m.shape == (3, 3) and m.strides == (12, 4) and not m.c_contiguous
    a = np.asarray(m)
    assert a.ctypes.data == v.data_ptr() == x.data_ptr() + 2 * 7  # offset: element 7
    np.testing.assert_array_equal(a, sample("int16", (4, 6))[1:, 1::2])
    a[0, 0] = -5  # writes land in the base tensor
    assert x.numpy()[1, 1] == -5


def test_bfloat16_has_no_buffer_format():
    t = make("bfloat16")
    before = sys.getrefcount(t)
    with pytest.raises(BufferError, match="bfloat16 has no PEP 3118 buffer format.*float"):
        memoryview(t)
    assert sys.getrefcount(t) == before


class Py_buffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
                ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(Py_buffer), ctypes.c_int]
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(Py_buffer)]
_release_buffer.restype = None
SIMPLE, WRITABLE, FORMAT, ND, STRIDES = 0, 0x1, 0x4, 0x8, 0x18
C_CONTIG, F_CONTIG, ANY_CONTIG = 0x38, 0x58, 0x98


def get_buffer(obj, flags):
    """PyObject_GetBuffer with exactly these flags: (fields, release)."""
    v = Py_buffer()
    _get_buffer(obj, ctypes.byref(v), flags)
    nd = v.ndim
    info = {"buf": v.buf or 0, "len": v.len, "itemsize": v.itemsize, "ndim": nd,
            "readonly": v.readonly, "format": v.format,
            "shape": None if not v.shape else tuple(v.shape[i] for i in range(nd)),
            "strides": None if not v.strides else tuple(v.strides[i] for i in range(nd))}
    return info, lambda: _release_buffer(ctypes.byref(v))


def test_buffer_flags_contiguous_tensor(live):
    t = make("int16", (2, 3))
    before = sys.getrefcount(t)
    for flags in (SIMPLE, WRITABLE, ND, STRIDES, C_CONTIG, ANY_CONTIG, FORMAT | STRIDES):
        info, release = get_buffer(t, flags)
        assert info["buf"] == t.data_ptr() and info["len"] == 12 and info["itemsize"] == 2
        assert info["readonly"] == 0
        assert info["format"] == (b"h" if flags & FORMAT else None)
        assert info["shape"] == ((2, 3) if flags & ND else None)
        assert info["ndim"] == (2 if flags & ND else 1)
        assert info["strides"] == ((6, 2) if (flags & STRIDES) == STRIDES else None)
        release()
    with pytest.raises(BufferError, match="Fortran-contiguous buffer was requested.*int16"):
        get_buffer(t, F_CONTIG)
    assert sys.getrefcount(t) == before


def test_buffer_flags_non_contiguous_tensor(live):
    t = make("float32", (2, 3)).T  # Fortran order
    before = sys.getrefcount(t)
    for flags, what in ((SIMPLE, "contiguous \\(stride-less\\)"), (ND, "stride-less\\)"),
                        (C_CONTIG, "C-contiguous")):
        with pytest.raises(BufferError, match=f"{what} buffer was requested but this float32 "
                                              r"tensor of shape \[3,2\].*\.contiguous\(\)"):
            get_buffer(t, flags)
    for flags in (F_CONTIG, ANY_CONTIG, STRIDES):
        info, release = get_buffer(t, flags)
        assert info["shape"] == (3, 2) and info["strides"] == (4, 12)
        release()
    expanded = make("float32", (1, 3)).expand(2, 3)
    for flags in (C_CONTIG, F_CONTIG, ANY_CONTIG):
        with pytest.raises(BufferError):
            get_buffer(expanded, flags)
    with pytest.raises(BufferError, match="contiguous"):
        hashlib.sha256(t)  # hashlib asks for a simple (contiguous) buffer
    assert sys.getrefcount(t) == before


def test_bfloat16_raw_bytes_without_a_format(live):
    # Without PyBUF_FORMAT a consumer asks for raw bytes, which bfloat16 has.
    t = make("bfloat16", (2, 2))
    info, release = get_buffer(t, STRIDES)
    assert info["format"] is None and info["itemsize"] == 2 and info["strides"] == (4, 2)
    release()
    with pytest.raises(BufferError, match="bfloat16"):
        get_buffer(t, FORMAT)


def test_buffer_consumers_share_memory(live):
    t = make("uint8")
    assert hashlib.md5(t).hexdigest() == hashlib.md5(sample("uint8").tobytes()).hexdigest()
    a = np.frombuffer(t, dtype=np.uint8)
    a[0] = 1
    assert t.numpy()[0, 0] == 1
    u = ember.from_numpy(t)  # ember reads its own buffer without a copy
    assert u.data_ptr() == t.data_ptr() and u.dtype == t.dtype
    np.testing.assert_array_equal(u.numpy(), t.numpy())


def test_buffer_keeps_the_memory_alive(live):
    t = make("float32")
    m = memoryview(t.T)
    del t
    scrub()
    assert m.tolist() == sample("float32").T.tolist()
    m.release()


# ---- NumPy conversion of every dtype (__array_interface__ and numpy()) ----

TYPESTR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int64": "<i8",
           "int32": "<i4", "int16": "<i2", "int8": "|i1", "uint8": "|u1", "bool": "|b1"}


@pytest.mark.parametrize("name", list(NP))
def test_numpy_conversion_every_dtype(name, live):
    t = make(name)
    a = t.numpy()
    assert a.dtype == NP[name] and a.shape == (3, 4)
    np.testing.assert_array_equal(a, sample(name))
    assert a.ctypes.data == t.data_ptr()
    assert t.tolist() == sample(name).tolist()
    a[0, 0] = a[1, 1]  # a write through the NumPy view lands in the tensor
    assert t.numpy()[0, 0] == sample(name)[1, 1]
    iface = t.T.__array_interface__
    assert iface["typestr"] == TYPESTR[name] and iface["shape"] == (4, 3)
    assert iface["strides"] == (ITEMSIZE[name], 4 * ITEMSIZE[name])
    holder = type("H", (), {"__array_interface__": iface})()
    np.testing.assert_array_equal(np.asarray(holder), t.numpy().T)


def test_numpy_conversion_bfloat16_refused():
    t = make("bfloat16")
    with pytest.raises(TypeError, match=r"Got unsupported ScalarType BFloat16.*\.float\(\)"):
        t.numpy()
    with pytest.raises(TypeError, match="BFloat16"):
        t.__array_interface__
    np.testing.assert_array_equal(t.float().numpy(), sample("bfloat16"))


@pytest.mark.parametrize("name", list(NP))
def test_from_numpy_and_tensor_every_dtype(name, live):
    a = sample(name)
    t = ember.from_numpy(a)
    assert_tensor(t, name, a)
    assert t.data_ptr() == a.ctypes.data
    u = ember.tensor(a[:, ::2])  # a copy, any strides
    assert_tensor(u, name, a[:, ::2])
    assert u.data_ptr() != a.ctypes.data and u.is_contiguous()


def test_tensor_from_ctypes_formats():
    # ctypes exports explicit little-endian formats: '<i' and '<q' (or '<l').
    assert ember.tensor((ctypes.c_int32 * 3)(1, -2, 3)).dtype == EM["int32"]
    assert ember.tensor((ctypes.c_int32 * 3)(1, -2, 3)).numpy().tolist() == [1, -2, 3]
    assert ember.tensor((ctypes.c_int64 * 2)(2**40, 5)).numpy().tolist() == [2**40, 5]
    assert ember.tensor((ctypes.c_int8 * 2)(-1, 5)).dtype == EM["int8"]
    assert ember.tensor((ctypes.c_uint8 * 2)(255, 5)).dtype == EM["uint8"]
    with pytest.raises(TypeError, match="format '<H'"):
        ember.tensor((ctypes.c_uint16 * 2)(1, 2))


# ---- pickling ----

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 3), (2, 0, 5)], ids=str)
def test_pickle_every_dtype(name, shape, live):
    t = make(name, shape)
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        u = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert type(u) is ember.Tensor and u.dtype == t.dtype and u.shape == t.shape
        np.testing.assert_array_equal(values(u), values(t))
        if t.numel():
            assert u.data_ptr() != t.data_ptr()


def test_pickle_format(live):
    t = make("int32").T
    fn, args = t.__reduce__()
    assert fn.__module__ == "ember._tensor" and fn.__name__ == "_rebuild_tensor"
    data, dtype, shape = args
    assert dtype == "int32" and shape == (4, 3)
    assert data == np.ascontiguousarray(sample("int32").T).astype("<i4").tobytes()
    with warnings.catch_warnings():
        # dtypes pickle as ember.<name> (their __module__), without scanning
        # sys.modules (which would touch NumPy's deprecated np.bool)
        warnings.simplefilter("error", FutureWarning)
        for name in ALL:  # dtypes pickle as themselves
            assert pickle.loads(pickle.dumps(EM[name])) is EM[name]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_pickle_keeps_every_bit(name, live):
    # -0.0, inf, nan and a NaN payload survive: the pickle holds raw bytes.
    bits = {"float16": np.array([0x8000, 0x7C00, 0x7E01, 0x3C01], np.uint16),
            "bfloat16": np.array([0x8000, 0x7F80, 0x7FC1, 0x3F81], np.uint16),
            "float32": np.array([0x80000000, 0x7F800000, 0x7FC00001, 0x3F800001], np.uint32),
            "float64": np.array([1 << 63, 0x7FF0 << 48, (0x7FF8 << 48) | 1, 0x3FF0000000000001],
                                np.uint64)}[name]
    p = HandMade(bits, 4 if name == "bfloat16" else 2, bits.itemsize * 8)
    t = ember.from_dlpack(p.capsule())
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == EM[name] and u.data_ptr() != t.data_ptr()
    assert ctypes.string_at(u.data_ptr(), bits.nbytes) == bits.tobytes()


def test_pickle_non_contiguous_and_copies(live):
    t = make("float32", (2, 3))
    for v in (t.T, t.reshape(2, 1, 3).expand(2, 4, 3), t.permute(1, 0).reshape(3, 2)):
        u = pickle.loads(pickle.dumps(v))
        assert u.shape == v.shape and u.is_contiguous()
        np.testing.assert_array_equal(u.numpy(), v.numpy())
    w = copy.deepcopy(t)
    assert w.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(w.numpy(), t.numpy())


def test_pickle_rebuild_checks_its_input():
    from ember._tensor import _rebuild_tensor
    with pytest.raises(ValueError, match="needs 24 bytes of data, got 23"):
        _rebuild_tensor(b"\0" * 23, "float32", (2, 3))
    with pytest.raises(TypeError, match="unknown dtype 'complex64'"):
        _rebuild_tensor(b"", "complex64", (0,))
    with pytest.raises(TypeError, match="unknown dtype 'tensor'"):
        _rebuild_tensor(b"", "tensor", (0,))
    with pytest.raises(ValueError, match="negative size"):
        _rebuild_tensor(b"", "int8", (-1, 2))
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        _rebuild_tensor(b"", "int8", (1.5,))
    t = _rebuild_tensor(bytearray(b"\x01\x00\x02\x00"), "int16", [2])
    assert t.numpy().tolist() == [1, 2]


# ---- host reads inside compiled functions ----

@pytest.mark.parametrize("read,what", [(lambda x: memoryview(x).tolist(), "buffer protocol"),
                                       (lambda x: np.from_dlpack(x).sum(), "DLPack")])
def test_exports_inside_compiled_functions_run_eagerly(read, what):
    def fn(x):
        y = x + 1.0
        read(y)
        return y * 2.0

    cf = ember.compile(fn)
    x = make("float32")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            np.testing.assert_array_equal(cf(x).numpy(), (sample("float32") + 1) * 2)
    msgs = [str(w.message) for w in rec if "ember.compile" in str(w.message)]
    # the exported memory may outlive the call, which a compiled graph cannot repeat
    assert len(msgs) == 1 and f"running eagerly: exporting a tensor's memory ({what})" in msgs[0], msgs
