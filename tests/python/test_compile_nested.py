"""Compiled functions take and return nested tuples, lists and dicts: the
structure (container types, lengths, dict keys) is guarded, the tensors
inside are inputs and results like any other."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def step(batch, params, *, opts):
    x, y = batch["x"], batch["y"]
    h = (x @ params[0]).relu() @ params[1]
    err = h - y
    return {"loss": (err * err).mean() * opts["scale"], "stats": (err.abs().amax(), None),
            "outs": [h, err]}


def data(n=4):
    ember.manual_seed(n)
    batch = {"x": ember.randn(n, 5), "y": ember.randn(n, 2)}
    params = [ember.randn(5, 7), ember.randn(7, 2)]
    return batch, params


def same(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for u, v in zip(a, b):
            same(u, v)
    elif a is None:
        assert b is None
    else:
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_nested_inputs_and_outputs_compile_and_match_eager():
    cf = ember.compile(step)
    for n in (4, 4, 4):
        batch, params = data(n)
        same(cf(batch, params, opts={"scale": 0.5}), step(batch, params, opts={"scale": 0.5}))
    specs = cf._specializations()
    assert len(specs) == 1 and specs[0]["backend"] != "eager"
    assert cf._stats()["hits"] == 2
    guards = specs[0]["guards"]
    assert "batch: str == 'dict of 'x', 'y''" in guards
    assert "params[1]: tensor dtype=f32" in guards and "opts['scale']: float == 0.5" in guards


@pytest.mark.parametrize("change", ["batch size", "list length", "dict keys", "scalar in dict",
                                    "tuple for list"])
def test_structure_changes_miss_the_guards(change):
    cf = ember.compile(step)
    batch, params = data()
    opts = {"scale": 0.5}
    cf(batch, params, opts=opts)
    cf(batch, params, opts=opts)
    if change == "batch size":
        batch, params = data(6)
    elif change == "list length":
        params = params + [ember.ones(1)]
    elif change == "dict keys":
        batch = {"x": batch["x"], "y": batch["y"], "w": ember.ones(1)}
    elif change == "scalar in dict":
        opts = {"scale": 2.0}
    else:
        params = tuple(params)
    same(cf(batch, params, opts=opts), step(batch, params, opts=opts))
    assert cf._stats()["misses"] == 2  # a new specialisation, not a wrong answer


def test_inputs_returned_inside_structures_are_the_callers_objects():
    @ember.compile
    def f(pair):
        return {"first": pair[0], "sum": pair[0] + pair[1]}
    a, b = ember.randn(3), ember.randn(3)
    for _ in range(3):
        r = f((a, b))
        assert r["first"] is a
