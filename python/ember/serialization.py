"""ember.save / ember.load: tensors, state dicts and whole checkpoints.

    ember.save(model_state, "model.safetensors", metadata={"epoch": "3"})
    state = ember.load("model.safetensors")        # {"fc.weight": tensor, ...}
    ember.save({"model": sd, "optimizer": opt.state_dict(), "epoch": 3}, "ckpt.safetensors")
    ember.save(checkpoint, "ckpt.pt")             # PyTorch's format: torch.load reads it
    checkpoint = ember.load("resnet18.pth")       # written by torch.save, read without PyTorch

Three layouts, told apart by load from the file's first bytes:
- a tensor or a str -> tensor mapping: plain safetensors (below), which
  other libraries read;
- anything else (nested dicts, lists, tuples, numbers, strings, None,
  tensors): the same, its tensors as entries "0", "1", ... and the
  structure as JSON in the metadata (ember/_structure.py);
- format="pt" (the default for paths ending in .pt, .pth or .tar):
  PyTorch's zip checkpoint (ember/_torch_format.py). Reading one unpickles
  with a restricted unpickler that resolves only tensor rebuilds and plain
  containers, so a hostile file cannot run code.

The format (https://github.com/huggingface/safetensors), so that files move
to and from PyTorch, NumPy and other libraries without pickle:

    N            8 bytes, unsigned little-endian: the header's length
    header       N bytes of UTF-8 JSON: {"name": {"dtype": "F32", "shape": [2, 3],
                 "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
                 (optional metadata; we pad the header with spaces to a multiple
                 of 8 bytes, as the reference writer does, so data is aligned)
    data         each tensor's elements, little-endian, row-major; offsets are
                 relative to the start of this section, which they tile exactly

What is saved: one tensor, or a mapping (dict, OrderedDict) of str -> tensor.
A single tensor is stored under the name "" (SINGLE_TENSOR_NAME) and `load`
returns a tensor when that is the file's only name; so "" may not be a key of
a saved dict. Tensors are written as contiguous copies: views, 0-d and empty
tensors round-trip, but tensors sharing memory (tied weights) load as
separate tensors. A mapping loads as a plain dict in the file's order.

`load` trusts nothing in the file: every malformed file raises ValueError
naming the file and the problem, checked before any tensor memory is
allocated; loaded tensors own their memory.

`f` is a path (str or os.PathLike) or a binary file object; a file object is
read from its current position to its end.
"""

import contextlib
import ctypes
import io
import json
import os
import struct
import sys
from collections.abc import Mapping
from typing import NamedTuple

from . import _C
from . import _structure, _torch_format
from ._safe_globals import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals  # noqa: F401
from ._creation import empty
from ._tensor import Tensor, _byteswap_to_little, _dtype_name

__all__ = ["save", "load", "load_metadata", "SINGLE_TENSOR_NAME", "add_safe_globals", "clear_safe_globals",
           "get_safe_globals", "safe_globals"]

SINGLE_TENSOR_NAME = ""

# safetensors dtype codes of the dtypes ember has (the format has more, such
# as U16 and F8_E4M3, which load refuses by name).
_DTYPE_OF_CODE = {
    "F32": "float32", "F64": "float64", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
    "BOOL": "bool",
}
_CODE_OF_DTYPE = {name: code for code, name in _DTYPE_OF_CODE.items()}

_METADATA_KEY = "__metadata__"
_MAX_HEADER_BYTES = 100_000_000  # the reference reader's limit: refuse absurd headers early
_ALIGN = 8
_MAX_DIM = 2**63 - 1  # sizes are int64 in the runtime


# ---- files ----

@contextlib.contextmanager
def _open(f, mode):
    """Yields (binary file object, name for messages). Paths are opened here
    and closed on exit; file objects are the caller's and stay open."""
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, mode) as fh:
            yield fh, os.fsdecode(f)
        return
    op = "read" if "r" in mode else "write"
    if not callable(getattr(f, op, None)):
        raise TypeError(f"expected a path (str or os.PathLike) or a binary file object with "
                        f"a {op}() method, got {type(f).__name__}")
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{_file_name(f)} is open in text mode; open it in binary mode "
                        f"('{'rb' if op == 'read' else 'wb'}')")
    yield f, _file_name(f)


@contextlib.contextmanager
def _open_for_write(f):
    """Yields (binary file object, name for messages). A path is replaced
    atomically (runtime/atomic_file.c): written beside it, synced, renamed
    over it, so a failed or killed save leaves the old file whole. A path
    that exists but is no regular file (a FIFO, /dev/null) is written in
    place; a file object is the caller's, written where it stands."""
    if not isinstance(f, (str, bytes, os.PathLike)):
        with _open(f, "wb") as out:
            yield out
        return
    path = os.fsdecode(f)
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "wb") as fh:
            yield fh, path
        return
    handle = _C._atomic_begin(path)
    try:
        try:
            with os.fdopen(os.dup(_C._atomic_fileno(handle)), "wb") as fh:
                yield fh, path
        except OSError as e:  # (a full disk: say which file, as open() would)
            if e.filename is None and e.errno is not None:
                raise OSError(e.errno, f"{e.strerror} (writing {path}; the previous file is kept)", path) \
                    from None
            raise
        _C._atomic_commit(handle)
    finally:
        _C._atomic_abort(handle)  # (nothing to do once committed)


def _file_name(f):
    name = getattr(f, "name", None)
    return os.fsdecode(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__}>"


def _remaining_size(fh):
    """Bytes from fh's position to its end, or None when it cannot seek."""
    try:
        if hasattr(fh, "seekable") and not fh.seekable():
            return None
        pos = fh.tell()
        end = fh.seek(0, io.SEEK_END)
        fh.seek(pos)
    except (AttributeError, OSError, ValueError):
        return None
    return end - pos


def _read_exact(fh, n, fname, what):
    buf = bytearray(n)
    _readinto_exact(fh, memoryview(buf), fname, what)
    return bytes(buf)


def _readinto_exact(fh, buf, fname, what):
    """Fills memoryview `buf` from fh, or raises naming what is missing."""
    done = _torch_format.fill(fh, buf)
    if done < len(buf):
        raise ValueError(f"{fname}: file is truncated: expected {len(buf)} bytes of {what}, got {done}")


# ---- save ----

_PT_SUFFIXES = (".pt", ".pth", ".tar")


def save(obj, f, *, metadata=None, format=None):
    """Writes `obj` to `f` (a path or a binary file object): a tensor or a
    mapping of str -> tensor (a state_dict) as plain safetensors; nested
    dicts, lists, tuples, numbers, strings and tensors (a checkpoint) as
    safetensors with the structure in its metadata; or, with format="pt"
    (the default for paths ending in .pt, .pth, .tar, and for a whole
    model saved to a file object or another path), in PyTorch's zip
    format, where any other picklable object (a whole model) is stored by
    reference to its class, as torch.save does, and loads only with
    weights_only=False. `metadata` (str -> str) is for the safetensors layouts.
    Everything is checked before the file is opened, so a bad call leaves
    it untouched, and a path is replaced atomically: a save that fails (a
    full disk) or is killed leaves the previous file as it was."""
    if format is None:
        name = os.fsdecode(f) if isinstance(f, (str, bytes, os.PathLike)) else ""
        pt = name.lower().endswith(_PT_SUFFIXES) or (not name.lower().endswith(".safetensors") and _whole_model(obj))
        format = "pt" if pt else "safetensors"
    if format not in ("pt", "safetensors"):
        raise ValueError(f"save(): format must be 'safetensors' or 'pt', got {format!r}")
    if format == "pt":
        if metadata is not None:
            raise ValueError("save(): metadata is stored in the safetensors format only; put it in the saved "
                             "dict for format='pt'")
        payload = _torch_format.prepare(obj)  # (refuses what it cannot store before any file is touched)
        with _open_for_write(f) as (fh, _):
            _torch_format.write(payload, fh)
        return
    metadata = _check_metadata(metadata)
    if _structure.is_flat(obj):
        named = _named_tensors(obj)
    else:
        text, tensors = _structure.encode(obj)
        if metadata and _structure.KEY in metadata:
            raise ValueError(f"save(): the metadata key {_structure.KEY!r} is ember's own")
        metadata = dict(metadata or {}, **{_structure.KEY: text})
        named = [(str(i), _in_host_memory(t)) for i, t in enumerate(tensors)]
    header = _header_bytes(named, metadata)
    with _open_for_write(f) as (fh, _):
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
        for _, t in named:
            _write_tensor(fh, t)


def _whole_model(obj, depth=0):
    """Whether obj is, or holds in plain containers, an nn.Module: what
    torch.save(model, f) stores by pickling, which only PyTorch's zip
    format holds (anything else unpicklable-by-safetensors is refused)."""
    from .nn import Module
    if isinstance(obj, Module):
        return True
    if depth > 8:
        return False
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return any(_whole_model(o, depth + 1) for o in items)


def _named_tensors(obj):
    """[(name, contiguous tensor)] in the order they will be written."""
    if isinstance(obj, Tensor):
        return [(SINGLE_TENSOR_NAME, _in_host_memory(obj))]
    if not isinstance(obj, Mapping):
        raise TypeError(f"save(): expected a tensor or a dict of str -> tensor (a state_dict), "
                        f"got {type(obj).__name__}")
    named = []
    for name, t in obj.items():
        if not isinstance(name, str):
            raise TypeError(f"save(): dict keys must be str, got {type(name).__name__} "
                            f"({name!r})")
        if name in (SINGLE_TENSOR_NAME, _METADATA_KEY):
            raise ValueError(f"save(): the name {name!r} is reserved ("
                             f"{'a single saved tensor' if name == '' else 'file metadata'}); "
                             f"rename that entry")
        if not isinstance(t, Tensor):
            raise TypeError(f"save(): value of {name!r} must be an ember.Tensor, got "
                            f"{type(t).__name__}")
        named.append((name, _in_host_memory(t)))
    return named


def _in_host_memory(t):
    """t's values contiguous in host memory, as save() writes them: t
    itself (made contiguous) on the CPU, a copy from another device (a
    checkpoint holds values, and loads onto the CPU unless map_location
    says otherwise). A meta tensor stays as it is: _has_data refuses it."""
    return t.contiguous() if t.is_cpu or t.is_meta else t.detach().cpu()


def _check_metadata(metadata):
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("save(): metadata must be a dict of str -> str (the format stores only "
                        "strings; convert numbers with str())")
    return dict(metadata)


def _has_data(t, name):
    """Refuses a meta tensor before any file is touched: it has nothing to save."""
    if t.is_meta:
        raise NotImplementedError(f"save(): tensor {name!r} is a meta tensor: it has no data to save (move the "
                                  f"model to a device with data first, e.g. Module.to_empty(device='cpu'))")


def _header_bytes(named, metadata):
    """The JSON header, UTF-8, space-padded to a multiple of _ALIGN bytes."""
    header = {} if metadata is None else {_METADATA_KEY: metadata}
    offset = 0
    for name, t in named:
        _has_data(t, name)
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": _CODE_OF_DTYPE[_dtype_name(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    try:
        raw = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"save(): a name or metadata string is not valid Unicode "
                         f"(lone surrogate?): {e}") from None
    return raw + b" " * (-len(raw) % _ALIGN)


def _write_tensor(fh, t):
    nbytes = t.numel() * t.element_size()
    if not nbytes:
        return
    data = (ctypes.c_ubyte * nbytes).from_address(t._address("save()"))  # t stays alive meanwhile
    if sys.byteorder != "little":
        data = _byteswap_to_little(bytes(data), t.element_size())
    fh.write(memoryview(data).cast("B"))


# ---- load ----

def load(f, map_location=None, *, weights_only=None):
    """Reads what `save` wrote (or any safetensors file, or a checkpoint
    torch.save wrote): a tensor if a safetensors file's only name is "",
    the saved structure if it has one, else a dict of name -> tensor in the
    file's order. PyTorch checkpoints are read as weights_only=True reads
    them (the default, as in PyTorch 2.6): only tensors and plain
    containers, never code; weights_only=False unpickles anything the file
    names (a whole model saved with save(model)), for files you trust.
    `map_location` is accepted for porting torch.load calls; tensors load
    onto the CPU ("cpu", or a function such as lambda storage, loc:
    storage), onto a CUDA device ("cuda", "cuda:0": read, then copied
    over), or with map_location="meta" onto the meta device: the file's
    structure, every tensor's shape, dtype and strides, checked as usual,
    and none of its data read. Raises ValueError, naming the file, for a
    malformed file."""
    meta = False
    if map_location is not None and not callable(map_location):
        where = str(map_location)
        meta = where == "meta"
        if where == "cuda" or where.startswith("cuda:"):  # read on the CPU, then copied over
            from . import cuda
            from ._tensor import Tensor
            if not cuda.is_available():  # (before reading anything)
                raise cuda._unavailable(f"load(map_location={map_location!r})", where)
            loaded = load(f, weights_only=weights_only)
            return _map_tensors(loaded, lambda t: t.to(where) if isinstance(t, Tensor) else t)
        if not meta and where not in ("cpu", "cpu:0"):
            raise NotImplementedError(f"load(): map_location={map_location!r} is not supported; "
                                      f"tensors load onto the CPU, a CUDA device or the meta device")
    with _open(f, "rb") as (fh, fname):
        fh, size = _sized(fh)
        start = fh.tell()
        head = fh.read(16)
        fh.seek(start)
        if _torch_format.is_torch_zip(head):
            return _torch_format.read(fh, fname, trusted=weights_only is False, meta=meta)
        if _torch_format.is_legacy_torch(head):
            raise ValueError(f"{fname}: a checkpoint in PyTorch's legacy format (torch.save before 1.6, or "
                             f"_use_new_zipfile_serialization=False); ember reads the zip format: re-save it "
                             f"with a recent PyTorch")
        entries, metadata = _read_header(fh, size, fname)
        # the data is read sequentially in the file's layout, returned in header order
        tensors = {e.name: _read_tensor(fh, e, fname, meta) for e in _in_file_order(entries)}
    if _structure.KEY in metadata:
        if set(tensors) != {str(i) for i in range(len(tensors))}:
            raise ValueError(f"{fname}: {_structure.KEY}: a structured checkpoint's tensors are named 0, 1, ...; "
                             f"this file has {_short_names(tensors)}")
        return _structure.decode(metadata[_structure.KEY], [tensors[str(i)] for i in range(len(tensors))], fname)
    out = {e.name: tensors[e.name] for e in entries}
    if list(out) == [SINGLE_TENSOR_NAME]:
        return out[SINGLE_TENSOR_NAME]
    return out


def _map_tensors(obj, fn):
    """obj with fn applied to each tensor of its dicts, lists and tuples."""
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(v, fn)) for k, v in obj.items()) if type(obj) is not dict else \
            {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return fn(obj)


def _short_names(tensors):
    names = sorted(tensors)
    return ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")


def load_metadata(f):
    """The file's "__metadata__" dict (str -> str), {} when it has none.
    Checks the whole header, as load does, but reads no tensor data."""
    with _open(f, "rb") as (fh, fname):
        fh, size = _sized(fh)
        _, metadata = _read_header(fh, size, fname)
    return metadata


def _sized(fh):
    """(file object with readinto, bytes left in it). A stream that cannot
    seek is read whole first, since the layout is checked against the size
    before any tensor data is read."""
    size = _remaining_size(fh)
    if size is None or not hasattr(fh, "readinto"):
        data = fh.read()
        fh, size = io.BytesIO(data), len(data)
    return fh, size


def _read_header(fh, size, fname):
    """Reads and checks the header of a file with `size` bytes left in `fh`.
    Returns ([_Entry] in header order, metadata)."""
    if size < 8:
        raise ValueError(f"{fname}: not a safetensors file: it is {size} bytes long, shorter "
                         f"than the 8-byte header length that starts the format")
    (n,) = struct.unpack("<Q", _read_exact(fh, 8, fname, "header length"))
    if n > size - 8:
        raise ValueError(f"{fname}: not a safetensors file: its header length ({n} bytes) goes "
                         f"beyond the end of the file ({size - 8} bytes after the length)")
    if n > _MAX_HEADER_BYTES:
        raise ValueError(f"{fname}: header of {n} bytes is larger than the format's limit "
                         f"({_MAX_HEADER_BYTES} bytes)")
    header = _parse_json(_read_exact(fh, n, fname, "header"), fname)
    metadata = _check_loaded_metadata(header.pop(_METADATA_KEY, None), fname)
    entries = [_parse_entry(name, info, fname) for name, info in header.items()]
    _check_layout(entries, size - 8 - n, fname)
    return entries, metadata


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs):
    """json object_pairs_hook: JSON allows repeated keys and keeps the last;
    in a header that would silently drop a tensor, so refuse it."""
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise _DuplicateKey(k)
        seen[k] = v
    return seen


def _parse_json(raw, fname):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{fname}: header is not valid UTF-8 ({e})") from None
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as e:
        raise ValueError(f"{fname}: header has the duplicate name {e.args[0]!r}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{fname}: header is not valid JSON: {e}") from None
    except RecursionError:
        raise ValueError(f"{fname}: header is JSON nested too deeply to be a safetensors "
                         f"header") from None
    if not isinstance(header, dict):
        raise ValueError(f"{fname}: header must be a JSON object, got "
                         f"{type(header).__name__}")
    return header


def _check_loaded_metadata(metadata, fname):
    if metadata is None:  # absent, or null as the reference reader allows
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError(f"{fname}: {_METADATA_KEY!r} must be an object of string -> string, "
                         f"got {json.dumps(metadata)[:100]}")
    return metadata


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)  # JSON true is not a size


class _Entry(NamedTuple):
    """One tensor of the header; begin and end are offsets into the data section."""
    name: str
    dtype: object  # an ember dtype
    shape: tuple
    begin: int
    end: int


def _in_file_order(entries):
    # by end too: empty tensors may share their begin with the next tensor
    return sorted(entries, key=lambda e: (e.begin, e.end))


def _parse_entry(name, info, fname):
    """The _Entry of one header entry, checked on its own (the layout across
    entries is _check_layout's)."""
    where = f"{fname}: tensor {name!r}"
    if not isinstance(info, dict):
        raise ValueError(f"{where}: entry must be an object with dtype, shape and data_offsets, "
                         f"got {json.dumps(info)[:100]}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise ValueError(f"{where}: entry lacks {', '.join(missing)}")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(code, str) or code not in _DTYPE_OF_CODE:
        raise ValueError(f"{where}: unknown or unsupported dtype {code!r} (ember reads "
                         f"{', '.join(_DTYPE_OF_CODE)})")
    if not isinstance(shape, list) or not all(_is_int(d) and 0 <= d <= _MAX_DIM for d in shape):
        raise ValueError(f"{where}: shape must be a list of non-negative ints, got "
                         f"{json.dumps(shape)[:100]}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))
            and 0 <= offsets[0] <= offsets[1]):
        raise ValueError(f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, "
                         f"got {json.dumps(offsets)[:100]}")
    dtype = getattr(_C, _DTYPE_OF_CODE[code])
    numel = 1
    for d in shape:
        numel *= d
    if offsets[1] - offsets[0] != numel * dtype.itemsize:
        raise ValueError(f"{where}: data_offsets {offsets} span {offsets[1] - offsets[0]} bytes, "
                         f"but a {code} tensor of shape {shape} needs {numel * dtype.itemsize}")
    return _Entry(name, dtype, tuple(shape), offsets[0], offsets[1])


def _check_layout(entries, data_len, fname):
    """The tensors must tile the data section exactly: no gap, no overlap,
    nothing after the last one (a gap or tail could hide anything, and an
    overlap would alias two tensors)."""
    pos, prev = 0, None
    for e in _in_file_order(entries):
        if e.begin < pos:
            raise ValueError(f"{fname}: tensors {prev!r} and {e.name!r} overlap in the data "
                             f"section (bytes {e.begin}..{pos})")
        if e.begin > pos:
            raise ValueError(f"{fname}: {e.begin - pos} bytes of the data section "
                             f"(at {pos}..{e.begin}) belong to no tensor")
        pos, prev = e.end, e.name
    if pos > data_len:
        raise ValueError(f"{fname}: file is truncated: the header needs {pos} bytes of tensor "
                         f"data, the file has {data_len}")
    if pos < data_len:
        raise ValueError(f"{fname}: {data_len - pos} bytes of trailing garbage after the last "
                         f"tensor's data")


def _read_tensor(fh, entry, fname, meta=False):
    """A new tensor owning its memory, filled from fh's current position
    (meta: a meta tensor, nothing read; _check_layout checked the data's
    place in the file)."""
    try:
        t = empty(entry.shape, dtype=entry.dtype, device="meta" if meta else "cpu")  # (in a meta block too)
    except (ValueError, OverflowError, RuntimeError) as e:
        raise ValueError(f"{fname}: tensor {entry.name!r}: cannot make a tensor of shape "
                         f"{list(entry.shape)}: {e}") from None
    nbytes = entry.end - entry.begin
    if not nbytes or meta:
        return t
    buf = memoryview((ctypes.c_ubyte * nbytes).from_address(t._address("load()"))).cast("B")
    _readinto_exact(fh, buf, fname, f"tensor {entry.name!r}")
    if sys.byteorder != "little":
        buf[:] = _byteswap_to_little(bytes(buf), entry.dtype.itemsize)
    if entry.dtype == _C.bool and bytes(buf).translate(None, b"\x00\x01"):
        # a bool byte other than 0/1 is undefined behaviour for the C kernels
        raise ValueError(f"{fname}: tensor {entry.name!r} is BOOL but holds bytes other than "
                         f"0 and 1")
    return t
