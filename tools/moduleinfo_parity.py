"""Runs PyTorch's module database (ModuleInfo, from python3-torch's
torch.testing._internal.common_modules) through ember and writes what it
finds to docs/moduleinfo_parity.md (issue 40, item 6).

    PYTHONPATH=python:build/python /usr/bin/python3 tools/moduleinfo_parity.py [--modules NAME,...] [--no-write]

For every ModuleInfo of a torch.nn module and each of its module inputs, in
training and in evaluation mode:
- the module is built in both libraries with the same constructor
  arguments, and torch's parameters and buffers are loaded into ember's
  (load_state_dict), so that both compute with the same values;
- values: the forward in float32, its results and the module's buffers
  afterwards (BatchNorm's running statistics) compared with PyTorch's;
- gradients: the same in float64, with a fixed output gradient, compared
  for the inputs and every parameter;
- compiled: ember.compile(module) called twice (a trace, then the compiled
  code) against the eager forward.
Verdicts as tools/opinfo_parity.py's: wrong, raises, grad, compile,
missing (ember has no module of the name), pass.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import (Unconvertible, finish, compare, compare_grads, first_line, flat, grad_pairs,  # noqa: E402
                           import_databases, seed_like, to_ember)

_, module_db = import_databases()
import torch  # noqa: E402

import ember  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "moduleinfo_parity.md")

# modules whose training forward draws random numbers: compared for shapes
RANDOM_IN_TRAINING = {"nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer", "nn.Transformer",
                      "nn.MultiheadAttention"}


def ember_class(info):
    """ember's class of the module's name, or None."""
    cls = info.module_cls  # (torch.ao.nn.quantized.MaxPool2d is nn.MaxPool2d itself)
    if not cls.__module__.startswith("torch.nn"):
        return None
    return getattr(ember.nn, cls.__name__, None)


def build(info, inp, dtype):
    """(torch module, ember module with torch's state) for one module input."""
    args, kwargs = inp.constructor_input.args, inp.constructor_input.kwargs
    torch.manual_seed(0)
    tm = info.module_cls(*args, **kwargs)
    if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in tm.parameters()):
        with torch.no_grad():  # (a lazy module: its first input sizes it; ember's sizes from the state loaded)
            tm(*inp.forward_input.args, **inp.forward_input.kwargs)
    tm = tm.to(dtype)
    em = ember_class(info)(*to_ember(args), **to_ember(kwargs))
    if dtype == torch.float64:
        em = em.double()
    tm_state = tm.state_dict()
    state = {k: to_ember(v) for k, v in tm_state.items()}
    missing, unexpected = em.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise AssertionError(f"state_dict keys differ: ember lacks {list(unexpected)}, torch lacks {list(missing)}")
    return tm, em


def inputs(info, dtype, requires_grad, training):
    return info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=requires_grad, training=training)


def forward_check(info, inp, training):
    """None when ember's forward (and buffers after it) are PyTorch's, else
    (kind, why)."""
    try:
        tm, em = build(info, inp, torch.float32)
    except Unconvertible as u:
        return ("unconvertible", str(u))
    except Exception as e:  # noqa: BLE001
        return ("raises", f"building: {first_line(e)}")
    tm.train(training)
    em.train(training)
    args, kwargs = inp.forward_input.args, inp.forward_input.kwargs
    e_args, e_kwargs = to_ember(args), to_ember(kwargs)
    try:
        want = tm(*args, **kwargs)
    except Exception:  # noqa: BLE001
        want = None
    try:
        got = em(*e_args, **e_kwargs)
    except Exception as e:  # noqa: BLE001
        return None if want is None else ("raises", first_line(e))
    if want is None:
        return ("raises", "PyTorch raises; ember answers")
    shapes_only = training and info.name in RANDOM_IN_TRAINING
    why = compare(got, want, shapes_only=shapes_only)
    if why is not None:
        return ("wrong", why)
    t_buf = dict(tm.named_buffers())
    for name, b in em.named_buffers():
        if name in t_buf and t_buf[name] is not None and b is not None:
            why = compare(b, t_buf[name])
            if why is not None:
                return ("wrong", f"buffer {name} after the forward: {why}")
    return None


def grad_check(info, inp, training):
    """None when the float64 gradients of inputs and parameters are
    PyTorch's, else ("grad", why)."""
    if training and info.name in RANDOM_IN_TRAINING:
        return None
    try:
        tm, em = build(info, inp, torch.float64)
    except Exception:  # noqa: BLE001
        return None
    tm.train(training)
    em.train(training)
    args, kwargs = inp.forward_input.args, inp.forward_input.kwargs
    t_in = [a for a in flat(list(args) + list(kwargs.values())) if isinstance(a, torch.Tensor) and a.requires_grad]
    e_args, e_kwargs = to_ember(args), to_ember(kwargs)
    e_in = [a for a in flat(list(e_args) + list(e_kwargs.values())) if isinstance(a, ember.Tensor)
            and a.requires_grad]
    t_params = [p for p in tm.parameters() if p.requires_grad]
    e_params = [p for p in em.parameters() if p.requires_grad]
    try:
        t_out = tm(*args, **kwargs)
    except Exception:  # noqa: BLE001
        return None
    t_pairs = grad_pairs(t_out)
    if not t_pairs or not (t_in or t_params):
        return None
    seeds = {i: seed_like(o.shape, o.dtype, i) for i, o in t_pairs}
    want = torch.autograd.grad([o for _, o in t_pairs], t_in + t_params, [seeds[i] for i, _ in t_pairs],
                               allow_unused=True)
    try:
        e_out = flat(em(*e_args, **e_kwargs))
        e_pairs = [(i, e_out[i]) for i, _ in t_pairs]
        got = ember.autograd.grad([o for _, o in e_pairs], e_in + e_params,
                                  [to_ember(seeds[i]) for i, _ in e_pairs], allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return ("grad", first_line(e))
    why = compare_grads(got, want)
    return None if why is None else ("grad", why)


def compiled_check(info, inp, training):
    """None when ember.compile(module) gives the eager module's results
    (two calls each: the first compiled call traces, and both move
    BatchNorm's statistics alike); ("compile", why) or ("eager", why the
    compiled calls ran eagerly)."""
    if training and info.name in RANDOM_IN_TRAINING:
        return None
    e_args, e_kwargs = to_ember(inp.forward_input.args), to_ember(inp.forward_input.kwargs)
    try:
        with ember.no_grad():
            _, eager = build(info, inp, torch.float32)
            _, traced = build(info, inp, torch.float32)
            eager.train(training)
            traced.train(training)
            eager(*e_args, **e_kwargs)
            want = eager(*e_args, **e_kwargs)
    except Exception:  # noqa: BLE001
        return None
    cm = ember.compile(traced)
    try:
        with ember.no_grad():
            cm(*e_args, **e_kwargs)
            got = cm(*e_args, **e_kwargs)
    except Exception as e:  # noqa: BLE001
        return ("compile", first_line(e))
    why = compare(got, [torch.tensor(x.numpy()) if isinstance(x, ember.Tensor) else x for x in flat(want)],
                  tolerance=(1e-5, 1e-6))
    if why is not None:
        return ("compile", why)
    stats = cm._stats()
    if stats["compiled_calls"] == 0:
        return ("eager", ", ".join(stats["fallbacks"])[:150] or "no compiled call")
    return None


def check_module(info):
    """(verdict, first finding, inputs checked, compiled note)."""
    if ember_class(info) is None:
        return "missing", "", 0, ""
    findings, note, count = [], "", 0
    for training in (True, False):
        for inp in inputs(info, torch.float32, False, training):
            count += 1
            r = forward_check(info, inp, training)
            if r is not None:
                findings.append((r[0], f"{inp.desc or 'default'}, {'train' if training else 'eval'}: {r[1]}"))
        if findings:
            continue
        for inp in inputs(info, torch.float64, True, training):
            r = grad_check(info, inp, training)
            if r is not None:
                findings.append((r[0], f"{inp.desc or 'default'}, {'train' if training else 'eval'}: {r[1]}"))
                break
        for inp in inputs(info, torch.float32, False, training)[:1]:
            r = compiled_check(info, inp, training)
            if r is None:
                continue
            if r[0] == "eager":
                note = note or f"eager: {r[1]}"
            else:
                findings.append(r)
    if not findings:
        return "pass", "", count, note or "compiled"
    order = ["wrong", "raises", "grad", "compile", "unconvertible"]
    kind, detail = min(findings, key=lambda f: order.index(f[0]))
    return kind, detail, count, note


def run(wanted=()):
    rows = []
    for info in module_db:
        if wanted and info.name not in wanted:
            continue
        ember.manual_seed(0)
        t0 = time.time()
        try:
            kind, detail, n, note = check_module(info)
        except Exception as e:  # noqa: BLE001
            kind, detail, n, note = "raises", f"harness: {first_line(e)}", 0, ""
        rows.append((info.name, kind, detail, n, note, time.time() - t0))
    return rows


ORDER = {"wrong": 0, "raises": 1, "grad": 2, "compile": 3, "unconvertible": 4, "missing": 5, "pass": 6,
         "skipped": 7}


def table(rows):
    counts = {}
    for r in rows:
        counts[r[1]] = counts.get(r[1], 0) + 1
    tested = len(rows) - counts.get("skipped", 0)
    summary = ", ".join(f"{k} {counts[k]}" for k in ORDER if k in counts)
    lines = ["# PyTorch's ModuleInfo database through ember", "",
             "Generated by `tools/moduleinfo_parity.py` (its docstring says what is compared) from PyTorch "
             f"{torch.__version__}'s `module_db`: every module input, in training and evaluation mode, with "
             "torch's parameters and buffers loaded into ember's module; float32 values and buffers, float64 "
             "gradients of inputs and parameters, and the compiled module. "
             "`tests/python/test_torch_databases.py` reruns it and fails when a verdict changes. "
             "Do not edit by hand.", "",
             f"**{counts.get('pass', 0)} of {tested} ModuleInfos pass** ({summary}).", "",
             "| ModuleInfo | verdict | inputs | first finding | compiled |", "|---|---|---:|---|---|"]
    for name, kind, detail, n, note, _ in sorted(rows, key=lambda r: (ORDER[r[1]], r[0])):
        cells = [f"`{name}`", kind, str(n), detail, note]
        lines.append("| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default="")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    wanted = set(filter(None, args.modules.split(",")))
    t0 = time.time()
    rows = run(wanted)
    counts = {}
    for r in rows:
        counts[r[1]] = counts.get(r[1], 0) + 1
    print(f"{len(rows)} ModuleInfos in {time.time() - t0:.0f} s: {counts}")
    finish(rows, wanted, args.no_write, 32, table, OUT, ORDER)

if __name__ == "__main__":
    main()
