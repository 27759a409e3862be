"""The structure of a checkpoint (ember.save of nested containers) as
JSON, with its tensors stored beside it by index.

    {"model": sd, "optimizer": opt.state_dict(), "epoch": 3, "config": {...}}

becomes safetensors entries "0", "1", ... and, in the file's metadata under
"ember.structure", JSON in which every container is tagged so that nothing
is guessed on the way back:

    {"$dict": [[key, value], ...], "ordered": bool}   dict / OrderedDict (any keys)
    {"$tuple": [...]}, [...]                          tuple, list
    {"$tensor": i, "param": bool, "grad": bool}       tensor i (a Parameter; requires_grad)
    {"$float": "inf" | "-inf" | "nan"}                non-finite floats
    {"$bytes": "<base64>"}, {"$dtype": "float32"}
    numbers, strings, true/false, null               themselves

The same tensor object saved twice is stored once and loads as one tensor.
Decoding checks every tag, index and type, so a hand-made file gets an
error naming what is wrong, never an object of an unexpected kind."""

import base64
import collections
import json
import math

from . import _C
from ._tensor import Tensor, _dtype_name

KEY = "ember.structure"
_MAX_DEPTH = 200
_DTYPES = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}


def is_flat(obj):
    """A tensor, or a str -> tensor mapping: what plain safetensors holds."""
    if isinstance(obj, Tensor):
        return True
    return isinstance(obj, collections.abc.Mapping) and all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())


def encode(obj):
    """(JSON text, [tensors by index])."""
    from .nn.parameter import Parameter
    tensors, index = [], {}

    def enc(o, depth):
        if depth > _MAX_DEPTH:
            raise ValueError(f"save(): the object is nested more than {_MAX_DEPTH} levels deep")
        if isinstance(o, Tensor):
            if id(o) not in index:
                index[id(o)] = len(tensors)
                tensors.append(o)
            return {"$tensor": index[id(o)], "param": isinstance(o, Parameter), "grad": bool(o.requires_grad)}
        if o is None or isinstance(o, (bool, str)):
            return o
        if isinstance(o, int):
            return int(o)
        if isinstance(o, float):
            return o if math.isfinite(o) else {"$float": "nan" if o != o else ("inf" if o > 0 else "-inf")}
        if isinstance(o, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(bytes(o)).decode("ascii")}
        if isinstance(o, _C.dtype):
            return {"$dtype": _dtype_name(o)}
        if isinstance(o, list):
            return [enc(v, depth + 1) for v in o]
        if isinstance(o, tuple):
            return {"$tuple": [enc(v, depth + 1) for v in o]}
        if isinstance(o, dict):
            return {"$dict": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in o.items()],
                    "ordered": isinstance(o, collections.OrderedDict)}
        raise TypeError(f"save(): cannot store {type(o).__name__}; a checkpoint holds dicts, lists, tuples, "
                        f"numbers, strings, bytes, None, dtypes and tensors")

    return json.dumps(enc(obj, 0), allow_nan=False, separators=(",", ":")), tensors


def decode(text, tensors, fname):
    """The object `text` describes, its tensors taken from `tensors` (by
    index)."""
    from .nn.parameter import Parameter
    used = {}

    def bad(why):
        return ValueError(f"{fname}: {KEY}: {why}")

    def dec(o, depth):
        if depth > _MAX_DEPTH:
            raise bad(f"nested more than {_MAX_DEPTH} levels deep")
        if o is None or isinstance(o, (bool, str, int, float)):
            return o
        if isinstance(o, list):
            return [dec(v, depth + 1) for v in o]
        if not isinstance(o, dict) or len(o) == 0:
            raise bad(f"unexpected {json.dumps(o)[:80]}")
        tag = next(iter(o))
        val = o[tag]
        if tag == "$tensor":
            if not isinstance(val, int) or isinstance(val, bool) or not 0 <= val < len(tensors):
                raise bad(f"tensor index {val!r} out of range (the file has {len(tensors)})")
            if val not in used:
                t = tensors[val]
                if o.get("grad") and not t.is_floating_point():
                    raise bad(f"{_dtype_name(t.dtype)} tensor {val} cannot require grad (only floating-point "
                              f"ones can)")
                if o.get("param"):
                    t = Parameter(t, bool(o.get("grad", True)))
                elif o.get("grad") and t.is_floating_point():
                    t.requires_grad_(True)
                used[val] = t
            return used[val]
        if tag == "$tuple" and isinstance(val, list):
            return tuple(dec(v, depth + 1) for v in val)
        if tag == "$dict" and isinstance(val, list):
            out = collections.OrderedDict() if o.get("ordered") else {}
            for pair in val:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise bad(f"a dict entry must be [key, value], got {json.dumps(pair)[:80]}")
                k = dec(pair[0], depth + 1)
                try:
                    out[k] = dec(pair[1], depth + 1)
                except TypeError:
                    raise bad(f"unhashable dict key {k!r}") from None
            return out
        if tag == "$float" and val in ("inf", "-inf", "nan"):
            return float(val)
        if tag == "$bytes" and isinstance(val, str):
            try:
                return base64.b64decode(val.encode("ascii"), validate=True)
            except ValueError:
                raise bad("malformed base64 bytes") from None
        if tag == "$dtype" and val in _DTYPES:
            return getattr(_C, val)
        raise bad(f"unknown entry {json.dumps(o)[:80]}")

    try:
        tree = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise bad(f"not valid JSON ({e})") from None
    return dec(tree, 0)
