"""Benchmarks must know what they timed: a row that says "compiled" is
checked to have run compiled code on every timed call.

    with ran_compiled(cf, "ember compiled"):
        t = median_ms(cf, ...)

fails (AssertionError naming the row and the fallback reasons) when a call
inside the block ran eagerly or traced, rather than running a compiled
specialisation."""

import contextlib


def _stats(fn):
    compiled = getattr(fn, "_compiled", fn)  # (a CompiledModule's function)
    return compiled._stats()


@contextlib.contextmanager
def ran_compiled(fn, row):
    before = _stats(fn)
    yield
    after = _stats(fn)
    eager = after["eager_calls"] - before["eager_calls"]
    traces = after["traces"] - before["traces"]
    ran = after["compiled_calls"] - before["compiled_calls"]
    assert ran > 0 and eager == 0 and traces == 0, (
        f"the row '{row}' timed {ran} compiled calls, {eager} eager calls and {traces} traces; "
        f"fallbacks: {after['fallbacks']}")


def median_ms_checked(call, n, row, warm=5):
    """bench_train.median_ms of call(), n timed calls after `warm` untimed
    ones (traces and compiles happen there); where call.compiled is a
    compiled function (a lambda around it carries it), every timed call is
    checked to have run it compiled."""
    from bench_train import median_ms
    fn = getattr(call, "compiled", None)
    if fn is None:
        return median_ms(call, n=n, warm=warm)
    for _ in range(warm):
        call()
    with ran_compiled(fn, row):
        return median_ms(call, n=n, warm=0)
