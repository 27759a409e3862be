"""Checkpoints made by an attacker, not by torch.save: pickles that use
BUILD, REDUCE and the memo on the objects the loader hands out, storages
with geometry that expands, ZIP archives whose members lie about their
sizes or overlap, and structured safetensors that point at tensors they
do not have. Each is refused with an error naming the file, or loads as
PyTorch would load it (a view, not a copy), and never reads memory that is
not the file's or changes ember's own state (issue 38, items 1-5)."""

import json
import pickle
import struct
import zipfile
import zlib

import pytest

import ember
from conftest import requires_torch, torch
from ember import _torch_format

P = pickle  # opcode constants


def s(text):
    """SHORT_BINUNICODE text."""
    raw = text.encode()
    return P.SHORT_BINUNICODE + bytes([len(raw)]) + raw


def i(n):
    return P.BININT + struct.pack("<i", n)


def glob(module, name):
    return P.GLOBAL + f"{module}\n{name}\n".encode()


def storage_pid(key, numel, storage="FloatStorage", build=b""):
    """The persistent id ('storage', torch.<storage>, key, 'cpu', numel),
    with `build` (opcodes leaving the storage type on the stack) spliced
    in after the type."""
    return (P.MARK + s("storage") + glob("torch", storage) + build + s(key) + s("cpu") + i(numel) + P.TUPLE
            + P.BINPERSID)


def rebuild(pid, size, stride, offset=0):
    tup = lambda xs: P.MARK + b"".join(i(x) for x in xs) + P.TUPLE  # noqa: E731
    return (glob("torch._utils", "_rebuild_tensor_v2") + P.MARK + pid + i(offset) + tup(size) + tup(stride)
            + P.NEWFALSE + glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.TUPLE + P.REDUCE)


def dict_of(**items):
    return P.EMPTY_DICT + P.MARK + b"".join(s(k) + v for k, v in items.items()) + P.SETITEMS


def archive(tmp_path, pkl, storages=(), name="evil.pt", compress=zipfile.ZIP_STORED):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compress) as z:
        z.writestr("archive/data.pkl", P.PROTO + b"\x02" + pkl + P.STOP)
        for key, data in storages:
            z.writestr(f"archive/data/{key}", data)
    return path


FLOATS = struct.pack("<1024f", *range(1024))


# ---------------------------------------------------------------- items 1 and 2: BUILD

@pytest.mark.parametrize("itemsize", [8, -4096, 1 << 24])
def test_build_cannot_forge_a_storages_itemsize(tmp_path, itemsize):
    """BUILD {'itemsize': n} on the storage marker once made the rebuild
    read past the storage (1 << 24 crashed)."""
    forge = P.EMPTY_DICT + s("itemsize") + i(itemsize) + P.SETITEM + P.BUILD
    path = archive(tmp_path, dict_of(w=rebuild(storage_pid("0", 1024, build=forge), (1024,), (1,))),
                   [("0", FLOATS)])
    with pytest.raises(pickle.UnpicklingError, match=r"evil\.pt: .*BUILD on a _StorageType"):
        ember.load(path)


def test_build_cannot_change_embers_own_functions(tmp_path):
    """BUILD (None, {'__defaults__': ...}) on _codecs.encode once set the
    defaults of ember's own function for the rest of the process."""
    before = _torch_format._latin1.__defaults__
    slots = P.NONE + P.EMPTY_DICT + s("__defaults__") + s("utf-16") + P.TUPLE1 + P.SETITEM + P.TUPLE2
    path = archive(tmp_path, glob("_codecs", "encode") + slots + P.BUILD)
    with pytest.raises(pickle.UnpicklingError, match="BUILD on a function"):
        ember.load(path)
    assert _torch_format._latin1.__defaults__ == before


@pytest.mark.parametrize("global_", [("_codecs", "encode"), ("collections", "OrderedDict"),
                                     ("torch._utils", "_rebuild_tensor_v2"), ("torch", "FloatStorage"),
                                     ("torch", "Tensor")])
def test_load_returns_only_data_never_the_loaders_own_objects(tmp_path, global_):
    path = archive(tmp_path, dict_of(f=glob(*global_)))
    with pytest.raises(pickle.UnpicklingError, match=r"evil\.pt: the checkpoint's object holds a"):
        ember.load(path)


@pytest.mark.parametrize("pkl,match", [
    (s("os.system") + s("ls") + P.TUPLE1 + P.REDUCE, "REDUCE of a str"),
    (P.EMPTY_LIST + P.EMPTY_TUPLE + P.REDUCE, "REDUCE of a list"),
    (glob("_codecs", "encode") + s("x") + P.APPEND, "APPEND to a function"),
    (glob("_codecs", "encode") + s("k") + s("v") + P.SETITEM, "SETITEM on a function"),
    (P.EMPTY_LIST + P.EMPTY_DICT + P.BUILD, "BUILD on a list"),
    (glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.EMPTY_LIST + P.BUILD,
     "BUILD on an OrderedDict with a state of list"),
    (b"\x82\x01", "opcode EXT1"),
    (b"cos\nsystem\n", "refusing to load os.system"),
    (b"I1\n", "opcode INT"),
    (b"(S'x'\nio\n", "opcode STRING"),
    (s("a") + s("b") + b"\x93", "refusing to load a.b"),
])
def test_pickle_tricks_are_refused_by_name(tmp_path, pkl, match):
    with pytest.raises(pickle.UnpicklingError, match=match):
        ember.load(archive(tmp_path, pkl))


@pytest.mark.parametrize("pkl,match", [
    (P.BINGET + b"\x07", "memo index 7 read before it was written"),
    (P.APPEND, "pops an empty stack"),
    (P.TUPLE, "needs a mark"),
    (P.EMPTY_DICT + P.EMPTY_LIST + P.EMPTY_LIST + P.SETITEM, "a dict key that cannot be one"),
    (P.BINUNICODE + b"\xff\xff\xff\x7f", "truncated"),
    (P.LONG4 + b"\xff\xff\xff\xff", "truncated"),
    (b"\xff", "unknown pickle opcode"),
    (P.EMPTY_TUPLE + P.TUPLE1 * 200, "tuples nested more than"),
])
def test_malformed_pickles_are_value_errors(tmp_path, pkl, match):
    with pytest.raises(ValueError, match=r"evil\.pt: a malformed data\.pkl .*" + match):
        ember.load(archive(tmp_path, pkl))


def test_memo_self_reference_and_metadata_build_load(tmp_path):
    """What legitimate pickles do with the memo and BUILD still works: a
    list holding itself, and a state_dict's _metadata."""
    pkl = (P.EMPTY_LIST + P.BINPUT + b"\x00" + P.BINGET + b"\x00" + P.APPEND
           + glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE
           + P.EMPTY_DICT + s("_metadata") + P.EMPTY_DICT + P.SETITEM + P.BUILD + P.TUPLE2)
    lst, od = ember.load(archive(tmp_path, pkl))
    assert lst[0] is lst and od._metadata == {}


def test_a_parameter_of_integers_that_requires_grad_is_a_value_error(tmp_path):
    t = rebuild(storage_pid("0", 1024, "LongStorage"), (4,), (1,))
    pkl = dict_of(p=glob("torch._utils", "_rebuild_parameter") + t + P.NEWTRUE + P.EMPTY_DICT + P.TUPLE3 + P.REDUCE)
    with pytest.raises(pickle.UnpicklingError, match="integer parameter that requires grad"):
        ember.load(archive(tmp_path, pkl, [("0", b"\x00" * 8192)]))


# ---------------------------------------------------------------- item 3: expansion, lies, overlaps

def test_a_stride_zero_storage_loads_as_a_view_not_a_copy(tmp_path):
    """A one-element storage seen as 16384 x 16384 with strides (0, 0) once
    loaded as a 1 GiB copy; PyTorch returns the view."""
    path = archive(tmp_path, dict_of(w=rebuild(storage_pid("0", 1), (16384, 16384), (0, 0))),
                   [("0", struct.pack("<f", 2.5))])
    w = ember.load(path)["w"]
    assert w.shape == (16384, 16384) and w.stride() == (0, 0)
    assert w[16383, 16383].item() == 2.5 and w[0, 0].item() == 2.5


@requires_torch
def test_tensors_of_one_storage_share_memory_as_in_pytorch(tmp_path):
    base = torch.arange(12.0)
    torch.save({"a": base, "b": base[2:].view(2, 5), "c": base[::3]}, tmp_path / "v.pt")
    ref, got = torch.load(tmp_path / "v.pt"), ember.load(tmp_path / "v.pt")
    for k in "abc":
        assert got[k].tolist() == ref[k].tolist() and got[k].stride() == ref[k].stride()
    got["a"].add_(100.0)
    ref["a"].add_(100.0)
    assert got["b"].tolist() == ref["b"].tolist() and got["c"].tolist() == ref["c"].tolist()


def _patch_sizes(raw, name, file_size=None, compress_size=None, crc=None):
    """The archive with member `name`'s declared sizes (local header and
    central directory alike) replaced."""
    raw = bytearray(raw)
    enc = name.encode()
    for sig, at_crc in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
        pos = 0
        while True:
            pos = raw.find(sig, pos)
            if pos < 0:
                break
            n_at = 26 if sig == b"PK\x03\x04" else 28
            head = 30 if sig == b"PK\x03\x04" else 46
            n = struct.unpack_from("<H", raw, pos + n_at)[0]
            if raw[pos + head:pos + head + n] == enc:
                if crc is not None:
                    struct.pack_into("<I", raw, pos + at_crc, crc)
                if compress_size is not None:
                    struct.pack_into("<I", raw, pos + at_crc + 4, compress_size)
                if file_size is not None:
                    struct.pack_into("<I", raw, pos + at_crc + 8, file_size)
            pos += 4
    return bytes(raw)


def test_a_stored_member_declaring_more_than_the_file_holds_is_a_value_error(tmp_path):
    path = archive(tmp_path, dict_of(w=rebuild(storage_pid("0", 1 << 20), (4,), (1,))), [("0", FLOATS)])
    path.write_bytes(_patch_sizes(path.read_bytes(), "archive/data/0", 4 << 20, 4 << 20))
    with pytest.raises(ValueError, match=r"evil\.pt: member 'archive/data/0' declares 4194304 bytes, more than"):
        ember.load(path)


def test_a_deflated_member_declaring_more_than_it_inflates_to_is_a_value_error(tmp_path):
    """Decompression is bounded by the declared size: a member that
    declares 4 MiB but inflates to 4 KiB is refused, not padded."""
    path = archive(tmp_path, dict_of(w=rebuild(storage_pid("0", 1 << 20), (4,), (1,))), [("0", FLOATS)],
                   compress=zipfile.ZIP_DEFLATED)
    path.write_bytes(_patch_sizes(path.read_bytes(), "archive/data/0", file_size=4 << 20))
    with pytest.raises(ValueError, match=r"evil\.pt: member 'archive/data/0' declares 4194304 bytes but inflates"):
        ember.load(path)


def test_deflated_checkpoints_load(tmp_path):
    path = archive(tmp_path, dict_of(w=rebuild(storage_pid("0", 1024), (2, 3), (3, 1), 5)), [("0", FLOATS)],
                   compress=zipfile.ZIP_DEFLATED)
    assert ember.load(path)["w"].tolist() == [[5, 6, 7], [8, 9, 10]]


def test_a_damaged_storage_fails_its_crc(tmp_path):
    path = archive(tmp_path, dict_of(w=rebuild(storage_pid("0", 1024), (4,), (1,))), [("0", FLOATS)])
    raw = bytearray(path.read_bytes())
    raw[raw.find(FLOATS) + 100] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="fails its CRC check"):
        ember.load(path)


def _zip_by_hand(entries):
    """A ZIP archive from [(name, data, header_offset or None)]: entries with
    an offset get only a central directory record pointing there (into
    another member's bytes), the others a local header and data too."""
    body, central = bytearray(), bytearray()
    for name, data, offset in entries:
        enc, crc = name.encode(), zlib.crc32(data)
        if offset is None:
            offset = len(body)
            body += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data),
                                len(enc), 0) + enc + data
        central += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(data), len(data),
                               len(enc), 0, 0, 0, 0, 0, offset) + enc
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(body), 0)
    return bytes(body + central + end)


def test_overlapping_members_are_refused(tmp_path):
    """A member whose local header sits inside another member's data: the
    construction of overlapping zip bombs."""
    inner_name = "archive/data/1"
    inner = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(FLOATS), len(FLOATS),
                        len(FLOATS), len(inner_name), 0) + inner_name.encode() + FLOATS
    pkl = P.PROTO + b"\x02" + dict_of(w=rebuild(storage_pid("1", 1024), (4,), (1,))) + P.STOP
    first = 30 + len("archive/data.pkl") + len(pkl)
    outer_start = first + 30 + len("archive/data/0")
    raw = _zip_by_hand([("archive/data.pkl", pkl, None), ("archive/data/0", inner, None),
                        (inner_name, FLOATS, outer_start)])
    (tmp_path / "overlap.pt").write_bytes(raw)
    with pytest.raises(ValueError, match=r"overlap\.pt: members 'archive/data/0' and 'archive/data/1' overlap"):
        ember.load(tmp_path / "overlap.pt")


def test_two_members_of_one_name_are_refused(tmp_path):
    pkl = P.PROTO + b"\x02" + dict_of(w=rebuild(storage_pid("0", 1024), (4,), (1,))) + P.STOP
    raw = _zip_by_hand([("archive/data.pkl", pkl, None), ("archive/data/0", FLOATS, None),
                        ("archive/data/0", FLOATS[::-1], None)])
    (tmp_path / "dup.pt").write_bytes(raw)
    with pytest.raises(ValueError, match=r"dup\.pt: a ZIP archive with two members of one name"):
        ember.load(tmp_path / "dup.pt")


def test_bool_storages_hold_only_zero_and_one(tmp_path):
    path = archive(tmp_path, dict_of(m=rebuild(storage_pid("0", 4, "BoolStorage"), (4,), (1,))),
                   [("0", b"\x00\x01\x02\x01")])
    with pytest.raises(ValueError, match="BoolStorage but holds bytes other than 0 and 1"):
        ember.load(path)


# ---------------------------------------------------------------- item 5: structured safetensors

def _structured(tmp_path, structure, tensors):
    header = {"__metadata__": {"ember.structure": json.dumps(structure)}}
    data, off = b"", 0
    for name, raw in tensors:
        header[name] = {"dtype": "F32", "shape": [len(raw) // 4], "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    text = json.dumps(header).encode()
    path = tmp_path / "s.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.mark.parametrize("structure", [
    {"$tensor": 0},
    {"$dict": [["w", {"$tensor": 0}]], "ordered": False},
    {"$tensor": 0, "param": True},
    {"$tensor": 0, "grad": True},
])
def test_structured_safetensors_with_a_dangling_tensor_index_is_a_value_error(tmp_path, structure):
    """Metadata naming tensor 0 in a file whose tensor is named "a" once
    loaded as None or an empty Parameter."""
    path = _structured(tmp_path, structure, [("a", struct.pack("<2f", 1, 2))])
    with pytest.raises(ValueError, match=r"s\.safetensors: .*tensors are named 0, 1, \.\.\."):
        ember.load(path)


def test_structured_safetensors_integer_parameter_requiring_grad_is_a_value_error(tmp_path):
    header = {"__metadata__": {"ember.structure": json.dumps({"$tensor": 0, "param": True, "grad": True})},
              "0": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}
    text = json.dumps(header).encode()
    path = tmp_path / "s.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\x00" * 8)
    with pytest.raises(ValueError, match=r"s\.safetensors: .*int64 tensor 0 cannot require grad"):
        ember.load(path)
