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
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "truncate", "zip-entry"]))
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
    return name, bytes(data)


def _rewrite_pickle(archive, at, new):
    """The archive with bytes of its data.pkl replaced (the ZIP stays
    valid, so the unpickler, not the ZIP reader, sees the damage)."""
    try:
        src = zipfile.ZipFile(io.BytesIO(archive))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                body = bytearray(src.read(info))
                if info.filename.endswith("data.pkl") and body:
                    i = at % len(body)
                    body[i:i + len(new)] = new
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
