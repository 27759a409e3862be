"""ember.save / ember.load (safetensors): round trips of every dtype and
shape, what is saved and returned, paths and file objects, interoperability
with an independent reader and writer (struct + json + NumPy, written here
from the format's definition, sharing no code with ember), and every kind of
malformed file, each of which must raise ValueError naming the file and the
problem.

Values are compared bit for bit (as unsigned integers of the element's
width), so NaN payloads, signalling NaNs, -0.0, infinities and subnormals
must survive unchanged; there is no tolerance because nothing is computed.
"""

import collections
import collections.abc
import ctypes
import gc
import io
import json
import pathlib
import random
import struct

import numpy as np
import pytest

import ember
from ember import serialization
from ember._tensor import _rebuild_tensor

# ---- dtypes and bit patterns ----

CODES = {"F32": "float32", "F64": "float64", "F16": "float16", "BF16": "bfloat16",
         "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
         "BOOL": "bool"}
# Little-endian NumPy dtypes of the elements' bits (NumPy has no bfloat16).
LE = {"F32": "<u4", "F64": "<u8", "F16": "<u2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
      "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "u1"}
# Special values as bits: zeros of both signs, ones, infinities, quiet NaN,
# NaNs with payloads, a signalling NaN, the smallest subnormal, the largest finite.
SPECIAL = {
    "F32": [0x00000000, 0x80000000, 0x3F800000, 0x7F800000, 0xFF800000, 0x7FC00000,
            0x7FC00001, 0xFFA00123, 0x7F800001, 0x00000001, 0x7F7FFFFF],
    "F64": [0, 0x8000000000000000, 0x3FF0000000000000, 0x7FF0000000000000,
            0xFFF0000000000000, 0x7FF8000000000000, 0x7FF8000000000001, 0xFFF4000000000123,
            0x7FF0000000000001, 1, 0x7FEFFFFFFFFFFFFF],
    "F16": [0x0000, 0x8000, 0x3C00, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFD23, 0x7C01, 0x0001,
            0x7BFF],
    "BF16": [0x0000, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x7FC1, 0xFFA3, 0x7F81, 0x0001,
             0x7F7F],
    "I64": [0, 1, -1, 2**63 - 1, -2**63, 123456789012345],
    "I32": [0, 1, -1, 2**31 - 1, -2**31, 1234567],
    "I16": [0, 1, -1, 32767, -32768, 1234],
    "I8": [0, 1, -1, 127, -128, 42],
    "U8": [0, 1, 255, 128, 42],
    "BOOL": [0, 1, 1, 0, 0],
}
SHAPES = [(), (0,), (1,), (7,), (2, 3), (3, 0, 2), (2, 3, 4), (1, 1, 1, 5)]


def bits_array(code, shape, start=0):
    """A NumPy array of `code`'s little-endian element bits in `shape`,
    cycling through the special values from `start`."""
    values = SPECIAL[code]
    numel = int(np.prod(shape, dtype=np.int64))
    picked = [values[(start + k) % len(values)] for k in range(numel)]
    return np.array(picked, dtype=np.uint64).astype(LE[code]).reshape(shape) \
        if LE[code].startswith("<u") else np.array(picked, dtype=LE[code]).reshape(shape)


def tensor_of_bits(code, arr):
    """An ember tensor holding exactly these element bits, made through the
    pickle path (Tensor.__reduce__'s inverse), not through serialization."""
    return _rebuild_tensor(np.ascontiguousarray(arr).tobytes(), CODES[code], arr.shape)


def bits_of(t):
    """An ember tensor's element bits as a little-endian NumPy array."""
    c = t.contiguous()
    raw = ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()) if c.numel() else b""
    code = {v: k for k, v in CODES.items()}[str(t.dtype).split(".")[-1]]
    host = np.dtype(LE[code]).newbyteorder("=")
    return np.frombuffer(raw, dtype=host).astype(LE[code]).reshape(tuple(t.shape))


def assert_same_bits(t, code, arr):
    assert isinstance(t, ember.Tensor), type(t)
    assert str(t.dtype) == f"ember.{CODES[code]}"
    assert tuple(t.shape) == arr.shape
    np.testing.assert_array_equal(bits_of(t), arr)


# ---- an independent reader and writer, from the format's definition ----

def ref_read(data):
    """(name -> (code, array of bits), metadata) from safetensors bytes."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(body[begin:end], dtype=LE[info["dtype"]]).reshape(info["shape"])
        out[name] = (info["dtype"], arr)
    return out, metadata


def ref_write(tensors, metadata=None, order=None, pad=0):
    """safetensors bytes for name -> (code, array of bits); `order` lists the
    names in the order their data is laid out (default: header order), and
    `pad` spaces end the header."""
    order = list(tensors) if order is None else order
    offsets, pos = {}, 0
    for name in order:
        nbytes = tensors[name][1].nbytes
        offsets[name] = [pos, pos + nbytes]
        pos += nbytes
    header = {} if metadata is None else {"__metadata__": metadata}
    for name, (code, arr) in tensors.items():
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": offsets[name]}
    raw = json.dumps(header).encode("utf-8") + b" " * pad
    body = b"".join(np.ascontiguousarray(tensors[name][1]).astype(LE[tensors[name][0]])
                    .tobytes() for name in order)
    return struct.pack("<Q", len(raw)) + raw + body


def save_bytes(obj, **kw):
    f = io.BytesIO()
    ember.save(obj, f, **kw)
    return f.getvalue()


def load_bytes(data):
    return ember.load(io.BytesIO(data))


# ---- round trips ----

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("code", list(CODES))
def test_round_trip_every_dtype_and_shape(tmp_path, code, shape):
    arr = bits_array(code, shape)
    path = tmp_path / "t.safetensors"
    ember.save({"w": tensor_of_bits(code, arr)}, path)
    got = ember.load(path)
    assert list(got) == ["w"]
    assert_same_bits(got["w"], code, arr)


@pytest.mark.parametrize("code", list(CODES))
def test_views_are_written_as_their_own_elements(code):
    base = tensor_of_bits(code, bits_array(code, (4, 6)))
    views = {"t": base.t(), "step": base[:, ::2], "row_step": base[::3, 1:5],
             "expanded": base[1].expand(3, 6), "scalar_view": base[2, 3],
             "tail_rows": base[2:]}
    for name, v in views.items():  # non-contiguous, or contiguous from mid-storage
        assert not v.is_contiguous() or v.data_ptr() != base.data_ptr(), name
    got = load_bytes(save_bytes(views))
    for name, v in views.items():
        assert_same_bits(got[name], code, bits_of(v))


def test_single_tensor_round_trips_as_a_tensor_named_empty_string():
    t = ember.arange(6.0).reshape(2, 3)
    data = save_bytes(t)
    got = load_bytes(data)
    assert isinstance(got, ember.Tensor)
    assert_same_bits(got, "F32", bits_of(t))
    assert list(ref_read(data)[0]) == [serialization.SINGLE_TENSOR_NAME] == [""]


def test_zero_d_single_tensor_round_trips():
    got = load_bytes(save_bytes(ember.tensor(-0.0)))
    assert got.shape == () and bits_of(got).item() == 0x80000000


def test_state_dict_keeps_dotted_names_and_order():
    names = ["layers.1.bias", "layers.0.weight", "emb.weight", "zeta", "alpha.β"]
    sd = {n: ember.full((k + 1,), float(k)) for k, n in enumerate(names)}
    got = load_bytes(save_bytes(sd))
    assert type(got) is dict and list(got) == names
    for n in names:
        assert_same_bits(got[n], "F32", bits_of(sd[n]))


def test_ordered_dict_and_other_mappings_save():
    od = collections.OrderedDict([("b", ember.ones(2)), ("a", ember.zeros(3, dtype=ember.int8))])
    got = load_bytes(save_bytes(od))
    assert list(got) == ["b", "a"]
    assert got["a"].dtype == ember.int8 and got["a"].tolist() == [0, 0, 0]

    class Frozen(collections.abc.Mapping):
        def __init__(self, d):
            self.d = d

        def __getitem__(self, k):
            return self.d[k]

        def __iter__(self):
            return iter(self.d)

        def __len__(self):
            return len(self.d)

    assert list(load_bytes(save_bytes(Frozen(od)))) == ["b", "a"]


def test_empty_dict_round_trips():
    data = save_bytes({})
    assert load_bytes(data) == {}
    assert ref_read(data) == ({}, None)


def test_dict_may_have_empty_string_among_other_names_when_read():
    # written by someone else: "" only means "a single tensor" when alone
    data = ref_write({"": ("F32", bits_array("F32", (2,))), "x": ("I8", bits_array("I8", (1,)))})
    got = load_bytes(data)
    assert list(got) == ["", "x"]


def test_metadata_round_trips_and_is_visible_to_other_readers():
    meta = {"format": "pt", "epoch": "3", "note": "ünïcode ✓"}
    data = save_bytes({"x": ember.ones(2)}, metadata=meta)
    assert serialization.load_metadata(io.BytesIO(data)) == meta
    assert ref_read(data)[1] == meta
    assert list(load_bytes(data)) == ["x"]  # metadata is not a tensor
    assert serialization.load_metadata(io.BytesIO(save_bytes({"x": ember.ones(2)}))) == {}


def test_null_metadata_reads_as_no_metadata():
    data = header_file({"__metadata__": None, "x": entry("U8", (2,), (0, 2))}, b"\x07\x08")
    assert serialization.load_metadata(io.BytesIO(data)) == {}
    assert load_bytes(data)["x"].tolist() == [7, 8]


@pytest.mark.parametrize("meta", [{"epoch": 3}, {1: "a"}, ["a"], "a=b"])
def test_metadata_must_be_str_to_str(meta):
    with pytest.raises(TypeError, match="metadata must be a dict of str -> str"):
        save_bytes({"x": ember.ones(1)}, metadata=meta)


def test_header_is_padded_to_eight_bytes_with_spaces():
    for k in range(1, 12):
        data = save_bytes({"n" * k: ember.ones(k, dtype=ember.uint8)})
        (n,) = struct.unpack("<Q", data[:8])
        assert n % 8 == 0
        assert data[8:8 + n].decode().rstrip(" ").endswith("}")


def test_loaded_tensors_own_their_memory():
    src = io.BytesIO(save_bytes({"a": ember.arange(1000.0), "b": ember.arange(1000.0) * 2}))
    got = ember.load(src)
    del src
    gc.collect()
    junk = [bytearray(b"\xff" * 8000) for _ in range(100)]  # reuse any freed memory
    assert got["a"].tolist() == [float(k) for k in range(1000)]
    got["a"].fill_(5.0)  # the two tensors do not alias
    assert got["b"].tolist() == [2.0 * k for k in range(1000)]
    del junk


def test_tensors_requiring_grad_save_their_values_and_load_as_plain_tensors():
    # a state_dict of parameters: the file holds values only, as in safetensors
    w = ember.arange(6.0).reshape(2, 3).requires_grad_()
    got = load_bytes(save_bytes({"w": w, "w_t": w.t()}))
    assert not got["w"].requires_grad and got["w"].grad_fn is None
    assert_same_bits(got["w"], "F32", bits_of(w.detach()))
    assert_same_bits(got["w_t"], "F32", bits_of(w.detach().t()))


def test_model_checkpoint_restores_a_fresh_model_bit_exactly(tmp_path):
    # parameters and buffers (BatchNorm's running stats and int64 step count)
    # through a file into a differently initialised model of the same shape
    def model():
        return ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.BatchNorm1d(8),
                                   ember.nn.ReLU(), ember.nn.Linear(8, 3))

    ember.manual_seed(0)
    trained = model()
    x = ember.randn(16, 4)
    trained(x)  # a training-mode pass updates the running statistics
    trained.eval()
    path = tmp_path / "model.safetensors"
    ember.save(trained.state_dict(), path, metadata={"epoch": "1"})

    restored = model()
    restored.load_state_dict(ember.load(path))
    restored.eval()
    saved = trained.state_dict()
    assert list(restored.state_dict()) == list(saved)
    assert "1.num_batches_tracked" in saved
    for name, t in restored.state_dict().items():
        assert t.dtype == saved[name].dtype
        np.testing.assert_array_equal(bits_of(t), bits_of(saved[name]), err_msg=name)
    np.testing.assert_array_equal(bits_of(restored(x).detach()), bits_of(trained(x).detach()))


def test_optimizer_state_saves_as_a_checkpoint():
    # not a flat tensor dict: its structure goes into the metadata (test_checkpoints.py)
    w = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    (w * w).sum().backward()
    opt.step()
    got = load_bytes(save_bytes(opt.state_dict()))
    assert got["param_groups"][0]["momentum"] == 0.9
    assert got["state"][0]["momentum_buffer"].tolist() == [2.0, 2.0]


def test_tied_tensors_load_as_separate_tensors():
    w = ember.arange(4.0)
    got = load_bytes(save_bytes({"enc": w, "dec": w}))
    got["enc"].fill_(0.0)
    assert got["dec"].tolist() == [0.0, 1.0, 2.0, 3.0]


# ---- paths and file objects ----

def test_str_and_pathlib_paths(tmp_path):
    t = {"x": ember.arange(3)}
    ember.save(t, str(tmp_path / "a.st"))
    ember.save(t, tmp_path / "b.st")
    assert (tmp_path / "a.st").read_bytes() == (tmp_path / "b.st").read_bytes()
    assert ember.load(str(tmp_path / "b.st"))["x"].tolist() == [0, 1, 2]
    assert ember.load(pathlib.Path(tmp_path / "a.st"))["x"].tolist() == [0, 1, 2]


def test_open_binary_files_read_from_their_position(tmp_path):
    path = tmp_path / "f.st"
    with open(path, "wb") as f:
        f.write(b"PREFIX")
        ember.save({"x": ember.ones(2)}, f)
        assert not f.closed
    with open(path, "rb") as f:
        f.seek(6)
        assert ember.load(f)["x"].tolist() == [1.0, 1.0]
        assert not f.closed and f.read() == b""


def test_text_mode_files_are_refused(tmp_path):
    with open(tmp_path / "t.txt", "w") as f:
        with pytest.raises(TypeError, match="binary mode"):
            ember.save({"x": ember.ones(1)}, f)
    with open(tmp_path / "t.txt", "r") as f:
        with pytest.raises(TypeError, match="binary mode"):
            ember.load(f)
    with pytest.raises(TypeError, match="path"):
        ember.load(42)


class Stream:
    """A read-only, non-seekable binary stream (a pipe, a socket)."""

    def __init__(self, data, chunk=7):
        self.data, self.pos, self.chunk = data, 0, chunk

    def seekable(self):
        return False

    def read(self, n=-1):
        n = len(self.data) - self.pos if n is None or n < 0 else min(n, self.chunk)
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out


def test_non_seekable_streams_load():
    data = save_bytes({"x": ember.arange(10), "y": ember.ones(3, dtype=ember.float16)})
    got = ember.load(Stream(data))
    assert got["x"].tolist() == list(range(10))
    with pytest.raises(ValueError, match="trailing garbage"):
        ember.load(Stream(data + b"x"))


def test_failed_save_leaves_existing_file_untouched(tmp_path):
    path = tmp_path / "keep.st"
    ember.save({"x": ember.ones(2)}, path)
    before = path.read_bytes()
    for bad in ({"x": object()}, {3: lambda: 0}, [np.ones(2)]):
        with pytest.raises(TypeError):
            ember.save(bad, path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("obj, exc, match", [
    ([object()], TypeError, "cannot store object"),
    ({1, 2}, TypeError, "cannot store set"),
    ({"x": np.ones(2)}, TypeError, "cannot store ndarray"),
    ({"": ember.ones(1)}, ValueError, "name '' is reserved"),
    ({"__metadata__": ember.ones(1)}, ValueError, "name '__metadata__' is reserved"),
])
def test_save_rejects_what_it_cannot_store(obj, exc, match):
    with pytest.raises(exc, match=match):
        save_bytes(obj)


def test_map_location():
    data = save_bytes({"x": ember.ones(1)})
    assert ember.load(io.BytesIO(data), map_location="cpu")["x"].tolist() == [1.0]
    assert ember.load(io.BytesIO(data), map_location=ember.device("cpu"))["x"].tolist() == [1.0]
    with pytest.raises(NotImplementedError, match="CPU"):
        ember.load(io.BytesIO(data), map_location="cuda")


# ---- interoperability ----

def test_files_written_by_ember_read_with_an_independent_reader():
    tensors = {f"t.{code}": tensor_of_bits(code, bits_array(code, (3, 4), start=k))
               for k, code in enumerate(CODES)}
    tensors["scalar"] = tensor_of_bits("F64", bits_array("F64", (), start=6))
    tensors["empty"] = tensor_of_bits("BF16", bits_array("BF16", (0, 5)))
    tensors["view"] = tensors["t.F16"].t()
    data = save_bytes(tensors, metadata={"k": "v"})
    read, meta = ref_read(data)
    assert meta == {"k": "v"} and list(read) == list(tensors)
    for name, t in tensors.items():
        code, arr = read[name]
        assert CODES[code] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(arr, bits_of(t))
    # the data section is exactly the tensors, packed in header order
    (n,) = struct.unpack("<Q", data[:8])
    assert len(data) - 8 - n == sum(t.numel() * t.element_size() for t in tensors.values())


@pytest.mark.parametrize("pad", [0, 3])
def test_files_written_independently_load_bit_exact(pad):
    tensors = {f"{code.lower()}.w": (code, bits_array(code, (2, 3, 2), start=k))
               for k, code in enumerate(CODES)}
    tensors["s"] = ("F32", bits_array("F32", (), start=7))  # a signalling NaN, 0-d
    tensors["e"] = ("I16", bits_array("I16", (0,)))
    # data laid out in another order than the header lists the names
    order = list(reversed(list(tensors)))
    got = load_bytes(ref_write(tensors, metadata={"a": "b"}, order=order, pad=pad))
    assert list(got) == list(tensors)
    for name, (code, arr) in tensors.items():
        assert_same_bits(got[name], code, arr)


def test_float_values_are_right_not_only_bits():
    # bits could match with the dtype misassigned; check the numbers too
    arr = np.array([-0.0, 1.5, np.inf, -np.inf, np.nan, 1e-40], dtype="<f4")
    got = load_bytes(ref_write({"x": ("F32", arr.view("<u4"))}))["x"].numpy()
    np.testing.assert_array_equal(got, arr)
    assert np.signbit(got[0]) and np.isnan(got[4])
    bf = load_bytes(ref_write({"b": ("BF16", np.array([0x3FC0, 0xC100], "<u2"))}))["b"]
    assert bf.float().tolist() == [1.5, -8.0]
    h = load_bytes(ref_write({"h": ("F16", np.array([0x3C00, 0xC000], "<u2"))}))["h"]
    assert h.float().tolist() == [1.0, -2.0]
    b = load_bytes(ref_write({"b": ("BOOL", np.array([1, 0, 1], "u1"))}))["b"]
    assert b.dtype == ember.bool and b.tolist() == [True, False, True]


# ---- malformed files ----

def header_file(header, body=b"", n=None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if n is None else n) + raw + body


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


DEEP = b"[" * 100000 + b"]" * 100000

MALFORMED = {
    "empty file": (b"", "0 bytes long, shorter than the 8-byte header length"),
    "seven bytes": (b"\x01" * 7, "7 bytes long"),
    "header length beyond file": (header_file({}, n=100), "header length \\(100 bytes\\) goes "
                                                         "beyond the end of the file"),
    "header length huge": (struct.pack("<Q", 2**64 - 1) + b"{}", "beyond the end of the file"),
    "header not utf-8": (header_file(b'{"\xff": 1}'), "header is not valid UTF-8"),
    "header not json": (header_file(b"{not json"), "header is not valid JSON"),
    "header truncated json": (header_file(b'{"x": {"dtype": "F32"'), "header is not valid JSON"),
    "header json array": (header_file([1, 2]), "header must be a JSON object, got list"),
    "header json number": (header_file(b"12345678"), "header must be a JSON object, got int"),
    "header json deep": (header_file(DEEP), "nested too deeply"),
    "entry not object": (header_file({"x": [1, 2]}), "tensor 'x': entry must be an object"),
    "entry lacks keys": (header_file({"x": {"dtype": "F32"}}), "lacks shape, data_offsets"),
    "unknown dtype": (header_file({"x": entry("U32")}, b"\0" * 8),
                      "tensor 'x': unknown or unsupported dtype 'U32'"),
    "lowercase dtype": (header_file({"x": entry("f32")}, b"\0" * 8), "unsupported dtype 'f32'"),
    "dtype not str": (header_file({"x": entry(4)}, b"\0" * 8), "unsupported dtype 4"),
    "shape not list": (header_file({"x": {**entry(), "shape": 2}}, b"\0" * 8),
                       "shape must be a list of non-negative ints, got 2"),
    "shape negative": (header_file({"x": entry(shape=(-2,))}, b"\0" * 8),
                       "shape must be a list of non-negative ints, got \\[-2\\]"),
    "shape float": (header_file({"x": entry(shape=(2.0,))}, b"\0" * 8), "non-negative ints"),
    "shape bool": (header_file({"x": entry(shape=(True,), offsets=(0, 4))}, b"\0" * 4),
                   "non-negative ints, got \\[true\\]"),
    "shape string": (header_file({"x": entry(shape=("2",))}, b"\0" * 8), "non-negative ints"),
    "shape too big": (header_file({"x": entry(shape=(0, 2**64))}), "non-negative ints"),
    "offsets one int": (header_file({"x": entry(offsets=(8,))}, b"\0" * 8),
                        "data_offsets must be \\[begin, end\\]"),
    "offsets three ints": (header_file({"x": entry(offsets=(0, 4, 8))}, b"\0" * 8),
                           "data_offsets must be"),
    "offsets negative": (header_file({"x": entry(offsets=(-8, 0))}, b"\0" * 8),
                         "0 <= begin <= end"),
    "offsets reversed": (header_file({"x": entry(offsets=(8, 0))}, b"\0" * 8),
                         "0 <= begin <= end, got \\[8, 0\\]"),
    "offsets floats": (header_file({"x": entry(offsets=(0.0, 8.0))}, b"\0" * 8),
                       "data_offsets must be"),
    "offsets not matching shape": (header_file({"x": entry(shape=(3,))}, b"\0" * 8),
                                   "span 8 bytes, but a F32 tensor of shape \\[3\\] needs 12"),
    "offsets not matching itemsize": (header_file({"x": entry("F64")}, b"\0" * 8),
                                      "F64 tensor of shape \\[2\\] needs 16"),
    "offsets beyond data": (header_file({"x": entry(offsets=(8, 16))}, b"\0" * 8),
                            "bytes of the data section \\(at 0..8\\) belong to no tensor"),
    "data truncated": (header_file({"x": entry()}, b"\0" * 5),
                       "file is truncated: the header needs 8 bytes of tensor data, the file "
                       "has 5"),
    "no data at all": (header_file({"x": entry()}), "file is truncated"),
    "overlap": (header_file({"a": entry(), "b": entry(offsets=(4, 12))}, b"\0" * 12),
                "tensors 'a' and 'b' overlap"),
    "same offsets": (header_file({"a": entry(), "b": entry()}, b"\0" * 8), "overlap"),
    "gap between": (header_file({"a": entry(), "b": entry(offsets=(12, 20))}, b"\0" * 20),
                    "4 bytes of the data section \\(at 8..12\\) belong to no tensor"),
    "not starting at zero": (header_file({"a": entry(offsets=(4, 12))}, b"\0" * 12),
                             "at 0..4\\) belong to no tensor"),
    "trailing garbage": (header_file({"a": entry()}, b"\0" * 8 + b"junk"),
                         "4 bytes of trailing garbage after the last tensor"),
    "garbage without tensors": (header_file({}, b"x"), "1 bytes of trailing garbage"),
    "duplicate names": (header_file(b'{"a": %s, "a": %s}' % (json.dumps(entry()).encode(),
                                                              json.dumps(entry()).encode()),
                                    b"\0" * 8), "duplicate name 'a'"),
    "duplicate entry keys": (header_file(b'{"a": {"dtype": "F32", "dtype": "F64", "shape": [2],'
                                         b' "data_offsets": [0, 8]}}', b"\0" * 8),
                             "duplicate name 'dtype'"),
    "metadata not object": (header_file({"__metadata__": ["a"]}),
                            "'__metadata__' must be an object of string -> string"),
    "metadata int value": (header_file({"__metadata__": {"epoch": 3}}),
                           "'__metadata__' must be an object"),
    "bool not 0 or 1": (header_file({"b": entry("BOOL", (3,), (0, 3))}, b"\x00\x01\x02"),
                        "tensor 'b' is BOOL but holds bytes other than 0 and 1"),
    "too many dims": (header_file({"x": entry("U8", (1,) * 9, (0, 1))}, b"\0"),
                      "tensor 'x': cannot make a tensor of shape"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_raise_value_error_naming_file_and_problem(tmp_path, case):
    data, match = MALFORMED[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as info:
        ember.load(path)
    assert str(path) in str(info.value)
    # the same from a file object, named by its .name, and from a nameless one
    with open(path, "rb") as f:
        with pytest.raises(ValueError, match=match):
            ember.load(f)
    with pytest.raises(ValueError, match=match) as info:
        ember.load(io.BytesIO(data))
    assert "<BytesIO>" in str(info.value)


def test_load_metadata_checks_the_header_too():
    with pytest.raises(ValueError, match="trailing garbage"):
        serialization.load_metadata(io.BytesIO(header_file({"__metadata__": {}}, b"x")))


def valid_file():
    return ref_write({"a": ("F32", bits_array("F32", (3, 2))), "b": ("BOOL", bits_array(
        "BOOL", (4,))), "c": ("I64", bits_array("I64", (2,)))}, metadata={"m": "v"})


def test_every_truncation_raises_value_error():
    data = valid_file()
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            load_bytes(data[:cut])


def test_random_corruption_loads_or_raises_value_error_never_worse():
    # flip bytes anywhere (header included) and append junk: the loader may
    # succeed (a flipped data byte is still data) but must fail only with ValueError
    data = valid_file()
    rng = random.Random(1234)
    outcomes = collections.Counter()
    for _ in range(3000):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        try:
            load_bytes(bytes(buf))
            outcomes["loaded"] += 1
        except ValueError:
            outcomes["ValueError"] += 1
    assert outcomes["ValueError"] > 0 and outcomes["loaded"] > 0, outcomes


def test_big_header_is_refused_before_reading_it(tmp_path):
    n = serialization._MAX_HEADER_BYTES + 8
    path = tmp_path / "big.st"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n))
        f.truncate(8 + n + 1)  # sparse: the file is long enough to hold such a header
    with pytest.raises(ValueError, match="larger than the format's limit"):
        ember.load(path)
