"""Reductions into positions (scatter_reduce, index_reduce, scatter with
reduce=, segment_reduce) against PyTorch: values, gradients (amax/amin
share the gradient among ties as PyTorch does), and compiled against
eager."""

import numpy as np
import pytest

import ember
from torchdiff import Arg, arr, check

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

IDX = np.array([[0, 1, 0], [2, 0, 2]])


def _ints(a):
    return Arg(np.asarray(a), "int64")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_scatter_reduce_values(reduce, include_self, dtype):
    check(lambda m, x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self),
          arr(dtype, (2, 4)), _ints(IDX), arr(dtype, (2, 3)))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_with_ties(reduce, include_self):
    base = np.array([[1.0, 5.0, 2.0, 0.0], [3.0, 3.0, 7.0, 1.0]])
    src = np.array([[5.0, 2.0, 5.0], [7.0, 0.0, 7.0]])  # ties with each other and with base

    def grads(m, x, s):
        x, s = x.detach().clone().requires_grad_(), s.detach().clone().requires_grad_()
        y = x.scatter_reduce(1, m.tensor(IDX), s, reduce, include_self=include_self)
        y.backward(m.arange(8, dtype=y.dtype).reshape(2, 4) + 1.0)
        return x.grad, s.grad
    check(grads, Arg(base, "float64"), Arg(src, "float64"))


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_takes_tensors_and_numbers(reduce):
    check(lambda m, x, i, s: x.scatter(1, i, s, reduce=reduce), arr("float32", (2, 4)), _ints(IDX),
          arr("float32", (2, 3)))
    check(lambda m, x, i: x.scatter(1, i, 1.5, reduce=reduce), arr("float32", (2, 4)), _ints(IDX))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce):
    check(lambda m, x, s: x.index_reduce(0, m.tensor([0, 2, 0]), s, reduce), arr("float32", (3, 2)),
          arr("float32", (3, 2)))
    check(lambda m, x, s: x.index_reduce(1, m.tensor([1, 1]), s, reduce, include_self=False),
          arr("float32", (3, 2)), arr("float32", (3, 2)))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(reduce, initial):
    lengths = np.array([2, 0, 1, 3])
    check(lambda m, x, l: m.segment_reduce(x, reduce, lengths=l, initial=initial), arr("float32", (6, 3)),
          _ints(lengths))
    check(lambda m, x, l: m.segment_reduce(x, reduce, lengths=l, axis=1, initial=initial),
          arr("float32", (2, 6)), _ints(np.array([[2, 0, 1, 3], [1, 1, 1, 3]])))


def test_segment_reduce_checks_its_lengths():
    with pytest.raises(RuntimeError, match="sum to data.size"):
        ember.segment_reduce(ember.ones(5), "sum", lengths=ember.tensor([2, 2]))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_compiles_and_matches_eager(reduce):
    x, s = ember.randn(2, 4), ember.randn(2, 3)
    i = ember.tensor(IDX)
    f = ember.compile(lambda x, s: x.scatter_reduce(1, i, s, reduce))
    want = x.scatter_reduce(1, i, s, reduce)
    f(x, s)
    got = f(x, s)
    assert f._stats()["compiled_calls"] >= 1
    np.testing.assert_array_equal(got.numpy(), want.numpy())
