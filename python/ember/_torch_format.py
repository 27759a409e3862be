"""PyTorch's checkpoint format (torch.save since 1.6), read and written
without PyTorch.

A .pt file is a ZIP archive: <dir>/data.pkl, a pickle of the saved object
in which every tensor is a call of torch._utils._rebuild_tensor_v2 on a
storage named by a persistent id ('storage', torch.FloatStorage, key,
location, numel); <dir>/data/<key>, each storage's raw little-endian
bytes; <dir>/version and <dir>/byteorder.

Reading unpickles data.pkl with a restricted unpickler: the only globals it
resolves are the tensor and parameter rebuilds (to ember's own
implementations, which check every offset, size and stride against the
storage), the storage types, dtypes, torch.Size and collections.OrderedDict.
Any other global (a function or class that unpickling would call, such as
os.system) is refused with an error naming it, before it is looked up, so a
hostile file cannot run code. Tensors that shared a storage load as
separate tensors.

Writing makes the same archive, with pickles PyTorch's own weights_only
loader accepts."""

import collections
import io
import pickle
import struct
import zipfile
import zlib

import numpy as np

from . import _C
from ._tensor import Tensor, _byteswap_to_little, _dtype_name, _rebuild_tensor

# torch.<X>Storage -> (ember dtype name, bytes per element, numpy type of that width)
_STORAGES = {
    "FloatStorage": ("float32", 4), "DoubleStorage": ("float64", 8), "HalfStorage": ("float16", 2),
    "BFloat16Storage": ("bfloat16", 2), "LongStorage": ("int64", 8), "IntStorage": ("int32", 4),
    "ShortStorage": ("int16", 2), "CharStorage": ("int8", 1), "ByteStorage": ("uint8", 1),
    "BoolStorage": ("bool", 1),
}
_STORAGE_OF_DTYPE = {dt: name for name, (dt, _) in _STORAGES.items()}
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_DTYPES = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
           "float", "double", "half", "long", "int", "short"}
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"
_MAX_STORAGE_BYTES = 1 << 40


def is_torch_zip(head):
    return head[:4] == b"PK\x03\x04"


def is_legacy_torch(head):
    return head.startswith(_LEGACY_MAGIC)


# ---------------------------------------------------------------- reading

class _StorageType:
    def __init__(self, name):
        self.name = name
        self.dtype, self.itemsize = _STORAGES[name]


class _Storage:
    """A storage's elements as unsigned integers of its element width."""

    def __init__(self, stype, data):
        self.stype = stype
        self.array = np.frombuffer(data, dtype=np.dtype(_UINT_OF_SIZE[stype.itemsize]).newbyteorder("<"))


class _Marker:
    """A class a pickle names only to tag a rebuild (torch.Tensor, Parameter)."""

    def __init__(self, name):
        self.name = name


class Refused(pickle.UnpicklingError):
    """A checkpoint ember will not read: it names something other than
    tensors and plain containers, or its tensors do not fit their storages."""


def _latin1(text, encoding="latin1"):
    """_codecs.encode as protocol-2 pickles use it, for bytes: text to latin-1."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise Refused(f"_codecs.encode is allowed only to make bytes from latin-1 text, got {encoding!r}")
    return text.encode("latin1")


class _Reader(pickle.Unpickler):
    def __init__(self, data, archive, prefix, fname):
        super().__init__(io.BytesIO(data))
        self._archive, self._prefix, self._fname = archive, prefix, fname
        self._storages = {}

    def _bad(self, why):
        return Refused(f"{self._fname}: {why}")

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return self._rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return self._rebuild_parameter
        if module == "torch._tensor" and name == "_rebuild_from_type_v2":
            return self._rebuild_from_type
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        if module == "_codecs" and name == "encode":
            return _latin1
        if module == "torch" and name == "Size":
            return lambda *a: tuple(*a)
        if module == "torch" and name in _DTYPES:
            return getattr(_C, name)
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return _Marker(name)
        raise self._bad(f"refusing to load {module}.{name}: a PyTorch checkpoint read by ember may hold only "
                        f"tensors, parameters and plain containers (anything else could run code when "
                        f"unpickled)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self._bad(f"unexpected persistent id {pid!r} (expected ('storage', type, key, location, numel))")
        _, stype, key, _, numel = pid
        if not isinstance(stype, _StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise self._bad(f"malformed storage reference {pid!r}")
        if key not in self._storages:
            name = f"{self._prefix}data/{key}"
            try:
                info = self._archive.getinfo(name)
            except KeyError:
                raise self._bad(f"storage {key!r} is missing from the archive ({name})") from None
            if info.file_size > _MAX_STORAGE_BYTES or info.file_size != numel * stype.itemsize:
                raise self._bad(f"storage {key!r} holds {info.file_size} bytes, but its reference says "
                                f"{numel} elements of {stype.itemsize} bytes")
            self._storages[key] = _Storage(stype, self._archive.read(name))
        st = self._storages[key]
        if st.stype.name != stype.name:
            raise self._bad(f"storage {key!r} is referenced as both {st.stype.name} and {stype.name}")
        return st

    def _rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
        if not isinstance(storage, _Storage):
            raise self._bad("a tensor rebuild without a storage")
        try:
            size = tuple(int(n) for n in size)
            stride = tuple(int(s) for s in stride)
            offset = int(offset)
        except (TypeError, ValueError):
            raise self._bad(f"malformed tensor geometry: size {size!r}, stride {stride!r}, offset {offset!r}") \
                from None
        n = storage.array.size
        if len(size) != len(stride) or offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise self._bad(f"malformed tensor geometry: size {size}, stride {stride}, offset {offset}")
        numel = 1
        for s in size:
            numel *= s
        last = offset + sum((s - 1) * st for s, st in zip(size, stride)) if numel else offset - 1
        if numel and (last >= n or offset >= n):
            raise self._bad(f"a tensor of size {list(size)}, stride {list(stride)} and offset {offset} reaches "
                            f"element {last} of a storage of {n}")
        item = storage.stype.itemsize
        if numel:
            view = np.lib.stride_tricks.as_strided(storage.array[offset:], shape=size,
                                                   strides=[s * item for s in stride], writeable=False)
            raw = np.ascontiguousarray(view).astype(storage.array.dtype.newbyteorder("<"), copy=False).tobytes()
        else:
            raw = b""
        t = _rebuild_tensor(raw, storage.stype.dtype, size)  # (little-endian bytes in)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def _rebuild_parameter(self, data, requires_grad, hooks, state=None):
        from .nn.parameter import Parameter
        if not isinstance(data, Tensor):
            raise self._bad("a parameter rebuild without a tensor")
        return Parameter(data.detach(), bool(requires_grad))

    def _rebuild_from_type(self, func, new_type, args, state):
        if not callable(func) or not isinstance(new_type, _Marker):
            raise self._bad("a malformed tensor rebuild")
        t = func(*args)
        if new_type.name == "Parameter":
            from .nn.parameter import Parameter
            t = Parameter(t.detach(), t.requires_grad)
        return t


# What the ZIP reader raises on a damaged archive, at opening or at reading
# a member (a bad local header, a bad CRC, deflate data that does not
# inflate, a compression method or an encryption it does not do, a member
# name that is not UTF-8).
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
               UnicodeDecodeError)


def read(fh, fname):
    """The object a PyTorch zip checkpoint holds. A damaged archive is a
    ValueError naming the file; a pickle that names anything but tensors
    and containers is Refused (pickle.UnpicklingError, as torch.load's
    weights_only refusal)."""
    try:
        return _read(fh, fname)
    except Refused:
        raise
    except _ZIP_ERRORS as e:
        raise ValueError(f"{fname}: not a readable PyTorch checkpoint (a damaged ZIP archive: "
                         f"{type(e).__name__}: {e})") from None


def _read(fh, fname):
    archive = zipfile.ZipFile(fh)
    with archive:
        names = archive.namelist()
        pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if any(n.endswith("constants.pkl") for n in names):
            raise ValueError(f"{fname}: a TorchScript archive (torch.jit.save); ember reads checkpoints written by "
                             f"torch.save")
        if len(pkl) != 1:
            raise ValueError(f"{fname}: not a PyTorch checkpoint: expected one <dir>/data.pkl in the archive, "
                             f"found {len(pkl)}")
        prefix = pkl[0][: -len("data.pkl")]
        order = f"{prefix}byteorder"
        if order in names and archive.read(order).strip() not in (b"little", b""):
            raise ValueError(f"{fname}: a big-endian checkpoint; ember reads little-endian ones")
        info = archive.getinfo(pkl[0])
        if info.file_size > 1 << 32:
            raise ValueError(f"{fname}: data.pkl is {info.file_size} bytes, beyond any real checkpoint")
        reader = _Reader(archive.read(pkl[0]), archive, prefix, fname)
        try:
            return reader.load()
        except Refused:
            raise
        except (pickle.UnpicklingError, EOFError, IndexError, KeyError, TypeError, ValueError, AttributeError,
                struct.error, RecursionError) as e:
            raise ValueError(f"{fname}: a malformed data.pkl ({type(e).__name__}: {e})") from None


# ---------------------------------------------------------------- writing

class _Global:
    """Pickles as the global module.name (which need not exist here)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # (pickle wants a reduce's function callable)
        raise RuntimeError(f"{self.module}.{self.name} is PyTorch's, written for torch.load")


class _StorageRef:
    def __init__(self, key, storage_name, numel):
        self.key, self.storage_name, self.numel = key, storage_name, numel


class _Reduced:
    """An object that pickles as func(*args)."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


class _Writer(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", obj.storage_name), obj.key, "cpu", obj.numel)
        return None

    def save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
        self.memoize(obj)

    dispatch[_Global] = save_torch_global


def write(obj, fh, fname):
    """obj as a PyTorch zip checkpoint: dicts, lists, tuples, numbers,
    strings, None, tensors and parameters."""
    from .nn.parameter import Parameter
    storages, keys = [], {}

    def convert(o, depth=0):
        if depth > 500:
            raise ValueError("save(): the object is nested too deeply")
        if isinstance(o, Tensor):
            k = id(o)
            if k not in keys:
                c = o.detach().contiguous()
                keys[k] = (str(len(storages)), c)
                storages.append(c)
            key, c = keys[k]
            dt = _dtype_name(c.dtype)
            ref = _StorageRef(key, _STORAGE_OF_DTYPE[dt], c.numel())
            strides, acc = [], 1
            for n in reversed(tuple(c.shape)):
                strides.append(acc)
                acc *= n
            tensor = _Reduced(_Global("torch._utils", "_rebuild_tensor_v2"),
                              (ref, 0, tuple(c.shape), tuple(reversed(strides)),
                               bool(o.requires_grad) and not isinstance(o, Parameter), collections.OrderedDict()))
            if isinstance(o, Parameter):
                return _Reduced(_Global("torch._utils", "_rebuild_parameter"),
                                (tensor, bool(o.requires_grad), collections.OrderedDict()))
            return tensor
        if isinstance(o, collections.OrderedDict):
            return collections.OrderedDict((convert(k, depth + 1), convert(v, depth + 1)) for k, v in o.items())
        if isinstance(o, dict):
            return {convert(k, depth + 1): convert(v, depth + 1) for k, v in o.items()}
        if isinstance(o, list):
            return [convert(v, depth + 1) for v in o]
        if isinstance(o, tuple):
            return tuple(convert(v, depth + 1) for v in o)
        if o is None or isinstance(o, (bool, int, float, str, bytes)):
            return o
        if isinstance(o, _C.dtype):
            return _Global("torch", _dtype_name(o))
        raise TypeError(f"save(): cannot store {type(o).__name__} in a PyTorch checkpoint; it holds dicts, lists, "
                        f"tuples, numbers, strings, bytes, None and tensors")

    payload = io.BytesIO()
    _Writer(payload, protocol=2).dump(convert(obj))
    import ctypes
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", payload.getvalue())
        z.writestr("archive/byteorder", b"little")
        for i, c in enumerate(storages):
            nbytes = c.numel() * c.element_size()
            raw = ctypes.string_at(c.data_ptr(), nbytes) if nbytes else b""
            z.writestr(f"archive/data/{i}", _byteswap_to_little(raw, c.element_size()))
        z.writestr("archive/version", b"3\n")
