"""Shape ops, data movement and indexing against PyTorch, including which
results are views (they share memory: writing through them shows in the
base) and property-based indexing with hypothesis."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from torchdiff import ALL_DTYPES, Arg, arr, check, raises_like_torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def is_view_of(r, base):
    """Writing through r changes base (they share memory)."""
    return r.numel() > 0 and ember.Tensor.data_ptr(r) >= base.data_ptr() and \
        r.data_ptr() < base.data_ptr() + base.numel() * base.element_size()


# ---- views ----

VIEWS = [
    ("view", (2, 3, 4), lambda m, x: x.view(6, 4)),
    ("view -1", (2, 3, 4), lambda m, x: x.view(-1, 2)),
    ("view tuple", (2, 3, 4), lambda m, x: x.view((4, 6))),
    ("reshape", (2, 3, 4), lambda m, x: x.reshape(3, 8)),
    ("reshape of transposed copies", (3, 4), lambda m, x: x.t().reshape(12)),
    ("m.reshape", (2, 3, 4), lambda m, x: m.reshape(x, (4, -1))),
    ("flatten", (2, 3, 4), lambda m, x: x.flatten()),
    ("flatten(1)", (2, 3, 4), lambda m, x: m.flatten(x, 1)),
    ("flatten(0,1)", (2, 3, 4), lambda m, x: x.flatten(0, 1)),
    ("flatten 0-d", (), lambda m, x: x.flatten()),
    ("unflatten", (2, 12), lambda m, x: x.unflatten(1, (3, 4))),
    ("unflatten -1", (2, 12), lambda m, x: m.unflatten(x, -1, (2, -1))),
    ("squeeze", (1, 3, 1, 4), lambda m, x: x.squeeze()),
    ("squeeze(2)", (1, 3, 1, 4), lambda m, x: x.squeeze(2)),
    ("squeeze(1) no-op", (1, 3, 1, 4), lambda m, x: x.squeeze(1)),
    ("squeeze(-4)", (1, 3, 1, 4), lambda m, x: m.squeeze(x, -4)),
    ("unsqueeze", (3, 4), lambda m, x: x.unsqueeze(0)),
    ("unsqueeze -1", (3, 4), lambda m, x: m.unsqueeze(x, -1)),
    ("unsqueeze 0-d", (), lambda m, x: x.unsqueeze(0)),
    ("permute", (2, 3, 4), lambda m, x: x.permute(2, 0, 1)),
    ("permute tuple neg", (2, 3, 4), lambda m, x: m.permute(x, (-1, 0, -2))),
    ("transpose", (2, 3, 4), lambda m, x: x.transpose(0, 2)),
    ("m.transpose", (2, 3, 4), lambda m, x: m.transpose(x, -1, -2)),
    ("t", (3, 4), lambda m, x: x.t()),
    ("t 1-d", (3,), lambda m, x: x.t()),
    ("T", (3, 4), lambda m, x: x.T),
    ("mT", (2, 3, 4), lambda m, x: x.mT),
    ("expand", (3, 1), lambda m, x: x.expand(3, 4)),
    ("expand -1 new dims", (3, 1), lambda m, x: x.expand(2, -1, 5)),
    ("expand_as", (1, 4), lambda m, x: x.expand_as(m.zeros(3, 4))),
    ("broadcast_to", (4,), lambda m, x: m.broadcast_to(x, (2, 3, 4))),
    ("narrow", (5, 4), lambda m, x: x.narrow(0, 1, 3)),
    ("m.narrow neg", (5, 4), lambda m, x: m.narrow(x, -1, -3, 2)),
    ("movedim", (2, 3, 4), lambda m, x: m.movedim(x, 0, -1)),
    ("movedim many", (2, 3, 4, 5), lambda m, x: m.movedim(x, (0, 1), (3, 0))),
    ("split", (7, 3), lambda m, x: x.split(3)),
    ("split sizes", (7, 3), lambda m, x: m.split(x, [2, 5])),
    ("split dim", (3, 7), lambda m, x: m.split(x, 2, dim=1)),
    ("chunk", (7, 3), lambda m, x: x.chunk(3)),
    ("chunk dim", (3, 6), lambda m, x: m.chunk(x, 4, 1)),
    ("unbind", (3, 4), lambda m, x: x.unbind(1)),
    ("tensor_split", (7,), lambda m, x: m.tensor_split(x, 3)),
    ("tensor_split idx", (7,), lambda m, x: m.tensor_split(x, [1, 5])),
    ("contiguous of contiguous", (3, 4), lambda m, x: x.contiguous()),
    ("view_as", (3, 4), lambda m, x: x.view_as(m.zeros(2, 6))),
    ("slice", (5, 4), lambda m, x: x[1:4, ::2]),
    ("select", (5, 4), lambda m, x: x[2]),
    ("select neg", (5, 4), lambda m, x: x[:, -1]),
    ("ellipsis None", (2, 3, 4), lambda m, x: x[..., None, 1:]),
]


@pytest.mark.parametrize("name,shape,fn", VIEWS, ids=[c[0] for c in VIEWS])
def test_view_ops(name, shape, fn):
    got = check(fn, arr("float32", shape))
    if "copies" in name:
        return
    x = ember.tensor(arr("float32", shape).values.astype(np.float32))
    r = fn(ember, x)
    for part in (r if isinstance(r, tuple) else (r,)):
        if part.numel():
            assert is_view_of(part, x), f"{name} must be a view"
            if 0 not in part.stride():  # (expanded views cannot be written)
                part.fill_(123.0)
                assert 123.0 in x
    assert got is not None


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_views_of_every_dtype(dtype):
    check(lambda m, x: x.t()[1:].reshape(-1), arr(dtype, (3, 4)))
    check(lambda m, x: x.unsqueeze(1).expand(3, 2, 4).contiguous(), arr(dtype, (3, 4)))


def test_view_impossible_raises_like_torch():
    raises_like_torch(lambda m, x: x.t().view(12), arr("float32", (3, 4)), match="view")
    raises_like_torch(lambda m, x: x.view(5, 3), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.view(-1, -1), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.reshape(7), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.expand(3, 5), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.expand(4), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.permute(0, 0), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.permute(0), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.transpose(0, 2), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.squeeze(2), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.unsqueeze(3), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.narrow(0, 2, 5), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.t(), arr("float32", (2, 3, 4)))
    raises_like_torch(lambda m, x: x.unflatten(1, (3, 3)), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: x.split([1, 1], 0), arr("float32", (3, 4)))


# ---- copies: repeat, tile, flip, roll, cat, stack, tril/triu ----

MOVES = [
    ("repeat", (2, 3), lambda m, x: x.repeat(2, 3)),
    ("repeat more dims", (2, 3), lambda m, x: x.repeat(2, 1, 2)),
    ("repeat 0-d", (), lambda m, x: x.repeat(3)),
    ("repeat zero", (2, 3), lambda m, x: x.repeat(0, 1)),
    ("tile", (2, 3), lambda m, x: m.tile(x, (2,))),
    ("tile more", (2, 3), lambda m, x: x.tile(2, 1, 1)),
    ("flip", (3, 4, 2), lambda m, x: m.flip(x, (0, 2))),
    ("flip method", (3, 4), lambda m, x: x.flip(-1)),
    ("flip list", (3, 4), lambda m, x: x.flip([0, 1])),
    ("fliplr", (3, 4), lambda m, x: m.fliplr(x)),
    ("flipud", (3, 4), lambda m, x: m.flipud(x)),
    ("roll", (5,), lambda m, x: m.roll(x, 2)),
    ("roll neg big", (5,), lambda m, x: m.roll(x, -7)),
    ("roll dims", (3, 4), lambda m, x: m.roll(x, (1, -1), (0, 1))),
    ("roll flat", (3, 4), lambda m, x: x.roll(5)),
    ("roll dim", (3, 4), lambda m, x: x.roll(1, 1)),
    ("tril", (4, 5), lambda m, x: m.tril(x)),
    ("tril k", (4, 5), lambda m, x: x.tril(-1)),
    ("triu k", (4, 5), lambda m, x: m.triu(x, 2)),
    ("triu batched", (2, 3, 3), lambda m, x: x.triu()),
]


@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "bfloat16"])
@pytest.mark.parametrize("name,shape,fn", MOVES, ids=[c[0] for c in MOVES])
def test_data_movement(name, shape, fn, dtype):
    check(fn, arr(dtype, shape))
    if shape:
        check(fn, arr(dtype, shape[::-1], view=lambda m, t: t.permute(*range(t.ndim - 1, -1, -1))))


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat_and_stack(dim):
    a, b, c = arr("float32", (2, 3)), arr("float32", (2, 3), seed=1), arr("float32", (2, 3), seed=2)
    check(lambda m, a, b, c: m.stack([a, b, c], dim), a, b, c)
    check(lambda m, a, b, c: m.stack((a, b.t().t(), c), dim=dim), a, b, c)
    if dim in (0, -2):
        check(lambda m, a, b: m.cat([a, b, a[:1]], dim), a, b)
    else:
        check(lambda m, a, b: m.cat([a, b, a[:, :1]], dim), a, b)


def test_cat_forms():
    a, b = arr("float32", (2, 3)), arr("int64", (1, 3), seed=1)
    check(lambda m, a, b: m.cat([a, b]), a, b)  # promotes
    check(lambda m, a, b: m.cat([a.t(), b.t()], 1), a, b)
    check(lambda m, a: m.cat([a, m.zeros(0, 3)]), a)
    check(lambda m, a: m.cat([a]), a)
    check(lambda m, a, b: m.concat((a, b), dim=0), a, b)
    check(lambda m, a: m.hstack([a, a]), a)
    check(lambda m, a: m.vstack([a, a]), a)
    check(lambda m, a: m.cat([a, m.tensor([])]), a)  # legacy: 1-d empty tensors are skipped
    raises_like_torch(lambda m, a: m.cat([a, a.t()]), a)
    raises_like_torch(lambda m, a: m.cat([]), a)
    raises_like_torch(lambda m, a: m.cat([a, a], 2), a)
    raises_like_torch(lambda m, a: m.stack([a, a[:1]]), a)


# ---- gather / scatter / index_select / masks ----

def idx(values):
    return Arg(np.array(values), "int64")


def test_index_select():
    x = arr("float32", (4, 5))
    check(lambda m, x, i: m.index_select(x, 0, i), x, idx([3, 0, 0, 2]))
    check(lambda m, x, i: x.index_select(-1, i), x, idx([4, 1]))
    check(lambda m, x, i: x.index_select(1, i), x, idx([]))
    check(lambda m, x, i: x.t().index_select(0, i), x, idx([1, 2]))
    check(lambda m, x, i: m.index_select(x, 0, i), arr("float32", (4,)), Arg(np.array(2), "int64"))
    raises_like_torch(lambda m, x, i: m.index_select(x, 0, i), x, idx([4]))
    raises_like_torch(lambda m, x, i: m.index_select(x, 0, i), x, idx([[1]]))
    raises_like_torch(lambda m, x, i: m.index_select(x, 0, i), x, Arg(np.array([1.0]), "float32"))


def test_gather():
    x = arr("float32", (3, 4))
    i = idx([[0, 1, 3], [2, 2, 0]])
    check(lambda m, x, i: m.gather(x, 1, i), x, i)
    check(lambda m, x, i: x.gather(0, i.t()[:3, :2] % 3), x, i)
    check(lambda m, x, i: m.take_along_dim(x, i, 1), x, i)
    check(lambda m, x, i: m.gather(x, -1, i), arr("int32", (3, 4)), i)
    raises_like_torch(lambda m, x, i: m.gather(x, 1, i + 4), x, i)
    raises_like_torch(lambda m, x, i: m.gather(x, 1, i.unsqueeze(0)), x, i)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16"])
def test_gather_one_element_per_row(dtype):
    # x[r, t[r]], the pick of a loss (its own prefetching loop for 4- and
    # 8-byte items): over many rows, a transposed x, a strided index,
    # fewer index rows than x has, and an index out of range
    rng = np.random.default_rng(0)
    x = arr(dtype, (300, 7))
    t = Arg(rng.integers(0, 7, (300, 1)), "int64")
    check(lambda m, x, t: x.gather(1, t), x, t)
    check(lambda m, x, t: x.t().contiguous().t().gather(1, t), x, t)
    check(lambda m, x, t: x.gather(1, t[::3]), x, t)
    check(lambda m, x, t: x.gather(1, t[:10]), x, t)
    raises_like_torch(lambda m, x, t: x.gather(1, t + 7), x, t)
    raises_like_torch(lambda m, x, t: x.gather(1, t - 8), x, t)


def test_scatter_and_scatter_add():
    x = arr("float32", (3, 5))
    i = idx([[0, 1, 2, 0], [4, 3, 2, 1]])
    src = arr("float32", (2, 4), seed=3)
    check(lambda m, x, i, s: m.scatter(x, 1, i, s), x, i, src)
    check(lambda m, x, i, s: x.scatter(1, i, 7.5), x, i, src)
    check(lambda m, x, i, s: m.scatter_add(x, 1, i, s), x, i, src)
    check(lambda m, x, i, s: x.scatter_add_(1, i, s), x, i, src)
    check(lambda m, x, i, s: x.scatter_(1, i, s), x, i, src)
    dup = idx([[0, 0, 0, 0]])
    check(lambda m, x, i, s: m.scatter_add(x, 1, i, s[:1]), x, dup, src)
    check(lambda m, x, i, s: m.scatter(x, 0, i % 3, s), x, i, src)
    raises_like_torch(lambda m, x, i, s: m.scatter(x, 1, i + 5, s), x, i, src)


def test_masked_select_and_nonzero():
    x = arr("float32", (3, 4))
    mask = arr("bool", (3, 4), seed=4)
    check(lambda m, x, k: m.masked_select(x, k), x, mask)
    check(lambda m, x, k: x.masked_select(k[0]), x, mask)  # broadcast mask
    check(lambda m, k: m.nonzero(k), mask)
    check(lambda m, k: k.nonzero(as_tuple=True), mask)
    check(lambda m, x: m.nonzero(x > 0), x)
    check(lambda m, x: m.argwhere(x), arr("int32", (2, 3, 2)))
    check(lambda m, x: m.where(x > 0), x)
    check(lambda m, x: m.nonzero(x), Arg(np.array(3.0), "float32"))
    check(lambda m, x: m.nonzero(x), Arg(np.zeros((0, 3)), "float32"))


@pytest.mark.parametrize("n", [-1, 5])
def test_one_hot(n):
    check(lambda m, i: (m.nn.functional.one_hot if m.__name__ == "torch" else m.one_hot)(i, n),
          idx([[0, 2], [4, 1]]))
    raises_like_torch(lambda m, i: (m.nn.functional.one_hot if m.__name__ == "torch"
                                    else m.one_hot)(i, 3), idx([0, 4]))


# ---- __getitem__ / __setitem__ ----

GETITEM = [
    ("int", lambda x: x[1]), ("neg int", lambda x: x[-1]), ("int int", lambda x: x[1, 2]),
    ("slice", lambda x: x[1:3]), ("slice step", lambda x: x[::2, 1::3]),
    ("slice clamp", lambda x: x[-100:100, 2:1]), ("none", lambda x: x[None, :, None]),
    ("ellipsis", lambda x: x[..., 0]), ("ellipsis mid", lambda x: x[0, ..., 1]),
    ("list", lambda x: x[[0, 2, 2]]), ("list neg", lambda x: x[[-1, 0]]),
    ("two lists", lambda x: x[[0, 1], [2, 3]]), ("list slice", lambda x: x[[1, 0], 1:]),
    ("slice list", lambda x: x[:, [3, 0, 0]]),
    ("int list", lambda x: x[1, [0, 2]]),
    ("separated advanced", lambda x: x[[0, 1], :, [1, 0]] if x.ndim == 3 else x[[0, 1], [1, 0]]),
    ("nested list", lambda x: x[[[0, 1], [1, 0]]]),
    ("bool list", lambda x: x[[True, False, True]]),
    ("true", lambda x: x[True]), ("false", lambda x: x[False]),
    ("empty list", lambda x: x[[]]),
]


@pytest.mark.parametrize("name,fn", GETITEM, ids=[c[0] for c in GETITEM])
@pytest.mark.parametrize("shape", [(3, 4), (3, 4, 2)], ids=["2d", "3d"])
def test_getitem(name, fn, shape):
    check(lambda m, x: fn(x), arr("float32", shape))
    check(lambda m, x: fn(x), arr("int16", shape[::-1], view=lambda m, t: t.permute(*range(t.ndim - 1, -1, -1))))


def test_getitem_with_tensors():
    x = arr("float32", (4, 5))
    check(lambda m, x, i: x[i], x, idx([3, 1]))
    check(lambda m, x, i: x[i, i], x, idx([3, 1]))
    check(lambda m, x, i: x[:, i], x, idx([[0, 4], [1, 1]]))
    check(lambda m, x, i: x[i], x, Arg(np.array(2), "int64"))  # 0-d tensor: a copy
    assert ember.arange(5)[ember.tensor([1, 3], dtype=ember.int32)].tolist() == [1, 3]  # torch: int64 only
    check(lambda m, x, i: x[i], x, Arg(np.array([1, 3]), "uint8"))  # uint8 is a (legacy) mask
    check(lambda m, x: x[x > 0], x)
    check(lambda m, x: x[(x > 0)[:, 0]], x)
    check(lambda m, x: x[x.sum(1) > 0, 1:], x)
    check(lambda m, x: x[m.tensor(True)], x)
    check(lambda m, x: x[np.array([0, 2])], x)


def test_basic_index_results_are_views_advanced_are_copies():
    x = ember.arange(12.0).reshape(3, 4)
    v = x[1:, ::2]
    v[0, 0] = -1.0
    assert x[1, 0].item() == -1.0
    c = x[[1, 2]]
    c[0, 0] = 99.0
    assert x[1, 0].item() == -1.0
    x[0][1] = 5.0  # setitem on a view writes the base
    assert x[0, 1].item() == 5.0


SETITEM = [
    ("int", lambda x, v: x.__setitem__(1, v)), ("slice", lambda x, v: x.__setitem__(slice(1, 3), v)),
    ("step", lambda x, v: x.__setitem__((slice(None, None, 2), slice(1, None)), v)),
    ("ellipsis", lambda x, v: x.__setitem__((Ellipsis, 0), v)),
    ("list", lambda x, v: x.__setitem__([0, 2], v)),
    ("two lists", lambda x, v: x.__setitem__(([0, 1], [2, 3]), v)),
    ("mask", lambda x, v: x.__setitem__(x > 0, v)),
    ("row mask", lambda x, v: x.__setitem__((x.sum(1) > 0), v)),
    ("list slice", lambda x, v: x.__setitem__(([2, 0], slice(1, 3)), v)),
    ("none", lambda x, v: x.__setitem__((None, 1), v)),
]


@pytest.mark.parametrize("value", ["scalar", "int scalar", "row"])
@pytest.mark.parametrize("name,fn", SETITEM, ids=[c[0] for c in SETITEM])
def test_setitem(name, fn, value):
    def case(m, x):
        v = {"scalar": -2.5, "int scalar": 7, "row": m.tensor(-9.0).to(x.dtype)}[value]
        fn(x, v)
        return x
    check(case, arr("float32", (3, 4)))
    check(case, arr("int32", (3, 4)))


def test_setitem_with_tensor_values():
    check(lambda m, x, v: (x.__setitem__(slice(0, 2), v), x)[1], arr("float32", (3, 4)),
          arr("float32", (4,), seed=1))
    check(lambda m, x, v: (x.__setitem__([2, 0], v), x)[1], arr("float32", (3, 4)),
          arr("float32", (2, 4), seed=1))
    # PyTorch requires the values' dtype to match here; ember converts them
    x = ember.zeros(3, 4)
    x[[2, 0]] = ember.ones(2, 4, dtype=ember.float64)
    assert x.sum().item() == 8.0
    check(lambda m, x, v: (x.__setitem__(x > 0, v), x)[1], arr("float32", (3, 4)),
          Arg(np.array(0.5), "float32"))
    check(lambda m, x, i, v: (x.index_put_((i,), v, accumulate=True), x)[1],
          arr("float32", (3, 4)), idx([0, 0, 2]), arr("float32", (3, 4), seed=2))
    check(lambda m, x, i, v: x.index_put((i, i), v), arr("float32", (3, 4)), idx([0, 2]),
          arr("float32", (2,), seed=2))
    raises_like_torch(lambda m, x, v: x.__setitem__(slice(0, 2), v), arr("float32", (3, 4)),
                      arr("float32", (3,), seed=1))


@pytest.mark.parametrize("index", [[1, 4, 7], [0, 1, 2], [-3, -2, -1], [5], [8, 6, 4], [2, 2, 5], [3, 1]])
def test_index_put_along_a_dim_against_torch(index):
    """An index that steps evenly (a slice's backward writes its gradient
    that way) is copied into a strided view; the others, duplicates and
    descending ones included, take the general path."""
    for dim in range(3):
        shape = [6, 7, 9]
        vshape = list(shape)
        vshape[dim] = len(index)
        shape[dim] = 9
        i = tuple([slice(None)] * dim + [idx(index)])
        check(lambda m, x, v, i=i: (x.__setitem__(tuple(t.make(m) if hasattr(t, "make") else t for t in i), v), x)[1],
              arr("float32", tuple(shape)), arr("float32", tuple(vshape), seed=1))
        check(lambda m, x, v, i=i: (x.__setitem__(tuple(t.make(m) if hasattr(t, "make") else t for t in i), v), x)[1],
              arr("float64", tuple(shape)), arr("float64", tuple(vshape[dim:]), seed=2))  # broadcast values


def test_setitem_bumps_version():
    x = ember.zeros(3, 4)
    v0 = x._version
    x[1] = 2.0
    v1 = x._version
    x[[0, 2]] = 1.0
    v2 = x._version
    x[x > 1] = 5.0
    assert v0 < v1 < v2 < x._version


INDEX_ERRORS = [
    ("int out of range", lambda m, x: x[3]), ("neg out of range", lambda m, x: x[-4]),
    ("too many", lambda m, x: x[0, 0, 0]), ("list out of range", lambda m, x: x[[0, 5]]),
    ("float", lambda m, x: x[1.5]),
    ("negative step", lambda m, x: x[::-1]), ("zero step", lambda m, x: x[::0]),
    ("mask shape", lambda m, x: x[m.tensor([True, False])]), ("string", lambda m, x: x["a"]),
    ("float tensor", lambda m, x: x[m.tensor([0.0])]),
    ("set out of range", lambda m, x: x.__setitem__(5, 1.0)),
    ("set shape", lambda m, x: x.__setitem__(0, m.ones(5))),
]


@pytest.mark.parametrize("name,fn", INDEX_ERRORS, ids=[c[0] for c in INDEX_ERRORS])
def test_index_errors_match_torch(name, fn):
    raises_like_torch(fn, arr("float32", (3, 4)))


def test_two_ellipses_raise():
    with pytest.raises(IndexError, match="single ellipsis"):  # as NumPy (PyTorch 1.13 allows it)
        ember.zeros(3, 4)[..., ...]


def test_iteration_and_len():
    x = ember.arange(6).reshape(3, 2)
    rows = list(x)
    assert len(rows) == 3 and rows[1].tolist() == [2, 3]
    assert len(x) == 3
    assert 4 in x and 7 not in x
    with pytest.raises(TypeError):
        iter(ember.tensor(1.0))


# ---- properties ----

@st.composite
def index_case(draw):
    """A shape and a key of ints, slices, lists and Nones for its leading
    dims, or (after an Ellipsis) its trailing ones."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    k = draw(st.integers(0, len(shape)))
    trailing = draw(st.booleans())
    sizes = shape[len(shape) - k:] if trailing else shape[:k]
    key = []
    for size in sizes:
        kind = draw(st.sampled_from(["int", "slice", "list", "none"]))
        if kind == "none":
            key.append(None)
        if kind == "int":
            key.append(draw(st.integers(-size, size - 1)))
        elif kind == "list":
            key.append(draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=3)))
        else:
            key.append(slice(draw(st.one_of(st.none(), st.integers(-size - 1, size + 1))),
                             draw(st.one_of(st.none(), st.integers(-size - 1, size + 1))),
                             draw(st.one_of(st.none(), st.integers(1, 3)))))
    if trailing:
        key.insert(0, Ellipsis)
    return shape, tuple(key)


@settings(max_examples=150, deadline=None)
@given(index_case())
def test_indexing_property(case):
    shape, key = case
    check(lambda m, x: x[key], arr("float32", shape))


@settings(max_examples=80, deadline=None)
@given(index_case())
def test_setitem_property(case):
    shape, key = case

    def set_(m, x):
        x[key] = -1.0
        return x
    check(set_, arr("float32", shape))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_mask_property(shape, data):
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                       max_size=int(np.prod(shape))))).reshape(shape)
    check(lambda m, x, k: x[k], arr("float32", tuple(shape)), Arg(mask, "bool"))
