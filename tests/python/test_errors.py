"""Bad input gives a clear Python exception (the type PyTorch raises for the
same mistake, and a message naming the op, shapes and dtypes), never a crash,
and leaves its operands untouched.
"""

import numpy as np
import pytest
import torch

import ember
from conftest import assert_close


def raises(exc, fn, *words):
    """Asserts fn() raises `exc` whose message contains every one of `words`;
    returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


# ---- broadcasting ----

BROADCAST_ERRORS = [
    # (function, exact message)
    (lambda: ember.ones(2, 3) + ember.ones(4), "add: cannot broadcast f32[2,3] with f32[4]"),
    (lambda: ember.add(ember.ones(2, 3), ember.ones(4)),
     "add: cannot broadcast f32[2,3] with f32[4]"),
    (lambda: ember.ones(2, 3).add(ember.ones(4)), "add: cannot broadcast f32[2,3] with f32[4]"),
    (lambda: ember.ones(2, 3, dtype=ember.float64) - ember.ones(4, dtype=ember.int64),
     "sub: cannot broadcast f64[2,3] with i64[4]"),
    (lambda: ember.ones(3) * ember.ones(2, 2), "mul: cannot broadcast f32[3] with f32[2,2]"),
    (lambda: ember.ones(2, 3) / ember.ones(3, 2), "div: cannot broadcast f32[2,3] with f32[3,2]"),
    (lambda: ember.maximum(ember.ones(2, 3), ember.ones(3, 2)),
     "maximum: cannot broadcast f32[2,3] with f32[3,2]"),
    (lambda: ember.ones(5) ** ember.ones(4), "pow: cannot broadcast f32[5] with f32[4]"),
    (lambda: ember.ones(0) + ember.ones(2), "add: cannot broadcast f32[0] with f32[2]"),
    (lambda: ember.ones(2, dtype=ember.bool) + ember.ones(3, dtype=ember.bool),
     "add: cannot broadcast bool[2] with bool[3]"),
]


@pytest.mark.parametrize("fn,message", BROADCAST_ERRORS, ids=[m for _, m in BROADCAST_ERRORS])
def test_broadcast_failure_message(fn, message):
    raises(RuntimeError, fn, message)


def test_failed_op_leaves_operands_untouched():
    x, y = ember.ones(2, 3), ember.ones(4)
    raises(RuntimeError, lambda: x + y, "cannot broadcast")
    assert_close(x, np.ones((2, 3), np.float32))
    assert_close(y, np.ones(4, np.float32))
    assert_close(x + 1, np.full((2, 3), 2, np.float32))  # and ember still works


# ---- matmul ----

@pytest.mark.parametrize("sa,sb,words", [
    ((2, 3), (4, 2), ["f32[2,3]", "f32[4,2]"]),
    ((3,), (4,), ["f32[3]", "f32[4]"]),
    ((5, 2, 3), (2, 4), ["f32[5,2,3]", "f32[2,4]"]),
    ((2, 3), (2,), ["f32[2,3]", "f32[2]"]),
], ids=str)
def test_matmul_shape_mismatch_names_both_shapes(sa, sb, words):
    raises(RuntimeError, lambda: ember.ones(*sa) @ ember.ones(*sb), "matmul", *words)


def test_matmul_batch_mismatch():
    raises(RuntimeError, lambda: ember.ones(2, 2, 3) @ ember.ones(3, 3, 4), "matmul", "batch",
           "f32[2,2,3]", "f32[3,3,4]")


def test_matmul_dtype_mismatch_names_dtypes():
    raises(RuntimeError, lambda: ember.ones(2, 2) @ ember.ones(2, 2, dtype=ember.float64),
           "matmul", "same dtype", "float32", "float64")


# ---- shapes ----

def test_reshape_to_incompatible_size_names_the_shape():
    x = ember.arange(6).reshape(2, 3)
    raises(RuntimeError, lambda: x.reshape(4), "reshape", "[4]", "i64[2,3]", "6")
    raises(RuntimeError, lambda: x.reshape(4, -1), "reshape", "[4,-1]")
    raises(RuntimeError, lambda: x.view(5), "[5]")
    raises(RuntimeError, lambda: ember.reshape(x, (7,)), "[7]")


def test_reshape_bad_inferred_dims():
    x = ember.zeros(2, 3)
    raises(RuntimeError, lambda: x.reshape(-1, -1), "only one dimension can be inferred")
    raises(RuntimeError, lambda: x.reshape(-2, 3), "invalid shape dimension -2")
    raises(RuntimeError, lambda: ember.zeros(0, 3).reshape(-1, 0), "reshape")


def test_view_of_non_viewable_suggests_reshape():
    raises(RuntimeError, lambda: ember.zeros(2, 3).T.view(6), "view", "reshape(")


@pytest.mark.parametrize("fn,words", [
    (lambda: ember.ones(2, 3).permute(0), ["permute", "2", "1"]),
    (lambda: ember.ones(2, 3).permute(0, 1, 2), ["permute", "2", "3"]),
    (lambda: ember.ones(2, 3, 4).permute(1, 0), ["permute"]),
    (lambda: ember.permute(ember.ones(2, 3), (1,)), ["permute"]),
], ids=["too few", "too many", "3-d with 2", "functional"])
def test_permute_wrong_number_of_dims(fn, words):
    raises(RuntimeError, fn, *words)


def test_permute_repeated_dim():
    raises(RuntimeError, lambda: ember.ones(2, 3).permute(0, 0), "permute", "permutation")
    raises(RuntimeError, lambda: ember.ones(2, 3).permute(1, -1), "permute", "permutation")


@pytest.mark.parametrize("shape,target", [
    ((2, 3), (3, 3)), ((2, 3), (3,)), ((2, 3), (2, 4)), ((3,), (-1, 3)), ((3,), (2, -2)),
    ((2, 1), (2, 3, 1, 5)),
], ids=str)
def test_expand_to_invalid_shape(shape, target):
    msg = raises(RuntimeError, lambda: ember.ones(*shape).expand(*target), "expand")
    assert str(list(target)).replace(" ", "") in msg  # names the requested shape


def test_t_of_3d():
    raises(RuntimeError, lambda: ember.ones(2, 3, 4).t(), "t()", "3-D")


def test_too_many_dims():
    raises(ValueError, lambda: ember.zeros(*[1] * 9), "at most 8")
    raises(ValueError, lambda: ember.zeros(2).reshape(*[1] * 8, 2), "at most 8")


def test_negative_size():
    raises(RuntimeError, lambda: ember.zeros(-1), "negative dimension -1")
    raises(RuntimeError, lambda: ember.ones(2, -3), "negative dimension -3")


# ---- dims ----

@pytest.mark.parametrize("fn", [
    lambda x: x.sum(2), lambda x: x.sum(-3), lambda x: x.mean(5), lambda x: x.sum((0, 2)),
    lambda x: ember.sum(x, -4), lambda x: x.transpose(0, 2), lambda x: x.transpose(-3, 0),
    lambda x: x.permute(0, 2), lambda x: x.size(2), lambda x: x.stride(-3),
    lambda x: ember.tensor(1.0).sum(1),
], ids=["sum(2)", "sum(-3)", "mean(5)", "sum((0,2))", "ember.sum(-4)", "transpose(0,2)",
        "transpose(-3,0)", "permute(0,2)", "size(2)", "stride(-3)", "0-d sum(1)"])
def test_dim_out_of_range(fn):
    raises(IndexError, lambda: fn(ember.ones(2, 3)), "out of range")


@pytest.mark.parametrize("fn", [lambda: ember.tensor(1.0).size(0),
                                lambda: ember.tensor(1.0).size(-1),
                                lambda: ember.tensor(1.0).stride(0)],
                         ids=["size(0)", "size(-1)", "stride(0)"])
def test_size_and_stride_of_0d_raise(fn):
    """PyTorch: IndexError 'Dimension specified as 0 but tensor has no dimensions'."""
    with pytest.raises(IndexError):
        fn()


@pytest.mark.parametrize("dims", [(0, 0), (1, -1), (0, 1, 0)], ids=str)
def test_reduce_over_repeated_dim(dims):
    x = ember.ones(2, 3)
    raises(RuntimeError, lambda: x.sum(dims), "sum", "multiple times")
    raises(RuntimeError, lambda: x.mean(dims), "mean", "multiple times")


def test_reduce_over_repeated_dim_of_0d():
    """PyTorch: torch.tensor(5.).sum((0, 0)) raises 'dim 0 appears multiple times'."""
    raises(RuntimeError, lambda: ember.tensor(5.0).sum((0, 0)), "multiple times")


# ---- wrong Python types ----

TYPE_ERRORS = [
    ("ember.exp('a')", lambda: ember.exp("a")),
    ("ember.relu([1.0])", lambda: ember.relu([1.0])),
    ("x + 'a'", lambda: ember.ones(2) + "a"),
    ("'a' + x", lambda: "a" + ember.ones(2)),
    ("x * None", lambda: ember.ones(2) * None),
    ("x - [1]", lambda: ember.ones(2) - [1]),
    ("x @ 3", lambda: ember.ones(2) @ 3),
    ("3 @ x", lambda: 3 @ ember.ones(2)),
    ("x.matmul(3)", lambda: ember.ones(2).matmul(3)),
    ("ember.matmul(x, 3)", lambda: ember.matmul(ember.ones(2), 3)),
    ("ember.maximum(1, 2)", lambda: ember.maximum(1, 2)),  # (add(1, 2) answers, as PyTorch's does)
    ("ember.maximum('a', x)", lambda: ember.maximum("a", ember.ones(2))),
    ("ember.maximum(x, 'a')", lambda: ember.maximum(ember.ones(2), "a")),
    ("x.maximum('a')", lambda: ember.ones(2).maximum("a")),
    ("x.add('a')", lambda: ember.ones(2).add("a")),
    ("x.mul(None)", lambda: ember.ones(2).mul(None)),
    ("x.pow([2])", lambda: ember.ones(2).pow([2])),
    ("ember.zeros('a')", lambda: ember.zeros("a")),
    ("ember.zeros(2.5)", lambda: ember.zeros(2.5)),
    ("ember.ones(True)", lambda: ember.ones(True)),
    ("ember.zeros(2, foo=1)", lambda: ember.zeros(2, foo=1)),
    ("ember.zeros(2, dtype='float32')", lambda: ember.zeros(2, dtype="float32")),
    ("ember.full((2,), 'a')", lambda: ember.full((2,), "a")),
    ("ember.full((2,))", lambda: ember.full((2,))),
    ("ember.arange('a')", lambda: ember.arange("a")),
    ("x.reshape('a')", lambda: ember.ones(2).reshape("a")),
    ("x.sum('a')", lambda: ember.ones(2).sum("a")),
    ("x.sum(1.5)", lambda: ember.ones(2).sum(1.5)),
    ("ember.sum(3)", lambda: ember.sum(3)),
    ("x.to('float32' as dtype=)", lambda: ember.ones(2).to(dtype="float32")),
    ("pow(x, 2, 3)", lambda: pow(ember.ones(2), 2, 3)),
    ("ember.manual_seed('a')", lambda: ember.manual_seed("a")),
    ("ember.tensor([1], dtype=float)", lambda: ember.tensor([1], dtype="float64")),
]


@pytest.mark.parametrize("name,fn", TYPE_ERRORS, ids=[n for n, _ in TYPE_ERRORS])
def test_wrong_python_types_raise_type_error(name, fn):
    with pytest.raises(TypeError):
        fn()


def test_type_error_messages_name_the_problem():
    raises(TypeError, lambda: ember.exp("a"), "exp", "Tensor", "str")
    raises(TypeError, lambda: ember.ones(2) + "a", "Tensor", "str")
    raises(TypeError, lambda: ember.ones(2) @ 3, "@")
    raises(TypeError, lambda: ember.zeros("a"), "zeros", "str")
    raises(TypeError, lambda: ember.zeros(2, dtype="float32"), "dtype", "ember.float32")


def test_set_num_threads_rejects_non_positive():
    raises(ValueError, lambda: ember.set_num_threads(0), "positive")
    raises(ValueError, lambda: ember.set_num_threads(-2), "positive")


# ---- bool arithmetic: PyTorch's errors and hint ----

BOOL_ERRORS = [
    ("bool - bool", lambda b: b - b, "sub"),
    ("bool - 1", lambda b: b - 1, "sub"),
    ("1 - bool", lambda b: 1 - b, "sub"),
    ("ember.sub(bool, bool)", lambda b: ember.sub(b, b), "sub"),
    ("float - bool", lambda b: ember.ones(2) - b, "sub"),
    ("-bool", lambda b: -b, "neg"),
    ("ember.neg(bool)", lambda b: ember.neg(b), "neg"),
    ("bool.neg()", lambda b: b.neg(), "neg"),
]


@pytest.mark.parametrize("name,fn,op", BOOL_ERRORS, ids=[n for n, _, _ in BOOL_ERRORS])
def test_bool_subtraction_and_negation(name, fn, op):
    b = ember.tensor([True, False])
    raises(RuntimeError, lambda: fn(b), op, "bool", "logical_not()")


@pytest.mark.parametrize("name,fn", [("float - True", lambda: ember.ones(2) - True),
                                     ("True - int", lambda: True - ember.tensor([1, 2]))],
                         ids=["float - True", "True - int"])
def test_subtracting_a_python_bool_raises(name, fn):
    """PyTorch: torch.ones(2) - True raises 'Subtraction, the `-` operator,
    with a bool tensor is not supported'."""
    raises(RuntimeError, fn, "sub", "bool")


def test_relu_of_bool():
    raises(RuntimeError, lambda: ember.relu(ember.tensor([True])), "relu", "bool")


# ---- devices ----

CUDA_CALLS = [
    ("zeros", lambda: ember.zeros(2, device="cuda")),
    ("ones", lambda: ember.ones(2, device="cuda")),
    ("full", lambda: ember.full((2,), 1.0, device="cuda")),
    ("rand", lambda: ember.rand(2, device="cuda")),
    ("randn", lambda: ember.randn(2, device="cuda:0")),
    ("arange", lambda: ember.arange(5, device="cuda")),
    ("tensor", lambda: ember.tensor([1.0], device="cuda")),
    ("to", lambda: ember.ones(2).to("cuda")),
    ("to(device=)", lambda: ember.ones(2).to(device="cuda")),
    ("Tensor.cuda", lambda: ember.ones(2).cuda()),
    ("Tensor.cuda(1)", lambda: ember.ones(2).cuda(1)),
    ("Module.cuda", lambda: ember.nn.Linear(2, 2).cuda()),
    ("cuda.current_device", lambda: ember.cuda.current_device()),
    ("cuda.synchronize", lambda: ember.cuda.synchronize()),
]


_HAS_CUDA = pytest.mark.skipif(ember.cuda.is_available(), reason="this machine has a CUDA device for ember")


@_HAS_CUDA
@pytest.mark.parametrize("name,fn", CUDA_CALLS, ids=[n for n, _ in CUDA_CALLS])
def test_cuda_not_implemented(name, fn):
    raises(NotImplementedError, fn, "cuda", "CPU")


@_HAS_CUDA
def test_cuda_module_on_a_cpu_build():
    """ember.cuda answers as torch.cuda does without a GPU, so code written
    `device = "cuda" if ember.cuda.is_available() else "cpu"` runs here."""
    assert ember.cuda.is_available() is False and torch.cuda.is_available() is False
    assert ember.cuda.device_count() == 0 == torch.cuda.device_count()
    assert ember.cuda.is_initialized() is False
    ember.cuda.manual_seed(0)
    ember.cuda.manual_seed_all(0)
    ember.cuda.empty_cache()
    assert ember.cuda.memory_allocated() == 0 == torch.cuda.memory_allocated()
    assert ember.cuda.max_memory_reserved() == 0 == torch.cuda.max_memory_reserved()
    assert ember.cuda.memory_stats() == {} == dict(torch.cuda.memory_stats())
    assert issubclass(ember.cuda.OutOfMemoryError, RuntimeError)
    assert ember.cuda.OutOfMemoryError.__module__ == "ember.cuda"
    assert ember.ones(2).is_cuda is False
    device = "cuda" if ember.cuda.is_available() else "cpu"
    model = ember.nn.Linear(3, 2).to(device)
    assert model(ember.ones(1, 3, device=device)).shape == (1, 2)


def test_cuda_errors_say_why():
    """What is missing is named: the driver (on a machine without one), or
    NVRTC; the same words wherever a device is asked for."""
    devices, why, available = ember._C._cuda_status()
    if available:
        pytest.skip("this machine has a CUDA device for ember")
    assert why and ember.cuda.why_unavailable() == why
    if devices == 0:
        assert "NVIDIA driver" in why or "no CUDA device" in why or "NVRTC" in why
    for fn in (lambda: ember.ones(2).to("cuda"), lambda: ember.zeros(2, device="cuda"),
               lambda: ember.nn.Linear(2, 2).cuda(), lambda: ember.cuda.synchronize()):
        with pytest.raises(NotImplementedError) as e:
            fn()
        assert str(e.value).endswith(why), str(e.value)


def test_unknown_device():
    raises(RuntimeError, lambda: ember.zeros(2, device="tpu"), "tpu")


# ---- factories ----

@pytest.mark.parametrize("args", [(0, 5, 0), (5, 0, 0.0), (0.0, 1.0, 0)], ids=str)
def test_arange_step_zero(args):
    raises(RuntimeError, lambda: ember.arange(*args), "arange", "step must be nonzero")


@pytest.mark.parametrize("args", [(5, 0), (0, 5, -1), (1.0, 0.5, 0.1)], ids=str)
def test_arange_step_of_wrong_sign(args):
    raises(RuntimeError, lambda: ember.arange(*args), "arange", "step sign")


def test_random_needs_float_dtype():
    raises(RuntimeError, lambda: ember.rand(2, dtype=ember.int64), "rand", "floating point")
    raises(RuntimeError, lambda: ember.randn(2, dtype=ember.bool), "randn", "floating point")


def test_int_overflow():
    raises(RuntimeError, lambda: ember.tensor([1, 2]) + 2**64, "overflow")
    raises(RuntimeError, lambda: ember.full((2,), float("nan"), dtype=ember.int64), "int64")
    raises(RuntimeError, lambda: ember.tensor(float("inf"), dtype=ember.int64), "overflow")


def test_a_pickled_cuda_tensor_needs_cuda_to_unpickle():
    """A tensor pickled on "cuda" names its device; where CUDA is missing,
    unpickling says so and how to load it on the CPU, rather than putting
    it elsewhere silently (PyTorch raises likewise)."""
    import pickle

    from ember._tensor import _rebuild_tensor
    data = pickle.dumps((_rebuild_tensor, (b"\x00\x00\x80\x3f", "float32", (1,), "cuda:0")))
    fn, args = pickle.loads(data)
    if ember.cuda.is_available():
        assert fn(*args).device.type == "cuda"
    else:
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            fn(*args)
    with pytest.raises(ValueError, match="only 'cuda' tensors"):
        fn(b"\x00\x00\x80\x3f", "float32", (1,), "tpu")
