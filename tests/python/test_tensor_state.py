"""State a program changes outside ops: the random stream's state
(get_rng_state, set_rng_state, fork_rng, Generator states) and a tensor's
own size (resize_), against PyTorch where PyTorch fixes the answer."""

import numpy as np
import pytest

import ember
from torchdiff import arr, check


def test_rng_state_round_trips_and_repeats_draws():
    ember.manual_seed(5)
    state = ember.get_rng_state()
    assert state.dtype == ember.uint8 and tuple(state.shape) == (16,)
    a = ember.randn(4)
    ember.set_rng_state(state)
    np.testing.assert_array_equal(ember.randn(4).numpy(), a.numpy())


def test_manual_seed_returns_the_default_generator():
    g = ember.manual_seed(3)
    assert g is ember.default_generator and ember.initial_seed() == 3
    np.testing.assert_array_equal(ember.rand(3, generator=g).numpy(),
                                  (ember.manual_seed(3), ember.rand(3))[1].numpy())


def test_fork_rng_restores_the_stream():
    ember.manual_seed(1)
    with ember.random.fork_rng():
        ember.rand(10)
    after = ember.rand(2)
    ember.manual_seed(1)
    np.testing.assert_array_equal(after.numpy(), ember.rand(2).numpy())


def test_generator_state():
    g = ember.Generator().manual_seed(9)
    st = g.get_state()
    x = ember.rand(3, generator=g)
    g.set_state(st)
    np.testing.assert_array_equal(ember.rand(3, generator=g).numpy(), x.numpy())


def test_a_pytorch_state_is_refused_by_name():
    with pytest.raises(RuntimeError, match="16-byte"):
        ember.set_rng_state(ember.zeros(5056, dtype=ember.uint8))
    with pytest.raises(TypeError, match="uint8"):
        ember.set_rng_state(ember.zeros(16))


def test_reading_the_state_inside_a_compiled_function_runs_eagerly():
    f = ember.compile(lambda x: x + ember.get_rng_state().float().sum())
    x = ember.ones(2)
    f(x)
    f(x)
    assert f._stats()["compiled_calls"] == 0


def test_resize_keeps_contents_and_views_and_grows():
    x = ember.arange(6.0).reshape(2, 3)
    v = x.view(6)
    assert x.resize_(3, 2) is x
    assert x.tolist() == np.arange(6.0).reshape(3, 2).tolist()
    x.resize_(4, 4)
    assert tuple(x.shape) == (4, 4) and x.is_contiguous()
    assert x.reshape(-1)[:6].tolist() == list(range(6))
    assert v.tolist() == list(range(6))  # (a view of the old part stays valid)
    x.resize_(0)
    assert x.numel() == 0


def test_resize_will_not_grow_memory_numpy_may_still_read():
    x = ember.ones(3)
    a = x.numpy()
    with pytest.raises(RuntimeError, match="does not own"):
        x.resize_(1000)  # (a would read freed memory)
    assert a.sum() == 3


def test_resize_refuses_what_pytorch_refuses_and_foreign_memory():
    with pytest.raises(RuntimeError, match="require grad"):
        ember.ones(2, requires_grad=True).resize_(5)
    y = ember.from_numpy(np.ones(3, dtype=np.float32))
    with pytest.raises(RuntimeError, match="does not own"):
        y.resize_(100)
    y.resize_(2)  # (shrinking needs no new memory)


def test_printing_does_not_pin_memory():
    x = ember.ones(3)
    repr(x)
    x.resize_(10)


def test_resize_as_and_sum_to_size():
    check(lambda m, x, y: x.clone().resize_as_(y).shape, arr("float32", (2, 3)), arr("float32", (3, 2)))
    check(lambda m, x: x.sum_to_size(3, 1), arr("float32", (2, 3, 4)))
    check(lambda m, x: x.sum_to_size(()), arr("float32", (2, 3)))
    check(lambda m, x: x.sum_to_size(2, 5), arr("float32", (2, 3)))  # (refused by both)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(-1, 1), (1, -1), (-1, 2, 0, -1), (2, -1)])
def test_negative_padding_crops_as_pytorch(mode, pad):
    shape = (1, 2, 5) if len(pad) == 2 else (1, 2, 4, 5)  # (PyTorch 1.13 pads n dims of (n + 2)-d inputs)
    check(lambda m, x: m.nn.functional.pad(x, pad, mode=mode), arr("float32", shape))


def test_numbers_and_casts_as_pytorch():
    check(lambda m: m.add(2.5, 3.5))
    check(lambda m: m.mul(True, 2))
    check(lambda m: m.div(2, 3))
    check(lambda m, x: x.float(memory_format=m.channels_last).stride(), arr("float64", (2, 3, 4, 5)))
    check(lambda m, x: (x.mT, x.mH, x.H), arr("float32", ()))
    check(lambda m, x: x.H, arr("float32", (3,)))  # (refused by both)
