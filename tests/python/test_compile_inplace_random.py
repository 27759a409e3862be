"""Generated programs mixing in-place ops, views, aliases, clones and
returns (issue 39, item 3): compiled against eager over several calls,
results, the state written in place, and what the results alias (checked
by updating the state afterwards and reading the results again). Whatever
ran compiled or fell back, no value may differ."""

import os
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import ember

# Each step: (name, code). `s` is the argument (a [2, 3] tensor written in
# place), `x` a second argument; the others are made as the program runs.
STEPS = [
    ("add", "s.add_(x)"),
    ("mul", "s.mul_(0.5)"),
    ("clamp", "s.clamp_(-1.0, 2.0)"),
    ("zero", "s.zero_()"),
    ("copy", "s.copy_(x * 3)"),
    ("clone", "t = s.clone()"),
    ("clone_mul", "t = s.clone(); t.mul_(2)"),
    ("times_one", "r = s * 1"),
    ("view", "v = s.view(6)"),
    ("view_write", "v = s.view(6); v.add_(1)"),
    ("row_write", "s[0].mul_(2)"),
    ("detach_write", "d = s.detach(); d.add_(0.25)"),
    ("data_write", "s.data.sub_(x)"),
    ("transpose_read", "r = s.t() * 2"),
    ("relu", "s.relu_()"),
    ("exp_inter", "t = (s + 1).exp_()"),
    ("setitem_row", "s[1] = 0.5"),
    ("slice_add", "s[:, 1:].add_(x[:, 1:])"),
    ("column_write", "s.t()[0].mul_(3)"),
    ("strided_write", "s.view(6)[::2].sub_(1)"),
    ("view_read_after", "v = s[0]; s.add_(1); r = v * 2"),
    ("inter_view_write", "t = s * 2; t[0].zero_(); r = t + 0"),
    ("inter_view_kept", "t = s + 1; v = t[1]; t.mul_(3)"),
]
RESULTS = ["s", "s.clone()", "s.view(6)", "s * 1", "-(-s)", "s.detach()", "s[1:]", "s.t()", "s[:, 0]"]


def build(steps, results):
    lines = ["def f(s, x):", "    t = r = v = d = None"]
    lines += [f"    {code}" for _, code in steps]
    names = {"t", "r", "v", "d"}
    made = set()
    for _, code in steps:
        made |= {n for n in names if f"{n} = " in code}
    outs = list(results) + sorted(made) or ["s * 1"]
    lines.append(f"    return ({', '.join(outs)},)")
    ns = {}
    exec("\n".join(lines), ns)
    return ns["f"], "\n".join(lines)


@settings(max_examples=int(os.environ.get("EMBER_GRAPH_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=6), st.lists(st.sampled_from(RESULTS), max_size=3))
def test_generated_in_place_programs_match_eager(steps, results):
    f, src = build(steps, results)
    cf = ember.compile(f)
    e_state, c_state = ember.arange(6.0).reshape(2, 3) - 2, ember.arange(6.0).reshape(2, 3) - 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(4):
            x = ember.full((2, 3), 0.5 + k)
            want, got = f(e_state, x), cf(c_state, x)
            for w, g in zip(want, got):
                np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=src)
            np.testing.assert_array_equal(c_state.numpy(), e_state.numpy(), err_msg=src)
    # what a result aliases: an update of the state shows in it, or does not, alike
    e_state.add_(100.0)
    c_state.add_(100.0)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg="after updating the state\n" + src)


def test_a_freed_temporary_does_not_lend_its_memory_to_a_later_one():
    # (found by the generator above under ASan): the first `s * 2` is written
    # through a view and dies; the second one gets its memory back from the
    # allocator's cache, and once read the first one's values
    f, src = build([STEPS[0], STEPS[21], STEPS[5], STEPS[2], STEPS[21]], [])
    cf = ember.compile(f)
    e_state, c_state = ember.arange(6.0).reshape(2, 3) - 2, ember.arange(6.0).reshape(2, 3) - 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            x = ember.full((2, 3), 1.0 + k)
            for w, g in zip(f(e_state, x), cf(c_state, x)):
                np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=src)
