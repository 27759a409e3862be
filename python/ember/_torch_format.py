"""PyTorch's checkpoint format (torch.save since 1.6), read and written
without PyTorch.

A .pt file is a ZIP archive: <dir>/data.pkl, a pickle of the saved object
in which every tensor is a call of torch._utils._rebuild_tensor_v2 on a
storage named by a persistent id ('storage', torch.FloatStorage, key,
location, numel); <dir>/data/<key>, each storage's raw little-endian
bytes; <dir>/version and <dir>/byteorder.

Reading runs data.pkl through ember's own restricted pickle machine
(_pickle_vm): the only globals it resolves are the tensor and parameter
rebuilds (to ember's own implementations, which check every offset, size
and stride against the storage), the storage types, dtypes, torch.Size and
collections.OrderedDict. Any other global (a function or class that
unpickling would call, such as os.system) is refused with an error naming
it, before it is looked up; only those resolved objects may be called, only
OrderedDicts may receive BUILD's state, and the result must be plain data,
so a hostile file can neither run code nor change ember's own objects.

Each storage is read once, straight from the archive into one flat tensor
(a stored member with one read into its memory, a deflated one in bounded
chunks, its CRC checked either way), and every tensor rebuilt on it is a
view of it, as PyTorch's are: tensors that shared a storage share it
again, and a stride-0 tensor costs its storage's bytes, not its numel's.

Writing makes the same archive, with pickles PyTorch's own weights_only
loader accepts."""

import collections
import concurrent.futures
import ctypes
import io
import pickle
import struct
import sys
import zipfile
import zlib

import numpy as np

from . import _C, _pickle_vm, _safe_globals
from ._pickle_vm import Refused
from ._creation import empty
from ._tensor import Tensor, _byteswap_to_little, _dtype_name

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
_MAX_PICKLE_BYTES = 1 << 30


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
    """A storage's elements as one flat ember tensor: every tensor rebuilt
    on it is a view of that memory, as PyTorch's are of theirs."""

    def __init__(self, stype, tensor):
        self.stype, self.tensor = stype, tensor


class _Marker:
    """A class a pickle names only to tag a rebuild (torch.Tensor, Parameter)."""

    def __init__(self, name):
        self.name = name


def _latin1(text, encoding="latin1"):
    """_codecs.encode as protocol-2 pickles use it, for bytes: text to latin-1."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise Refused("_codecs.encode is allowed only to make bytes from latin-1 text")
    return text.encode("latin1")


def _size(*args):
    """torch.Size(seq) as a tuple."""
    if len(args) != 1 or not isinstance(args[0], (tuple, list)) or \
            not all(type(n) is int for n in args[0]):
        raise Refused("torch.Size is allowed only on a tuple or list of ints")
    return tuple(args[0])


def _short(v):
    """v for a message: an int of any length, or a repr cut to 80 characters
    (a file may hold ints too long to print)."""
    if isinstance(v, int) and v.bit_length() > 64:
        return f"<an int of {v.bit_length()} bits>"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_short(x) for x in v[:8]) + (", ..." if len(v) > 8 else "")
        return f"[{inner}]"
    text = repr(v) if not isinstance(v, (bytes, bytearray, str)) or len(v) < 80 else repr(v[:80]) + "..."
    return text[:80]


def _index(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError
    return v


# The only kinds of object a checkpoint may hand back (anything else, such as
# one of the rebuild functions named as a global, stays inside the loader).
_PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray)
_CONTAINERS = (tuple, list, dict, collections.OrderedDict, set, frozenset)
_MAX_DEPTH = 1000


class _Reader:
    """One data.pkl: the restricted pickle machine (_pickle_vm) resolving
    only the names below, storages read straight into their tensors."""

    def __init__(self, fh, archive, prefix, fname, members, meta=False):
        self._fh, self._archive, self._prefix, self._fname = fh, archive, prefix, fname
        self._meta = meta  # (map_location="meta": storages of the meta device, nothing read)
        self._members = members  # {name: data offset of a stored member, or None}
        self._storages = {}
        stored = sum(i.file_size for i in archive.infolist() if members.get(i.filename) is not None)
        self._checks = _Checks() if stored >= _OVERLAP_BYTES else None

    def _bad(self, why):
        return Refused(f"{self._fname}: {why}")

    def load(self, data, trusted=False):
        """The object data.pkl holds. trusted (weights_only=False): any
        class it names is imported and rebuilt, as pickle does, so that a
        whole module saved by reference loads: only for files the user
        trusts, since unpickling them can run any code."""
        try:
            if trusted:
                return _TrustedUnpickler(io.BytesIO(data), self).load()
            self._user_classes, self._user_ids = _safe_globals.allowed_objects()
            obj = _pickle_vm.load(data, self.resolve, self.persistent_load, self._user_classes)
        finally:
            if self._checks is not None:
                self._checks.wait(self._fname)
        self._check_plain(obj, _C.dtype)
        return obj

    def resolve(self, module, name):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):  # (a set of plain items)
            return set if name == "set" else frozenset
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
            return _size
        if module == "torch" and name in _DTYPES:
            return getattr(_C, name)
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return _Marker(name)
        allowed = _safe_globals.lookup(module, name)
        if allowed is not None:
            return allowed
        raise self._bad(f"refusing to load {module}.{name}: a PyTorch checkpoint read by ember may hold only "
                        f"tensors, parameters and plain containers (anything else could run code when "
                        f"unpickled); if you trust this file (a whole model saved with save(model)), load it "
                        f"with weights_only=False, or allow what it names with "
                        f"ember.serialization.add_safe_globals([{module}.{name}])")

    def _check_plain(self, obj, dtype_type):
        """Refuses a result that holds anything but data: the loader's own
        functions and markers (named as globals) never leave it."""
        seen, todo = set(), [(obj, 0)]
        while todo:
            o, depth = todo.pop()
            if isinstance(o, _PLAIN) or isinstance(o, (Tensor, dtype_type)):
                continue
            if id(o) in self._user_ids:  # (an allowed function or class itself)
                continue
            if type(o) in self._user_classes:  # (an instance of one: its state is checked too)
                if id(o) not in seen:
                    seen.add(id(o))
                    todo.extend((x, depth + 1) for x in getattr(o, "__dict__", {}).values())
                continue
            if type(o) not in _CONTAINERS:
                raise self._bad(f"the checkpoint's object holds a {type(o).__name__}, which a checkpoint uses "
                                f"only to rebuild tensors")
            if id(o) in seen:
                continue
            if depth > _MAX_DEPTH:
                raise ValueError(f"{self._fname}: the checkpoint's object is nested more than {_MAX_DEPTH} "
                                 f"levels deep")
            seen.add(id(o))
            items = list(o.items()) if isinstance(o, dict) else o
            if isinstance(o, dict):
                items = [x for kv in items for x in kv] + list(getattr(o, "__dict__", {}).values())
            todo.extend((x, depth + 1) for x in items)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self._bad(f"unexpected persistent id {_short(pid)} (expected ('storage', type, key, location, "
                            f"numel))")
        _, stype, key, _, numel = pid
        if not isinstance(stype, _StorageType) or not isinstance(key, str) or not isinstance(numel, int) \
                or isinstance(numel, bool) or numel < 0:
            raise self._bad(f"malformed storage reference {_short(pid)}")
        if key not in self._storages:
            self._storages[key] = self._read_storage(stype, key, numel)
        st = self._storages[key]
        if st.stype.name != stype.name:
            raise self._bad(f"storage {key!r} is referenced as both {st.stype.name} and {stype.name}")
        if st.tensor.numel() != numel:
            raise self._bad(f"storage {key!r} is referenced with {_short(numel)} and {st.tensor.numel()} elements")
        return st

    def _read_storage(self, stype, key, numel):
        name = f"{self._prefix}data/{key}"
        try:
            info = self._archive.getinfo(name)
        except KeyError:
            raise self._bad(f"storage {key!r} is missing from the archive ({name})") from None
        nbytes = numel * stype.itemsize
        if nbytes > _MAX_STORAGE_BYTES or info.file_size != nbytes:
            raise self._bad(f"storage {key!r} holds {info.file_size} bytes, but its reference says "
                            f"{_short(numel)} elements of {stype.itemsize} bytes")
        t = empty((numel,), dtype=getattr(_C, stype.dtype), device="meta" if self._meta else "cpu")
        if nbytes and not self._meta:
            buf = memoryview((ctypes.c_ubyte * nbytes).from_address(t._address("load()"))).cast("B")
            _read_member(self._fh, self._archive, info, self._members[name], buf, self._fname, self._checks)
            if sys.byteorder != "little" and stype.itemsize > 1:
                np.frombuffer(buf, dtype=_UINT_OF_SIZE[stype.itemsize]).byteswap(inplace=True)
            if stype.dtype == "bool" and np.frombuffer(buf, dtype=np.uint8).max() > 1:
                raise ValueError(f"{self._fname}: storage {key!r} is a BoolStorage but holds bytes other than "
                                 f"0 and 1")
        return _Storage(stype, t)

    def _rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
        if not isinstance(storage, _Storage):
            raise self._bad("a tensor rebuild without a storage")
        try:
            size = tuple(_index(n) for n in size)
            stride = tuple(_index(s) for s in stride)
            offset = _index(offset)
        except TypeError:
            raise self._bad(f"malformed tensor geometry: size {_short(size)}, stride {_short(stride)}, "
                            f"offset {_short(offset)}") from None
        n = storage.tensor.numel()
        if len(size) != len(stride) or offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise self._bad(f"malformed tensor geometry: size {_short(size)}, stride {_short(stride)}, "
                            f"offset {_short(offset)}")
        numel = 1
        for s in size:
            numel *= s
        last = offset + sum((s - 1) * st for s, st in zip(size, stride)) if numel else offset - 1
        if numel and (last >= n or offset >= n):
            raise self._bad(f"a tensor of size {_short(size)}, stride {_short(stride)} and offset {_short(offset)} "
                            f"reaches element {_short(last)} of a storage of {n}")
        try:
            t = _C._storage_view(storage.tensor, offset if numel else 0, size, stride)
        except (ValueError, OverflowError) as e:
            raise self._bad(f"a tensor of size {_short(size)} and stride {_short(stride)}: {e}") from None
        if requires_grad:
            if not t.is_floating_point():
                raise self._bad(f"a {storage.stype.dtype} tensor that requires grad (only floating-point ones can)")
            t.requires_grad_(True)
        return t

    def _rebuild_parameter(self, data, requires_grad, hooks, state=None):
        from .nn.parameter import Parameter
        if not isinstance(data, Tensor):
            raise self._bad("a parameter rebuild without a tensor")
        if requires_grad and not data.is_floating_point():
            raise self._bad("an integer parameter that requires grad (only floating-point ones can)")
        return Parameter(data.detach(), bool(requires_grad))

    def _rebuild_from_type(self, func, new_type, args, state):
        # (the state is a tensor's Python attributes; ember tensors hold none)
        if getattr(func, "__self__", None) is not self or not isinstance(new_type, _Marker) \
                or getattr(func, "__func__", None) not in (_Reader._rebuild_tensor, _Reader._rebuild_parameter) \
                or not isinstance(args, tuple):
            raise self._bad("a malformed tensor rebuild")
        t = func(*args)
        if new_type.name == "Parameter":
            from .nn.parameter import Parameter
            t = Parameter(t.detach(), t.requires_grad)
        return t


def _local_headers(fh, archive, fname):
    """{member name: where its data starts, for a stored member; None for a
    compressed one}. Checks every member against its local header and that
    no two members' bytes overlap (the trick of zip bombs, which make
    small files declare huge contents)."""
    spans, out = [], {}
    fh.seek(0, io.SEEK_END)
    end = fh.tell()
    for info in archive.infolist():
        fh.seek(info.header_offset)
        head = fh.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            raise ValueError(f"{fname}: a damaged ZIP archive: member {info.filename!r} has no local header")
        n, extra = struct.unpack("<HH", head[26:30])
        try:
            want = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
        except UnicodeEncodeError:
            want = None
        if fh.read(n) != want:
            raise ValueError(f"{fname}: a damaged ZIP archive: member {info.filename!r} is named otherwise in "
                             f"its local header")
        start = info.header_offset + 30 + n + extra
        if start + info.compress_size > end:
            raise ValueError(f"{fname}: member {info.filename!r} declares {info.compress_size} bytes, more than "
                             f"the file holds")
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise ValueError(f"{fname}: member {info.filename!r} is stored uncompressed but declares "
                             f"{info.compress_size} bytes stored for {info.file_size}")
        spans.append((info.header_offset, start + info.compress_size, info.filename))
        out[info.filename] = start if info.compress_type == zipfile.ZIP_STORED else None
    spans.sort()
    for (_, a_end, a), (b_start, _, b) in zip(spans, spans[1:]):
        if b_start < a_end:
            raise ValueError(f"{fname}: members {a!r} and {b!r} overlap in the archive")
    return out


_CHUNK = 16 << 20
_OVERLAP_BYTES = 32 << 20  # checkpoints this large take their CRCs on a second thread


class _Checks(list):
    """CRCs being taken on a second thread: [(member name, expected CRC,
    future)], all awaited by wait()."""

    def __init__(self):
        super().__init__()
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ember-crc")

    def wait(self, fname):
        try:
            for name, want, got in self:
                if got.result() != want:
                    raise ValueError(f"{fname}: member {name!r} fails its CRC check (a damaged archive)")
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def fill(fh, buf):
    """Reads into memoryview `buf` from fh until it is full or the file
    ends (raw files may return short reads); the bytes read."""
    done = 0
    while done < len(buf):
        n = fh.readinto(buf[done:])
        if not n:
            break
        done += n
    return done


def _read_member(fh, archive, info, start, buf, fname, checks=None):
    """Fills `buf` (exactly the member's declared size) with the member's
    bytes: a stored member straight from the file, a compressed one inflated
    in bounded chunks; either way its CRC is checked, a stored member's on
    `checks`'s thread when given (the caller waits for it)."""
    if start is not None:
        fh.seek(start)
        done = fill(fh, buf)
        if done < len(buf):
            raise ValueError(f"{fname}: member {info.filename!r} declares {len(buf)} bytes but the file holds {done}")
        if checks is not None:  # (checked on another thread while the next storage is read)
            checks.append((info.filename, info.CRC, checks.pool.submit(_C._crc32, buf)))
            return
        crc = _C._crc32(buf)
    else:
        with archive.open(info) as src:
            done = 0
            while done < len(buf):
                chunk = src.read(min(_CHUNK, len(buf) - done))
                if not chunk:
                    raise ValueError(f"{fname}: member {info.filename!r} declares {len(buf)} bytes but "
                                     f"inflates to {done}")
                buf[done:done + len(chunk)] = chunk
                done += len(chunk)
            if src.read(1):
                raise ValueError(f"{fname}: member {info.filename!r} inflates to more than the {len(buf)} "
                                 f"bytes it declares")
        crc = info.CRC
    if crc != info.CRC:
        raise ValueError(f"{fname}: member {info.filename!r} fails its CRC check (a damaged archive)")


# What the ZIP reader raises on a damaged archive, at opening or at reading
# a member (a bad local header, a bad CRC, deflate data that does not
# inflate, a compression method or an encryption it does not do, a member
# name that is not UTF-8).
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
               UnicodeDecodeError)


class _TrustedUnpickler(pickle.Unpickler):
    """pickle's own machine over data.pkl, tensors rebuilt by the reader
    (weights_only=False)."""

    def __init__(self, file, reader):
        super().__init__(file)
        self._reader = reader

    def find_class(self, module, name):
        try:
            return self._reader.resolve(module, name)
        except Refused:
            return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._reader.persistent_load(pid)


def read(fh, fname, trusted=False, meta=False):
    """The object a PyTorch zip checkpoint holds. A damaged archive is a
    ValueError naming the file; a pickle that names anything but tensors
    and containers is Refused (pickle.UnpicklingError, as torch.load's
    weights_only refusal) unless trusted (weights_only=False). meta: its
    tensors on the meta device, no storage read."""
    try:
        return _read(fh, fname, trusted, meta)
    except Refused:
        raise
    except _ZIP_ERRORS as e:
        raise ValueError(f"{fname}: not a readable PyTorch checkpoint (a damaged ZIP archive: "
                         f"{type(e).__name__}: {e})") from None


def _read(fh, fname, trusted=False, meta=False):
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
        if len(set(names)) != len(names):
            raise ValueError(f"{fname}: a ZIP archive with two members of one name")
        members = _local_headers(fh, archive, fname)
        prefix = pkl[0][: -len("data.pkl")]
        order = f"{prefix}byteorder"
        if order in names and archive.read(order).strip() not in (b"little", b""):
            raise ValueError(f"{fname}: a big-endian checkpoint; ember reads little-endian ones")
        info = archive.getinfo(pkl[0])
        if info.file_size > _MAX_PICKLE_BYTES:
            raise ValueError(f"{fname}: data.pkl is {info.file_size} bytes, beyond any real checkpoint")
        reader = _Reader(fh, archive, prefix, fname, members, meta)
        try:
            return reader.load(archive.read(pkl[0]), trusted)
        except Refused as e:
            if str(e).startswith(fname):
                raise
            raise Refused(f"{fname}: {e}") from None
        except _pickle_vm.Malformed as e:
            raise ValueError(f"{fname}: a malformed data.pkl ({e})") from None
        except (TypeError, ValueError, OverflowError, MemoryError) as e:
            if str(e).startswith(fname):
                raise
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
    tensor_reduction = None  # (prepare's: a tensor met inside an object pickles as a rebuild)

    def reducer_override(self, obj):
        if isinstance(obj, Tensor) and self.tensor_reduction is not None:
            return self.tensor_reduction(obj).__reduce__()
        if isinstance(obj, _C.dtype):  # (a module, ember._C, does not pickle: the dtype by its name)
            return dtype_named, (_dtype_name(obj),)
        return NotImplemented


    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", obj.storage_name), obj.key, "cpu", obj.numel)
        return None

    def save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
        self.memoize(obj)

    dispatch[_Global] = save_torch_global


def dtype_named(name):
    """The ember dtype of a name (how a dtype inside a pickled object loads)."""
    return getattr(_C, name)


def prepare(obj):
    """What write() stores for obj: the pickle's bytes and the storages, no
    file touched. Dicts, lists, tuples, numbers, strings, None, tensors and
    parameters make a checkpoint PyTorch and weights_only loads read; any
    other object (a whole model) is pickled by reference to its class, as
    torch.save does, and loads only with weights_only=False."""
    from .nn.parameter import Parameter
    storages, keys = [], {}

    def convert(o, depth=0):
        if depth > 500:
            raise ValueError("save(): the object is nested too deeply")
        if isinstance(o, Tensor):
            k = id(o)
            if o.is_meta:
                raise NotImplementedError("save(): a meta tensor has no data to save (move the model to a device with "
                                          "data first, e.g. Module.to_empty(device='cpu'))")
            if k not in keys:
                c = o.detach().contiguous() if o.is_cpu else o.detach().cpu()  # (a device's values, copied)
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
        return o  # (pickled by reference to its class; its tensors through the writer's reducer_override)

    payload = io.BytesIO()
    writer = _Writer(payload, protocol=2)
    writer.tensor_reduction = convert
    try:
        writer.dump(convert(obj))
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise TypeError(f"save(): cannot store this object in a .pt file (pickle: {type(e).__name__}: {e}); "
                        f"save its state_dict() instead") from None
    return payload.getvalue(), storages


def write(prepared, fh):
    """prepare()'s checkpoint into fh, each storage straight from its
    tensor's memory."""
    pkl, storages = prepared
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", b"little")
        for i, c in enumerate(storages):
            nbytes = c.numel() * c.element_size()
            with z.open(zipfile.ZipInfo(f"archive/data/{i}"), "w", force_zip64=nbytes >= 1 << 31) as out:
                if nbytes:
                    raw = memoryview((ctypes.c_ubyte * nbytes).from_address(c._address("save()"))).cast("B")
                    out.write(raw if sys.byteorder == "little" else _byteswap_to_little(raw, c.element_size()))
        z.writestr("archive/version", b"3\n")
