"""ember.profiler, as torch.profiler: times every op the program runs
eagerly, on every thread, and the ranges it marks with record_function.

    with ember.profiler.profile(record_shapes=True) as prof:
        with ember.profiler.record_function("step"):
            loss = model(x).sum()
            loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))

The profiler is a layer of the dispatcher's interceptor stack (runtime/
profiler.c): it sees each op the user runs (an op built from others is one
op, as autograd records it) with its autograd recording, and the ops a
backward runs. A call that runs compiled on LLVM shows none of its
kernels, which are not ops (mark it with record_function; EMBER_PROFILE
times the nodes inside it); on the interpreter backend its nodes run as
eager ops, and show. Times are in microseconds, as PyTorch prints them.
"""

import enum
import functools
import json
import os
import socket
import threading
import time

from . import _C

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler", "EventList", "FunctionEvent", "FunctionEventAvg"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities ember can profile: the CPU (no CUDA device yet)."""
    return {ProfilerActivity.CPU}


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """PyTorch's schedule: after skip_first steps, cycles of `wait` idle
    steps, `warmup` steps, `active` recorded ones (the last one saves),
    `repeat` times (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("schedule: wait, warmup, repeat and skip_first must be >= 0 and active > 0")

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """on_trace_ready handler writing each trace as Chrome trace JSON into
    dir_name (TensorBoard's profiler plugin and chrome://tracing read it)."""
    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{name}.{time.time_ns() // 1000000}.pt.trace.json")
        prof.export_chrome_trace(path + (".gz" if use_gzip else ""))
    return handler


class FunctionEvent:
    """One op or range: its name, start and length (us), thread, input
    shapes (with record_shapes) and the time of its own, outside the
    events it contains (self_cpu_time_total)."""

    def __init__(self, name, start_us, time_us, thread, input_shapes=None, is_range=False):
        self.name, self.key = name, name
        self.time_range_start, self.cpu_time_total = start_us, time_us
        self.self_cpu_time_total = time_us
        self.thread, self.input_shapes, self.is_range = thread, input_shapes or [], is_range
        self.count = 1
        self.cpu_children = []

    @property
    def cpu_time(self):
        return self.cpu_time_total

    def __repr__(self):
        return (f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.3f}us "
                f"thread={self.thread} input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one name (and input shapes, when grouped by them)
    summed: count, total and own time, and the mean."""

    def __init__(self, key, input_shapes=None):
        self.key, self.input_shapes = key, input_shapes
        self.count, self.cpu_time_total, self.self_cpu_time_total = 0, 0.0, 0.0

    def add(self, e):
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


def _us(v):
    return f"{v / 1000:.3f}ms" if v >= 1000 else f"{v:.3f}us"


class EventList(list):
    """A list of FunctionEvent or FunctionEventAvg, with PyTorch's table
    and averages."""

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = {}
        for e in self:
            k = (e.key, str(e.input_shapes)) if group_by_input_shape else e.key
            if k not in groups:
                groups[k] = FunctionEventAvg(e.key, e.input_shapes if group_by_input_shape else None)
            groups[k].add(e)
        return EventList(groups.values())

    def total_average(self):
        avg = FunctionEventAvg("Total")
        for e in self:
            avg.count += e.count
            avg.cpu_time_total += e.cpu_time_total
            avg.self_cpu_time_total += e.self_cpu_time_total
        return avg

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55, header=None,
              top_level_events_only=False):
        rows = list(self)
        if sort_by:
            key = sort_by.replace("cpu_time_total", "cpu_time_total").replace("count", "count")
            if not rows or not hasattr(rows[0], key):
                raise AttributeError(f"table(sort_by={sort_by!r}): no such column (sort by cpu_time_total, "
                                     "self_cpu_time_total, cpu_time or count)")
            rows.sort(key=lambda e: getattr(e, key), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = self.self_cpu_time_total or 1.0
        shapes = any(getattr(e, "input_shapes", None) for e in rows)
        width = max([len("Name")] + [len(e.key) for e in rows])
        width = min(width, max_name_column_width)
        cols = ["Name".rjust(width), "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls"] + (["Input Shapes"] if shapes else [])
        widths = [width] + [12] * 6 + ([32] if shapes else [])
        rule = "  ".join("-" * w for w in widths)
        out = ([header] if header else []) + [rule, "  ".join(c.rjust(w) for c, w in zip(cols, widths)), rule]
        for e in rows:
            cells = [e.key[:width].rjust(width), f"{100 * e.self_cpu_time_total / total_self:.2f}%",
                     _us(e.self_cpu_time_total), f"{100 * e.cpu_time_total / total_self:.2f}%", _us(e.cpu_time_total),
                     _us(e.cpu_time), str(e.count)]
            if shapes:
                cells.append(str(e.input_shapes or ""))
            out.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
        out += [rule, f"Self CPU time total: {_us(self.self_cpu_time_total)}", ""]
        return "\n".join(out)

    def export_chrome_trace(self, path):
        trace = {"traceEvents": [{"name": e.name, "ph": "X", "ts": e.time_range_start, "dur": e.cpu_time_total,
                                  "pid": os.getpid(), "tid": e.thread, "cat": "user_annotation" if e.is_range
                                  else "cpu_op", "args": {"Input Shapes": e.input_shapes} if e.input_shapes else {}}
                                 for e in self]}
        text = json.dumps(trace)
        if path.endswith(".gz"):
            import gzip
            with gzip.open(path, "wt") as f:
                f.write(text)
        else:
            with open(path, "w") as f:
                f.write(text)

    def __str__(self):
        return self.table()


def _shapes(text):
    return json.loads("[" + text + "]") if text and not text.endswith("...") else ([text] if text else [])


# The profile recording now (one at a time, as PyTorch's).
_current = None
_lock = threading.Lock()


class profile:
    """torch.profiler.profile: records ops and record_function ranges
    between start() and stop() (or in a `with`), optionally by a
    schedule advanced with step(), handing each saved trace to
    on_trace_ready. profile_memory, with_stack, with_flops and
    with_modules are accepted and ignored; CUDA activity is refused, as
    ember has no CUDA device yet."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, use_cuda=None, enabled=True):
        acts = set(activities) if activities is not None else supported_activities()
        if ProfilerActivity.CUDA in acts or use_cuda:
            raise NotImplementedError("ember.profiler: CUDA activity needs a CUDA device, which ember does not have "
                                      "yet; profile the CPU")
        self.record_shapes, self.schedule, self.on_trace_ready = record_shapes, schedule, on_trace_ready
        self.enabled = enabled
        self.step_num = 0
        self._events = EventList()
        self._ranges = []
        self._recording = False
        self._action = ProfilerAction.RECORD

    # -- recording --
    def _begin(self):
        global _current
        with _lock:
            if _current is not None:
                raise RuntimeError("ember.profiler: a profile is already recording (one at a time, as PyTorch's)")
            _C._profiler_start(bool(self.record_shapes))
            _current, self._recording, self._ranges = self, True, []

    def _end(self):
        global _current
        with _lock:
            if not self._recording:
                return
            ops, dropped = _C._profiler_stop()
            _current, self._recording = None, False
        events = [FunctionEvent("ember::" + name, start / 1000, dur / 1000, thread,
                                _shapes(shapes) if self.record_shapes else None)
                  for name, start, dur, thread, shapes in ops]
        events += [FunctionEvent(name, start / 1000, (end - start) / 1000, thread, None, True)
                   for name, start, end, thread in self._ranges]
        events.sort(key=lambda e: (e.time_range_start, -e.cpu_time_total))
        _own_times(events)
        self._events = EventList(events)
        self.dropped = dropped

    def start(self):
        if not self.enabled:
            return
        self._action = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._begin()

    def stop(self):
        if not self.enabled:
            return
        was = self._recording
        self._end()
        if was and self.on_trace_ready and (self.schedule is None or self._action ==
                                             ProfilerAction.RECORD_AND_SAVE):
            self.on_trace_ready(self)

    def step(self):
        """One step of the schedule: a RECORD_AND_SAVE step's end saves."""
        if not self.enabled:
            return
        before = self._action
        self.step_num += 1
        after = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if before == ProfilerAction.RECORD_AND_SAVE or (before in recording and after not in recording):
            self._end()
            if before == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready:
                self.on_trace_ready(self)
        self._action = after
        if after in recording and not self._recording:
            self._begin()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- results --
    def events(self):
        return self._events

    @property
    def function_events(self):
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        return self._events.key_averages(group_by_input_shape)

    def total_average(self):
        return self._events.total_average()

    @property
    def self_cpu_time_total(self):
        return self._events.self_cpu_time_total

    def table(self, *args, **kwargs):
        return self._events.table(*args, **kwargs)

    def export_chrome_trace(self, path):
        self._events.export_chrome_trace(path)

    def __str__(self):
        return self.table()


def _within(e, r):
    return (e is not r and e.thread == r.thread and e.time_range_start >= r.time_range_start and
            e.time_range_start + e.cpu_time_total <= r.time_range_start + r.cpu_time_total)


def _own_times(events):
    """A range's own time excludes its children: the events inside it on
    its thread that no smaller range inside it holds (ops have none: the
    profiler sees the outermost op only)."""
    ranges = [e for e in events if e.is_range]
    for r in ranges:
        inside = [e for e in events if _within(e, r)]
        inner = [o for o in inside if o.is_range]
        r.cpu_children = [e for e in inside if not any(_within(e, o) for o in inner)]
        r.self_cpu_time_total = max(0.0, r.cpu_time_total - sum(e.cpu_time_total for e in r.cpu_children))


class record_function:
    """Marks a range (a `with` block, or a decorated function) that the
    profile recording now lists under `name`, its own time being what the
    ops inside it do not account for."""

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._start = None

    def __enter__(self):
        self._start = _C._profiler_now() if _current is not None else None
        return self

    def __exit__(self, *exc):
        prof = _current
        if self._start is not None and prof is not None:
            prof._ranges.append((self.name, self._start, _C._profiler_now(), _C._profiler_thread()))
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapper
