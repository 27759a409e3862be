"""The Python readers of untrusted files, fuzzed: mutated safetensors files
(with ember's nested structure in their metadata) and PyTorch .pt archives
go through ember.load, which either returns what a valid file holds or
raises ValueError (or pickle.UnpicklingError, for a pickle that asks for a
global ember refuses, as torch.load(weights_only=True)) naming the file: never another exception (IndexError,
KeyError, struct.error, UnicodeDecodeError, RecursionError, MemoryError,
zipfile's), never a hang. The C readers have libFuzzer harnesses
(tests/fuzz); this is their hypothesis-based counterpart for Python's.

Every input hypothesis ever failed on is kept in tests/fuzz/regressions/
python and replayed by test_regressions_stay_fixed.
"""

import io
import os
import pathlib
import pickle
import zipfile
import zlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember
from conftest import torch
from ember import _torch_format

LATIN1_DEFAULTS = _torch_format._latin1.__defaults__

REGRESSIONS = pathlib.Path(__file__).resolve().parent.parent / "fuzz" / "regressions" / "python"
# ValueError for a malformed file; pickle.UnpicklingError (Refused) for a
# pickle naming a global ember does not resolve, as torch.load's weights_only
ALLOWED = (ValueError, pickle.UnpicklingError)


def _valid_files():
    """(name, bytes) of valid files of each kind ember reads."""
    files = []
    buf = io.BytesIO()
    ember.save({"model": {"layer": [ember.arange(6.0).reshape(2, 3), ember.ones(2, dtype=ember.int8)]},
                "step": 7, "name": "run", "pair": (ember.zeros(1), 2.5)}, buf)
    files.append(("nested.safetensors", buf.getvalue()))
    buf = io.BytesIO()
    ember.save({"w": ember.ones(3, 2, dtype=ember.float16), "b": ember.tensor([1, 2])}, buf,
               metadata={"epoch": "3"})
    files.append(("plain.safetensors", buf.getvalue()))
    buf = io.BytesIO()
    ember.save({"w": ember.arange(4.0), "opt": {"step": 3, "m": [ember.zeros(2)]}}, buf, format="pt")
    files.append(("ember.pt", buf.getvalue()))
    if torch is not None:
        buf = io.BytesIO()
        torch.save({"w": torch.arange(4.0).reshape(2, 2), "i": torch.tensor([1, 2], dtype=torch.int32),
                    "n": [torch.ones(1, dtype=torch.bfloat16)]}, buf)
        files.append(("torch.pt", buf.getvalue()))
    return files


VALID = _valid_files()


def _load(name, data, tmp):
    path = tmp / name
    path.write_bytes(data)
    try:
        ember.load(str(path))
    except Exception as e:
        if isinstance(e, ALLOWED) and name in str(e):
            return
        _keep_and_fail(name, data, e)
    finally:
        # no file may change the loader's own objects
        if _torch_format._latin1.__defaults__ != LATIN1_DEFAULTS:
            _torch_format._latin1.__defaults__ = LATIN1_DEFAULTS
            _keep_and_fail(name, data, AssertionError("the file changed _codecs.encode's stand-in"))


def _keep_and_fail(name, data, e):
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    keep = REGRESSIONS / f"{type(e).__name__}-{abs(hash(data)) % 10**10}-{name}"
    keep.write_bytes(data)
    raise AssertionError(f"ember.load raised {type(e).__name__} (not ValueError naming the file) on a "
                         f"mutated {name}; the input is kept as {keep}: {e}") from e


@st.composite
def mutated(draw):
    """A valid file with some of: bytes flipped, set to an extreme, cut
    out, inserted, the whole truncated or extended."""
    name, data = draw(st.sampled_from(VALID))
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "truncate", "zip-entry", "pickle-ops"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[at] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF, ord("9"), ord('"'), ord("{"), ord("[")]))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 16))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "truncate":
            del data[at:]
        elif kind == "zip-entry" and name.endswith(".pt"):
            data = bytearray(_rewrite_pickle(bytes(data), draw(st.integers(0, 2**16)), draw(st.binary(max_size=8))))
        elif kind == "pickle-ops" and name.endswith(".pt"):
            ops = b"".join(draw(st.lists(st.sampled_from(PICKLE_TOKENS), min_size=1, max_size=6)))
            data = bytearray(_rewrite_pickle(bytes(data), draw(st.integers(0, 2**16)), ops, insert=True))
    return name, bytes(data)


# Opcodes and short programs the restricted unpickler must refuse or apply
# safely wherever they land: BUILD, REDUCE, NEWOBJ and APPEND on whatever is
# on the stack, EXT, memo reads and writes, marks, and the globals it does
# resolve (whose objects must never come back out or be changed).
PICKLE_TOKENS = [
    b"b", b"R", b"\x81", b"a", b"e", b"s", b"u", b"(", b"t", b"\x85", b"\x86", b"0", b"1", b"2", b".",
    b"\x82\x01", b"\x83\x01\x00", b"h\x00", b"h\x05", b"q\x00", b"q\xff", b"\x94", b"j\x00\x00\x00\x00",
    b"}", b"]", b")", b"N", b"K\x08", b"J\x00\xf0\xff\xff", b"\x8c\x08itemsize", b"\x8c\x0c__defaults__",
    b"c_codecs\nencode\n", b"ctorch\nFloatStorage\n", b"ctorch._utils\n_rebuild_tensor_v2\n",
    b"ccollections\nOrderedDict\n", b"ctorch\nSize\n", b"cbuiltins\ngetattr\n", b"Q",
    b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f",
]


def _rewrite_pickle(archive, at, new, insert=False):
    """The archive with bytes of its data.pkl replaced, or `new` inserted
    (the ZIP stays valid, so the unpickler, not the ZIP reader, sees the
    damage)."""
    try:
        src = zipfile.ZipFile(io.BytesIO(archive))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                body = bytearray(src.read(info))
                if info.filename.endswith("data.pkl") and body:
                    i = at % len(body)
                    body[i:i + (0 if insert else len(new))] = new
                dst.writestr(info.filename, bytes(body))
        return out.getvalue()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, RuntimeError, zlib.error):
        return archive  # (already damaged past what this rewrite can read: keep it as it is)


@settings(max_examples=int(os.environ.get("EMBER_FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutated())
def test_mutated_files_load_or_raise_value_error(tmp_path, case):
    name, data = case
    _load(name, data, tmp_path)


def test_valid_files_load(tmp_path):
    for name, data in VALID:
        (tmp_path / name).write_bytes(data)
        assert ember.load(str(tmp_path / name)) is not None


def test_regressions_stay_fixed(tmp_path):
    """Inputs a fuzz run once failed on (kept under tests/fuzz/regressions/python)."""
    kept = sorted(REGRESSIONS.glob("*")) if REGRESSIONS.exists() else []
    for path in kept:
        name = path.name.split("-", 2)[-1]
        _load(name, path.read_bytes(), tmp_path)


@pytest.mark.parametrize("size", [2**40, 2**63 - 1])
def test_a_huge_header_length_is_refused_before_allocating(tmp_path, size):
    path = tmp_path / "huge.safetensors"
    path.write_bytes(size.to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="huge.safetensors"):
        ember.load(str(path))


@pytest.mark.parametrize("depth", [300, 100000])
def test_deep_nesting_is_refused(tmp_path, depth):
    """The structure's JSON nested past the bound (a list in a list ...):
    ValueError naming the file, not RecursionError."""
    import json
    structure = "[" * depth + "]" * depth
    header = json.dumps({"__metadata__": {"ember.structure": structure}}).encode()
    path = tmp_path / "deep.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(ValueError, match="deep.safetensors"):
        ember.load(str(path))
