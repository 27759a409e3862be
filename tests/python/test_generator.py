"""ember.Generator: seeded streams for rand, randn, randint and randperm that
are independent of ember's global stream (ember.manual_seed) and of each
other, and that stay so when other threads draw at the same time."""

import sys
import threading

import numpy as np
import pytest
import torch

import ember

DRAWS = {
    "rand": lambda g: ember.rand(2, 3, generator=g),
    "rand f64": lambda g: ember.rand(5, dtype=ember.float64, generator=g),
    "rand bf16": lambda g: ember.rand(5, dtype=ember.bfloat16, generator=g),
    "randn": lambda g: ember.randn(7, generator=g),
    "randint": lambda g: ember.randint(-3, 9, (6,), generator=g),
    "randperm": lambda g: ember.randperm(20, generator=g),
}


def values(t):
    return t.float().tolist() if t.dtype == ember.bfloat16 else t.tolist()


def draw_all(g):
    return [values(draw(g)) for draw in DRAWS.values()]


@pytest.mark.parametrize("op", list(DRAWS))
def test_same_seed_same_draws_and_the_stream_advances(op):
    g = ember.Generator().manual_seed(123)
    first, second = values(DRAWS[op](g)), values(DRAWS[op](g))
    assert first != second
    g.manual_seed(123)
    assert [values(DRAWS[op](g)), values(DRAWS[op](g))] == [first, second]


def test_a_generator_follows_the_stream_ember_manual_seed_starts():
    # one stream model: Generator().manual_seed(s) draws what the global
    # stream draws after ember.manual_seed(s), op after op
    ember.manual_seed(77)
    global_draws = [values(draw(None)) for draw in DRAWS.values()]
    assert draw_all(ember.Generator().manual_seed(77)) == global_draws


def test_generator_draws_leave_the_global_stream_alone():
    ember.manual_seed(5)
    expected = ember.rand(100).tolist()
    ember.manual_seed(5)
    draw_all(ember.Generator().manual_seed(1))
    assert ember.rand(100).tolist() == expected


def test_global_draws_and_other_generators_leave_a_generator_alone():
    expected = draw_all(ember.Generator().manual_seed(9))
    g, other = ember.Generator().manual_seed(9), ember.Generator().manual_seed(9)
    got = []
    for draw in DRAWS.values():
        ember.rand(50)
        draw(other)
        got.append(values(draw(g)))
    assert got == expected


def test_fresh_generator_starts_from_the_default_seed_as_torch():
    g = ember.Generator()
    assert g.initial_seed() == torch.Generator().initial_seed() == 67280421310721
    assert g.device == ember.device("cpu")


def test_manual_seed_returns_the_generator_and_takes_any_int():
    g = ember.Generator()
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1  # modulo 2**64, as torch
    assert g.manual_seed(np.int64(4)).initial_seed() == 4
    for bad in (1.5, "1", True, None):
        with pytest.raises(TypeError, match="seed must be an int"):
            g.manual_seed(bad)


def test_only_cpu_generators():
    assert ember.Generator("cpu").device == ember.device("cpu")
    with pytest.raises(RuntimeError, match="CPU only"):
        ember.Generator(device="cuda")


@pytest.mark.parametrize("op", list(DRAWS))
def test_other_generator_kinds_are_refused_by_name(op):
    with pytest.raises(TypeError, match=r"generator must be an ember.Generator, got "
                                        r"torch._C.Generator"):
        DRAWS[op](torch.Generator())


def test_generator_draws_can_be_leaves_requiring_grad():
    g = ember.Generator().manual_seed(4)
    w = ember.randn(3, generator=g, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    assert w.tolist() == ember.randn(3, generator=ember.Generator().manual_seed(4)).tolist()


def test_non_random_factories_take_no_generator():
    with pytest.raises(TypeError, match="unexpected keyword argument 'generator'"):
        ember.zeros(2, generator=ember.Generator())


def test_draws_stay_independent_while_other_threads_draw():
    # A generator's state is swapped in for the global one for the length of
    # one C call; a thread switch inside that window would mix the streams.
    # With both kinds of draw racing, each stream must still be exactly what
    # it is when drawn alone.
    rounds = 300
    g_alone = ember.Generator().manual_seed(2)
    expected_g = [ember.randperm(64, generator=g_alone).tolist() for _ in range(rounds)]
    ember.manual_seed(3)
    for _ in range(rounds):
        ember.rand(64)
    expected_next_global = ember.rand(8).tolist()

    ember.manual_seed(3)
    g = ember.Generator().manual_seed(2)
    got_g = []
    start = threading.Barrier(2)

    def global_draws():
        start.wait()
        for _ in range(rounds):
            ember.rand(64)

    def generator_draws():
        start.wait()
        for _ in range(rounds):
            got_g.append(ember.randperm(64, generator=g).tolist())

    threads = [threading.Thread(target=global_draws), threading.Thread(target=generator_draws)]
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython will
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert got_g == expected_g
    assert ember.rand(8).tolist() == expected_next_global
