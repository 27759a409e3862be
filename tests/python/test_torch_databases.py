"""PyTorch's own test databases through ember (issue 40, item 6): reruns
tools/opinfo_parity.py (and tools/moduleinfo_parity.py, where present)
and compares every verdict with the committed tables in docs/, so that a
change that breaks an op, or fixes one without regenerating the table,
fails here; and no OpInfo or ModuleInfo may give a wrong value.

Skipped under the sanitizers (the run takes minutes there; the release and
no-LLVM stages run it)."""

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

pytestmark = [
    pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                       reason="the databases take minutes under the sanitizers; the release stage runs them"),
    pytest.mark.filterwarnings("ignore"),
]


def committed_verdicts(path):
    """{name: verdict} from a generated table's rows."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\| `([^`]+)` \| (\w+) \|", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def check(rows, table, tool):
    wrong = [(r[0], r[2]) for r in rows if r[1] == "wrong"]
    assert not wrong, f"wrong values: {wrong}"
    want = committed_verdicts(os.path.join(ROOT, "docs", table))
    got = {r[0]: r[1] for r in rows}
    changed = sorted((n, want.get(n), v) for n, v in got.items() if want.get(n) != v)
    assert not changed, (f"verdicts differ from docs/{table} (name, committed, now): {changed}; if this is an "
                         f"improvement, regenerate the table with tools/{tool}")


def test_every_opinfo_keeps_its_verdict():
    import opinfo_parity
    check(opinfo_parity.run(), "opinfo_parity.md", "opinfo_parity.py")


def test_every_moduleinfo_keeps_its_verdict():
    import moduleinfo_parity
    check(moduleinfo_parity.run(), "moduleinfo_parity.md", "moduleinfo_parity.py")
