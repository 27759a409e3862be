"""What guarding Python state costs a compiled call (issue 39, item 1).

Functions that read 0, 10 and 50 Python values (module globals, closure
variables, attributes of a config object and items of a dict, in equal
parts) are compiled; each call checks its guards (the arguments, then
every value the trace read). Two timings per function, medians of 7:

- guards: ns per guard evaluation alone (_time_guards: argument
  collection and every check, nothing run);
- call: us per whole compiled call on a 4-element tensor, next to the
  same function eager and to one bare ember.add.

Every timed call is checked to have run compiled code.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_guards.py
"""

import statistics
import sys
import timeit
import types

import ember

G = {f"G{i}": 1.0 + i / 64 for i in range(64)}
globals().update(G)
CFG = types.SimpleNamespace(**{f"a{i}": 1.0 + i / 128 for i in range(64)})
D = {f"k{i}": 1.0 - i / 256 for i in range(64)}


def make(n):
    """A function reading n Python values, n/4 of each kind, and its source."""
    per = n // 4
    cells = {f"c{i}": 1.0 + i / 32 for i in range(per)}
    terms = [f"G{i}" for i in range(per)] + [f"c{i}" for i in range(per)] + \
            [f"CFG.a{i}" for i in range(per)] + [f"D['k{i}']" for i in range(n - 3 * per)]
    body = " + ".join(terms) if terms else "0.0"
    src = "def outer({cells}):\n    def f(x):\n        return x * ({body})\n    return f\n".format(
        cells=", ".join(cells), body=body)
    ns = dict(globals())
    exec(src, ns)
    return ns["outer"](**cells)


def median_us(stmt, number):
    return statistics.median(timeit.repeat(stmt, number=number, repeat=7)) / number * 1e6


def main():
    x = ember.arange(4.0)
    a, b = ember.ones(4), ember.ones(4)
    add_us = median_us(lambda: ember.add(a, b), 20000)
    print(f"ember {ember.__version__}, Python {sys.version.split()[0]}")
    print("| Python values read | guards on state | guard check ns | compiled call us | eager call us | "
          "compiled / bare add |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (0, 10, 50):
        f = make(n)
        cf = ember.compile(f)
        for _ in range(3):
            cf(x)
        stats0 = cf._stats()["compiled_calls"]
        report = ember.compiler.explain(cf, x, print_report=False).text
        n_guards = int(next(line for line in report.splitlines() if "guards on Python state" in line)
                       .rsplit(":", 1)[1])
        guard_ns = statistics.median(cf._time_guards(20000, x) for _ in range(7))
        call_us = median_us(lambda: cf(x), 20000)
        eager_us = median_us(lambda: f(x), 20000)
        calls = cf._stats()["compiled_calls"] - stats0
        assert calls >= 7 * 20000, f"only {calls} of the timed calls ran compiled"
        print(f"| {n} | {n_guards} | {guard_ns:.0f} | {call_us:.2f} | {eager_us:.2f} | {call_us / add_us:.2f}x |")
    print(f"bare ember.add of 4 elements: {add_us:.2f} us")


if __name__ == "__main__":
    main()
