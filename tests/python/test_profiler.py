"""ember.profiler (and its legacy spelling ember.autograd.profiler), as
torch.profiler: the third layer of the dispatcher's interceptor stack
(issue 41, item 2) times every op the user runs, in place or not, the ops
a backward runs, and record_function's ranges."""

import json
import threading

import pytest

import ember
import ember.autograd.profiler
import ember.profiler as P


def names(prof):
    return [e.name for e in prof.events()]


def test_ops_in_order_with_their_shapes_and_backward():
    w = ember.randn(3, 4, requires_grad=True)
    x = ember.randn(2, 3)
    with P.profile(record_shapes=True) as prof:
        y = (x @ w).relu().sum()
        y.backward()
        x.add_(1)
    got = names(prof)
    assert got[:3] == ["ember::matmul", "ember::relu", "ember::sum"]
    assert got[-1] == "ember::add_"
    assert got.count("ember::matmul") == 2  # the forward's and the weight gradient's
    shapes = {e.name: e.input_shapes for e in prof.events()}
    assert shapes["ember::relu"] == [[2, 4]] and prof.events()[0].input_shapes == [[2, 3], [3, 4]]
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["ember::matmul"].count == 2
    assert all(e.cpu_time_total > 0 for e in prof.events())
    # nothing after the profile stops
    x.add_(1)
    assert names(prof)[-1] == "ember::add_" and len(prof.events()) == len(got)


def test_ranges_own_only_what_their_ops_do_not():
    a = ember.randn(64, 64)
    with P.profile() as prof:
        with P.record_function("outer"):
            b = a @ a
            with P.record_function("inner"):
                c = b.exp()
            d = c.sum()
    ev = {e.name: e for e in prof.events()}
    outer, inner = ev["outer"], ev["inner"]
    assert inner.cpu_children == [ev["ember::exp"]]
    assert set(e.name for e in outer.cpu_children) == {"ember::matmul", "inner", "ember::sum"}
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - sum(e.cpu_time_total for e in outer.cpu_children))
    assert 0 <= inner.self_cpu_time_total <= inner.cpu_time_total <= outer.cpu_time_total
    assert d.item() == pytest.approx(float(a.matmul(a).exp().sum().item()), rel=1e-5)


def test_the_table_sorts_groups_and_totals():
    a = ember.randn(8)
    with P.profile(record_shapes=True) as prof:
        for _ in range(3):
            a = a * 2
        b = ember.randn(2, 2) * 3
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert "Self CPU time total" in table and "ember::mul" in table
    rows = {a.key: a for a in prof.key_averages()}
    assert rows["ember::mul"].count == 4
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert sorted(a.count for a in by_shape if a.key == "ember::mul") == [1, 3]
    with pytest.raises(AttributeError, match="sort_by"):
        prof.key_averages().table(sort_by="no_such_column")
    total = prof.key_averages().total_average()
    assert total.count == len(prof.events()) and b.shape == (2, 2)


def test_a_chrome_trace_lists_every_event(tmp_path):
    with P.profile() as prof:
        with P.record_function("r"):
            ember.ones(3).neg()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    assert [e["name"] for e in trace] == names(prof)
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace)


def test_a_schedule_records_its_active_steps_and_saves_each_cycle():
    traces = []

    def ready(p):
        traces.append([e.name for e in p.events()])

    x = ember.ones(2)
    sched = P.schedule(wait=1, warmup=1, active=2, repeat=2)
    with P.profile(schedule=sched, on_trace_ready=ready) as prof:
        for step in range(10):
            x = x + float(step)  # one add per step, step 0 first
            prof.step()
    # cycles of 4 steps: waits at 0 and 4, warms up at 1 and 5, records 2-3 and 6-7
    assert traces == [["ember::add", "ember::add"], ["ember::add", "ember::add"]]
    assert [a for a in map(sched, range(9))] == [
        P.ProfilerAction.NONE, P.ProfilerAction.WARMUP, P.ProfilerAction.RECORD, P.ProfilerAction.RECORD_AND_SAVE,
        P.ProfilerAction.NONE, P.ProfilerAction.WARMUP, P.ProfilerAction.RECORD, P.ProfilerAction.RECORD_AND_SAVE,
        P.ProfilerAction.NONE]


def test_one_profile_at_a_time_and_no_cuda():
    with P.profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with P.profile():
                pass
    with pytest.raises(NotImplementedError, match="CUDA"):
        P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA])
    assert P.supported_activities() == {P.ProfilerActivity.CPU}


def test_ops_on_every_thread_are_recorded_apart():
    def work():
        ember.ones(4).exp()

    with P.profile() as prof:
        work()
        t = threading.Thread(target=work)
        t.start()
        t.join()
    exps = [e for e in prof.events() if e.name == "ember::exp"]
    assert len(exps) == 2 and exps[0].thread != exps[1].thread


def test_the_legacy_spelling_and_a_compiled_function():
    f = ember.compile(lambda a: (a * 2).sum())
    a = ember.randn(16)
    for _ in range(3):
        f(a)
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        r = f(a)
        s = (a * 2).sum()
    assert r.item() == pytest.approx(s.item(), rel=1e-6)
    got = names(prof)
    assert got[-2:] == ["ember::mul", "ember::sum"] and prof.events()[-2].input_shapes == [[16], []]
    if ember.compiler.has_llvm():
        # the compiled call's kernels are not ops: only the eager line shows
        assert got == ["ember::mul", "ember::sum"]
    else:
        # the interpreter runs each node's eager kernel, and they show
        assert "ember::sum" in got[:-2]
    with ember.autograd.profiler.profile(enabled=False) as off:
        a.neg()
    assert off.events() == []
