"""The gap list between PyTorch's public API and ember's (issue 40, item 3).

    PYTHONPATH=python:build/python /usr/bin/python3 tools/api_coverage.py

Walks the names PyTorch (the installed one: Debian's 1.13 here) exports
from torch, Tensor, nn, nn.functional, nn.init, optim, optim.lr_scheduler,
utils.data, autograd, linalg, fft and special, and writes
docs/api_coverage.md: per namespace, how many of them ember has and which
it lacks. Presence only: whether a name behaves as PyTorch's is the op
tests' business. tests/python/test_api_coverage.py regenerates the table
and compares, so it cannot go stale: after adding names, run this again.
"""

import importlib
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "docs", "api_coverage.md")

# (PyTorch's namespace, ember's)
NAMESPACES = [
    ("torch", "ember"),
    ("torch.Tensor", "ember.Tensor"),
    ("torch.nn", "ember.nn"),
    ("torch.nn.functional", "ember.nn.functional"),
    ("torch.nn.init", "ember.nn.init"),
    ("torch.optim", "ember.optim"),
    ("torch.optim.lr_scheduler", "ember.optim.lr_scheduler"),
    ("torch.utils.data", "ember.utils.data"),
    ("torch.autograd", "ember.autograd"),
    ("torch.linalg", "ember.linalg"),
    ("torch.fft", "ember.fft"),
    ("torch.special", "ember.special"),
]


def _resolve(path):
    """The object at a dotted path (a module, or a class in one), or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj
    return None


def public_names(obj):
    """The names a namespace exports for users: not private, not modules it
    happens to import (os, typing), not typing helpers."""
    names = []
    for n in dir(obj):
        if n.startswith("_"):
            continue
        try:
            v = getattr(obj, n)
        except Exception:  # (a property that raises on the class)
            names.append(n)
            continue
        if isinstance(v, types.ModuleType):
            continue
        mod = getattr(v, "__module__", None) or ""
        if mod == "typing" or mod.startswith("typing."):  # (Optional, List, ... that a module imported)
            continue
        if _imported_helper(n, v, mod) or (n in _LEAKED and getattr(obj, "__name__", "") == "torch"):
            continue
        names.append(n)
    return sorted(set(names))


_STDLIB = {"functools", "bisect", "math", "warnings", "collections", "itertools", "numbers", "operator",
           "contextlib", "enum", "abc", "weakref", "copy", "types"}


# Loop variables torch/__init__.py leaves behind at module level (`for name
# in dir(_C)`, `for attr in dir(_C): candidate = ...`): whatever the last
# iteration held, not API.
_LEAKED = {"name", "obj", "attr", "candidate"}


def _imported_helper(name, value, module):
    """Names a namespace has only because its source imported them, which no
    one calls through it: the standard library's functions (functools.wraps,
    bisect.bisect_right), its constants (math.inf; typing.TYPE_CHECKING),
    and the docstring templates PyTorch formats its documentation with
    (dicts of text, and *_notes strings)."""
    if module.split(".")[0].lstrip("_") in _STDLIB:  # (_bisect: bisect's C half)
        return True
    if name == "TYPE_CHECKING":
        return True
    if isinstance(value, dict) and value and all(isinstance(x, str) for x in value.values()):
        return True
    return isinstance(value, str) and name.endswith("_notes")


def _raises(eobj, name):
    """Whether ember's name is one of _unsupported.py's, raising
    NotImplementedError by design."""
    try:
        value = getattr(eobj, name)
    except Exception:  # noqa: BLE001 (a property raising on the class: present)
        return False
    return getattr(value, "_unsupported", None) is not None


def coverage():
    """[(torch namespace, ember namespace, names, missing, raising)]:
    raising are the names ember has only to raise NotImplementedError."""
    rows = []
    for tname, ename in NAMESPACES:
        tobj, eobj = _resolve(tname), _resolve(ename)
        if tobj is None:
            continue
        names = public_names(tobj)
        missing = [n for n in names if eobj is None or not hasattr(eobj, n)]
        raising = [n for n in names if n not in missing and _raises(eobj, n)]
        rows.append((tname, ename, names, missing, raising))
    return rows


def _pct(k, n):
    return f"{100.0 * k / n:.1f}%"


def generate():
    import torch
    rows = coverage()
    total = sum(len(r[2]) for r in rows)
    missing = sum(len(r[3]) for r in rows)
    raising = sum(len(r[4]) for r in rows)
    works = total - missing - raising
    lines = [
        "# API coverage: PyTorch's public names and ember's",
        "",
        f"Generated by `tools/api_coverage.py` from PyTorch {torch.__version__.split('+')[0]}'s exports "
        "(`dir()` of each namespace, without private names and imported modules); "
        "`tests/python/test_api_coverage.py` regenerates it and fails when it differs. A name *works* when "
        "ember has it (whether it behaves as PyTorch's is the op tests' business); it *raises* when ember has it "
        "only to raise NotImplementedError naming itself and its family (`python/ember/_unsupported.py`: "
        "complex, sparse, quantized, named and nested tensors, vendor kernels, TorchScript internals).",
        "",
        f"**{works} of {total} names work ({_pct(works, total)}); {raising} raise NotImplementedError "
        f"({_pct(raising, total)}); {missing} are missing ({_pct(missing, total)}).**",
        "",
        "| PyTorch | ember | works | raises | missing | of | works |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for tname, ename, names, miss, rais in rows:
        n = len(names)
        ok = n - len(miss) - len(rais)
        lines.append(f"| `{tname}` | `{ename}` | {ok} | {len(rais)} | {len(miss)} | {n} | {100.0 * ok / n:.0f}% |")
    for tname, ename, names, miss, rais in rows:
        lines += ["", f"## `{tname}`: {len(miss)} missing, {len(rais)} raising", ""]
        lines.append("Missing: " + (", ".join(f"`{m}`" for m in miss) if miss else "(none)"))
        if rais:
            lines += ["", "Raising NotImplementedError: " + ", ".join(f"`{m}`" for m in rais)]
    return "\n".join(lines) + "\n"


def main():
    text = generate()
    with open(OUT + ".tmp", "w") as f:
        f.write(text)
    os.replace(OUT + ".tmp", OUT)
    print(text.split("\n\n")[2] if len(sys.argv) < 2 else text)


if __name__ == "__main__":
    main()
