"""Compiled functions never freeze Python state silently (issue 39, items 1
and 2): every value a trace reads from outside its arguments (globals,
builtins, closure cells, attributes, dict and list items, whole lists and
dicts) is guarded, so a change traces again; every side effect a replay
would skip (stores into state, mutating methods, print, random, time)
makes the call run eagerly, with one warning naming the line. Each test
runs the function eagerly and compiled through the same changes and
compares every result."""

import dataclasses
import random
import types
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember


def same(a, b):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def run_both(fn, steps, x=None):
    """fn eagerly and compiled, step() (which changes state) before each
    call; returns the compiled function and the warnings it gave."""
    cf = ember.compile(fn)
    x = ember.arange(4.0) if x is None else x
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for step in steps:
            step()
            want = fn(x)
            got = cf(x)
            same(got, want)
    return cf, [str(w.message) for w in rec if "ember.compile" in str(w.message)]


def ran_compiled(cf):
    return cf._stats()["compiled_calls"] > 0


# ---------------------------------------------------------------- reads

SCALE = 2.0
W = ember.ones(4)
CFG = {"act": "relu", "k": 1.5}
LIST = [1.0, 2.0]
FUNCS = [lambda t: t + 1]


def set_global(name, value):
    globals()[name] = value


def test_a_module_global_float():
    def f(x):
        return x * SCALE
    cf, msgs = run_both(f, [lambda: None, lambda: set_global("SCALE", 3.0), lambda: None,
                            lambda: set_global("SCALE", 2.0)])
    assert ran_compiled(cf) and msgs == []


def test_a_global_rebound_to_another_tensor():
    def f(x):
        return x * W
    cf, _ = run_both(f, [lambda: None, lambda: set_global("W", ember.full((4,), 5.0)), lambda: None])
    assert ran_compiled(cf)


def test_a_closure_cell():
    k = 2.0

    def f(x):
        return x + k

    def change():
        nonlocal k
        k = 5.0
    cf, _ = run_both(f, [lambda: None, lambda: None, change, lambda: None])
    assert ran_compiled(cf)


def test_a_dict_item_read_in_a_branch():
    def f(x):
        if CFG["act"] == "relu":
            return (x - 1).relu() * CFG["k"]
        return (x - 1).tanh()
    cf, _ = run_both(f, [lambda: None, lambda: CFG.__setitem__("act", "tanh"), lambda: None,
                         lambda: CFG.__setitem__("act", "relu"), lambda: CFG.__setitem__("k", 0.5)])
    assert ran_compiled(cf)


def test_dict_get_and_getattr_are_reads_too():
    ns = types.SimpleNamespace(scale=2.0)

    def f(x):
        return x * CFG.get("k", 1.0) + getattr(ns, "scale")
    cf, _ = run_both(f, [lambda: None, lambda: CFG.__setitem__("k", 4.0), lambda: setattr(ns, "scale", -1.0),
                         lambda: None])
    assert ran_compiled(cf)


def test_a_plain_attribute_of_a_module():
    class Scaled(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.alpha = 2.0
            self.lin = ember.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * self.alpha

    ember.manual_seed(0)
    m = Scaled()
    cm = ember.compile(m)
    x = ember.randn(2, 4)
    with ember.no_grad():
        for alpha in (2.0, 2.0, 4.0, 4.0):
            m.alpha = alpha
            same(cm(x), m(x))


def test_attributes_of_config_objects_dataclasses_slots_and_classes():
    @dataclasses.dataclass
    class Cfg:
        scale: float = 2.0

    @dataclasses.dataclass
    class Slotted:
        __slots__ = ("shift",)
        shift: float

    class Consts:
        BIAS = 1.0

    cfg, sl = Cfg(), Slotted(0.5)

    def f(x):
        return x * cfg.scale + sl.shift + Consts.BIAS
    cf, _ = run_both(f, [lambda: None, lambda: setattr(cfg, "scale", 3.0), lambda: setattr(sl, "shift", -2.0),
                         lambda: setattr(Consts, "BIAS", 7.0), lambda: None])
    assert ran_compiled(cf)


def test_list_items_and_lists_iterated():
    def f(x):
        for g in FUNCS:
            x = g(x)
        return x * LIST[0] + len(LIST)
    cf, _ = run_both(f, [lambda: None, lambda: LIST.__setitem__(0, 5.0), lambda: LIST.append(3.0),
                         lambda: FUNCS.append(lambda t: t * 2), lambda: None])
    assert ran_compiled(cf)


PAIR = [1.0, 2.0]
NAMES = {1.0}


def test_unpacked_and_operand_lists_and_sets_are_read_whole():
    def unpack(x):
        a, b = PAIR
        return x * a + b

    def star(x):
        return (lambda a, b: x * a - b)(*PAIR)

    def concat(x):
        return x * (PAIR + [0.0])[0]

    def compare(x):
        return x * float(PAIR == [1.0, 2.0])

    def a_set(x):
        return x * sum(NAMES) + float(1.0 in NAMES)

    def change():
        PAIR[0] = PAIR[0] + 3.0
        NAMES.add(len(NAMES) + 1.0)
    for f in (unpack, star, concat, compare, a_set):
        PAIR[:] = [1.0, 2.0]
        NAMES.clear()
        NAMES.add(1.0)
        cf, msgs = run_both(f, [lambda: None, lambda: None, change, lambda: None, change])
        assert ran_compiled(cf) and msgs == [], (f.__name__, msgs)


def test_contents_no_guard_watches_run_eagerly():
    import array
    import collections
    arr = np.ones(4, np.float32)
    dq, buf, ints = collections.deque([1.0]), bytearray(b"\x01"), array.array("d", [1.0])
    readers = {
        "subscript": lambda x: x * float(arr[0]),
        "method": lambda x: x * float(arr.sum()),
        "numpy function": lambda x: x * float(np.sum(arr)),
        "operand": lambda x: x * float((arr * 2)[1]),
        "view": lambda x: x * float(arr.T[2]),
        "tolist": lambda x: x + ember.tensor(arr.tolist()),
        "deque": lambda x: x * dq[0],
        "bytearray": lambda x: x * buf[0],
        "array.array": lambda x: x * ints[0],
    }

    def change():
        arr[:] = arr + 1
        dq[0] += 1
        buf[0] += 1
        ints[0] += 1
    for name, f in readers.items():
        cf, msgs = run_both(f, [lambda: None, lambda: None, change, lambda: None])
        assert not ran_compiled(cf), name
        assert len(msgs) == 1 and "reads the contents of a" in msgs[0], (name, msgs)


def test_a_numpy_arrays_shape_is_guarded_and_from_numpy_stays_compiled():
    arr = np.ones(4, np.float32)

    def f(x):
        return x * arr.shape[0] + ember.from_numpy(arr)
    cf, msgs = run_both(f, [lambda: None, lambda: None, lambda: arr.__setitem__(0, 7.0), lambda: None])
    assert ran_compiled(cf) and msgs == []

    def g(x):
        return x * arr.shape[-1]
    cf, msgs = run_both(g, [lambda: None, lambda: None, lambda: setattr(arr, "shape", (2, 2)), lambda: None])
    assert ran_compiled(cf) and msgs == []


def test_arrays_the_call_makes_stay_its_own_through_star_args():
    def f(x):  # (numpy passes the arrays it makes on through *args tuples)
        n = np.broadcast_shapes((4,), (1,))[0]
        return x * n + float(np.ones(3)[1])
    cf, msgs = run_both(f, [lambda: None] * 3)
    assert ran_compiled(cf) and msgs == []


def test_print_through_a_starred_call_is_not_dropped(capsys):
    parts = ["a", "b"]

    def f(x):
        print(*parts)
        return x + 1
    cf, msgs = run_both(f, [lambda: None] * 3)
    assert capsys.readouterr().out.count("a b") == 6
    assert not ran_compiled(cf) and len(msgs) == 1 and "print()" in msgs[0]


def test_a_builtin_shadowed_by_a_global():
    def f(x):
        return x * abs(-2.0)
    cf, _ = run_both(f, [lambda: None, lambda: set_global("abs", lambda v: 10.0), lambda: None])
    del globals()["abs"]
    assert ran_compiled(cf)


def test_objects_the_call_makes_need_no_guard_and_no_fallback():
    def f(x):
        parts = []
        for i in range(3):
            parts.append(x * i)
        d = {"a": parts[1]}
        d["b"] = d["a"] + 1
        return d["b"] + parts[2]
    cf, msgs = run_both(f, [lambda: None] * 3)
    assert ran_compiled(cf) and msgs == []
    report = ember.compiler.explain(cf, ember.arange(4.0), print_report=False).text
    assert "guards on Python state" in report and "item 'a'" not in report


def test_explain_lists_each_guard_with_its_line():
    def f(x):
        return x * SCALE + CFG["k"]
    cf = ember.compile(f)
    cf(ember.ones(4))
    report = ember.compiler.explain(cf, ember.ones(4), print_report=False).text
    assert "global SCALE (" in report and "test_compile_state.py:" in report
    assert "item 'k' of a dict" in report


def test_the_cache_limit_warning_names_the_value_that_changed():
    def f(x):
        return x * SCALE
    cf = ember.compile(f, cache_limit=2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for v in (1.0, 2.0, 3.0, 4.0):
            set_global("SCALE", v)
            same(cf(ember.ones(4)), ember.ones(4) * v)
    set_global("SCALE", 2.0)
    msgs = [str(w.message) for w in rec if "cache limit" in str(w.message)]
    assert len(msgs) == 1 and "global SCALE" in msgs[0], msgs


# ---------------------------------------------------------------- side effects

LOG = []
COUNT = 0


def test_appending_to_a_list_that_outlives_the_call_runs_eagerly():
    def f(x):
        LOG.append(1)
        return x * 2
    LOG.clear()
    cf, msgs = run_both(f, [lambda: None] * 4)
    assert len(LOG) == 8  # (each call appended, eager and "compiled" alike)
    assert len(msgs) == 1 and "list.append" in msgs[0] and "test_compile_state.py:" in msgs[0], msgs
    assert not ran_compiled(cf)


def test_a_global_counter_runs_eagerly():
    def f(x):
        global COUNT
        COUNT += 1
        return x * COUNT
    set_global("COUNT", 0)
    e = [f(ember.ones(2)).tolist() for _ in range(3)]
    set_global("COUNT", 0)
    cf = ember.compile(f)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        c = [cf(ember.ones(2)).tolist() for _ in range(3)]
    assert c == e and COUNT == 3
    assert any("assigns the global COUNT" in str(w.message) for w in rec)


@pytest.mark.parametrize("effect", ["random", "print", "time", "attribute", "item", "nonlocal"])
def test_side_effects_are_never_dropped(effect, capsys):
    state = types.SimpleNamespace(calls=0)
    box = {"n": 0}
    n = 0

    def f(x):
        nonlocal n
        if effect == "random":
            return x * random.random()
        if effect == "print":
            print("hello")
        if effect == "time":
            import time
            return x * (time.perf_counter() > 0)
        if effect == "attribute":
            state.calls += 1
        if effect == "item":
            box["n"] += 1
        if effect == "nonlocal":
            n += 1
        return x + 1
    cf = ember.compile(f)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        outs = [cf(ember.ones(2)) for _ in range(3)]
    assert not ran_compiled(cf)
    assert sum("ember.compile" in str(w.message) for w in rec) == 1
    if effect == "random":
        assert len({o.tolist()[0] for o in outs}) == 3  # a fresh draw each call
    if effect == "print":
        assert capsys.readouterr().out.count("hello") == 3
    assert state.calls == (3 if effect == "attribute" else 0)
    assert box["n"] == (3 if effect == "item" else 0)
    assert n == (3 if effect == "nonlocal" else 0)


def test_state_cached_on_the_first_call_compiles_from_the_second():
    # the word language model's TransformerModel: `if self.src_mask is None
    # or ...: self.src_mask = mask` runs once; the calls after it only read
    # the cached mask, and compile (before, the first call's side effect
    # made every later call run eagerly)
    class Masked(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ember.nn.Linear(4, 4)
            self.mask = None

        def forward(self, x):
            if self.mask is None or self.mask.size(0) != x.shape[0]:
                self.mask = ember.tril(ember.ones(x.shape[0], 4))
            return self.fc(x) * self.mask

    m = Masked()
    cm = ember.compile(m)
    xs = [ember.randn(3, 4) for _ in range(4)] + [ember.randn(5, 4) for _ in range(3)]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        outs = [cm(x) for x in xs]
    for x, o in zip(xs, outs):  # (the mask for each size, as eager computes it)
        np.testing.assert_allclose(o.detach().numpy(), m.fc(x).detach().numpy() *
                                   np.tril(np.ones((x.shape[0], 4))), rtol=1e-6)
    stats = cm._compiled._stats() if hasattr(cm, "_compiled") else cm._stats()
    # each size: a trace that caches the mask (eager), a trace that reads it
    # (it compiles), then compiled calls: calls 3, 4 and 7
    assert stats["compiled_calls"] == 3 and stats["traces"] == 4 and stats["eager_calls"] == 0, stats
    assert any("sets the attribute mask" in str(w.message) for w in rec)


def test_a_counter_on_self_still_counts_every_call():
    # the guard on self.calls fails on every call: each is traced (eagerly)
    # until the cache limit, then runs eagerly; none is dropped
    class Counting(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    m = Counting()
    cm = ember.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cm(ember.ones(2)).tolist() for _ in range(12)]
    assert m.calls == 12 and outs == [[float(i)] * 2 for i in range(1, 13)]


def test_a_method_that_appends_to_self_runs_eagerly():
    class Tracker(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.history = []

        def forward(self, x):
            self.history.append(1)
            return x * 2

    m = Tracker()
    cm = ember.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            cm(ember.ones(2))
    assert len(m.history) == 3


# ---------------------------------------------------------------- generated programs

SOURCES = ["g", "cell", "attr", "item", "list"]


@st.composite
def programs(draw):
    reads = draw(st.lists(st.sampled_from(SOURCES), min_size=1, max_size=4))
    changes = draw(st.lists(st.sampled_from(SOURCES + ["none"]), min_size=10, max_size=10))
    values = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, -3.0]), min_size=10, max_size=10))
    branch = draw(st.sampled_from(SOURCES))
    return reads, changes, values, branch


GEN = {"g": 1.0}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_functions_reading_state_that_changes_between_calls(prog):
    """Small functions reading globals, closure cells, attributes, dict and
    list items (and branching on one), that change between calls: compiled
    equal to eager over 10 calls each."""
    reads, changes, values, branch = prog
    cell = [1.0]
    obj = types.SimpleNamespace(a=1.0)
    d = {"k": 1.0}
    lst = [1.0]
    c = 1.0
    GEN["g"] = 1.0

    def value(src):
        return {"g": lambda: GEN["g"], "cell": lambda: c, "attr": lambda: obj.a, "item": lambda: d["k"],
                "list": lambda: lst[0]}[src]()

    def f(x):
        y = x
        for src in reads:
            y = y * value(src)
        if value(branch) > 0:
            return y + 1
        return y - 1

    def change(src, v):
        nonlocal c
        if src == "g":
            GEN["g"] = v
        elif src == "cell":
            c = v
        elif src == "attr":
            obj.a = v
        elif src == "item":
            d["k"] = v
        elif src == "list":
            lst[0] = v

    cf = ember.compile(f, cache_limit=64)
    x = ember.arange(3.0)
    for src, v in zip(changes, values):
        if src != "none":
            change(src, v)
        same(cf(x), f(x))
    del cell


def test_settings_of_embers_own_modules():
    """ember's module code is not watched instruction by instruction, but a
    module's plain settings it reads (a slope, a dropout probability) are
    guarded all the same."""
    act = ember.nn.LeakyReLU(0.1)
    drop = ember.nn.Dropout(0.0)
    ca, cd = ember.compile(act), ember.compile(drop)
    x = ember.tensor([-1.0, 2.0])
    with ember.no_grad():
        for slope in (0.1, 0.1, 0.5):
            act.negative_slope = slope
            same(ca(x), act(x))
    for p in (0.0, 0.0, 1.0):
        drop.p = p
        same(cd(ember.ones(4)), drop(ember.ones(4)))


# ---------------------------------------------------------------- escape hatches (item 5)

def test_disable_keeps_a_function_out_of_graphs():
    calls = []

    @ember.compiler.disable
    def helper(t):
        calls.append(1)  # (a side effect the helper may have: it always runs)
        return t * 2

    def f(x):
        return helper(x) + 1
    cf = ember.compile(f)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            same(cf(ember.ones(2)), f(ember.ones(2)))
    assert len(calls) == 6 and not ran_compiled(cf)
    msgs = [str(w.message) for w in rec if "ember.compile" in str(w.message)]
    assert len(msgs) == 1 and "keeps out of compiled graphs" in msgs[0] and "test_compile_state.py:" in msgs[0]
    assert helper(ember.ones(1)).tolist() == [2.0]
    # the switch without an argument is the global one still
    ember.compiler.disable()
    try:
        assert not ember.compiler.is_enabled()
    finally:
        ember.compiler.enable()


def test_fullgraph_raises_where_a_call_would_run_eagerly():
    def f(x):
        print("side effect")
        return x * 2
    cf = ember.compile(f, fullgraph=True)
    with pytest.raises(RuntimeError, match=r"fullgraph=True.*print\(\).*test_compile_state\.py:"):
        cf(ember.ones(2))
    with pytest.raises(RuntimeError, match="fullgraph=True"):  # (the eager specialisation, again)
        cf(ember.ones(2))

    def g(x):
        return x * SCALE
    cg = ember.compile(g, fullgraph=True)
    for _ in range(3):
        same(cg(ember.ones(2)), ember.ones(2) * SCALE)
    assert ran_compiled(cg)
