"""Runs PyTorch's own op database (OpInfo, from python3-torch's
torch.testing._internal.common_methods_invocations) through ember and
writes what it finds to docs/opinfo_parity.md (issue 40, item 6).

    PYTHONPATH=python:build/python /usr/bin/python3 tools/opinfo_parity.py [--ops NAME,...] [--samples N]

For every OpInfo whose dtypes include float32 (complex- and sparse-only ones
are skipped), its sample inputs (the first N, 6 by default) are converted
to ember and run with ember's function of the same name (ember.<name>,
ember.nn.functional.<name>, ember.linalg.<name>, ember.special.<name>, or
the Tensor method for the OpInfo's method variants), and compared with
PyTorch's results:
- "pass": every sample equal within float32 tolerance (float64 for the
  gradient check), or both libraries raising;
- "wrong": a sample whose values differ: a silent wrong result, the worst
  kind of bug, listed first;
- "raises": ember raises where PyTorch answers (or the reverse);
- "grad": values pass, but a float64 gradient differs or raises;
- "missing": ember has no such name;
- "unspecified": values differ where PyTorch does not fix them (random
  draws, uninitialised memory);
- "unconvertible": a sample uses an argument this harness cannot convert.
Where PyTorch itself leaves something unspecified (tie order, signs of
singular vectors), an op can show as "wrong" without being so; the table
says which ops need that reading.

Debian has no `expecttest`, which the database imports: a stand-in module
is put in its place first.
"""

import argparse
import math
import os
import sys
import time
import types
import warnings

import numpy as np

sys.modules.setdefault("expecttest", types.SimpleNamespace(ACCEPT=False, TestCase=object))
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import ember  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "opinfo_parity.md")

# ops whose results PyTorch leaves partly unspecified: a difference may be
# a valid other answer
UNSPECIFIED = {"linalg.svd": "signs of singular vectors", "svd": "signs of singular vectors",
               "linalg.eigh": "signs of eigenvectors", "linalg.qr": "signs", "qr": "signs",
               "sort": "order of ties (ember's sort is stable)", "argsort": "order of ties",
               "topk": "order of ties", "kthvalue": "which tied index", "mode": "which tied index",
               "median": "which tied index", "nanmedian": "which tied index", "unique": "order",
               "max.reduction_with_dim": "which tied index", "min.reduction_with_dim": "which tied index",
               "linalg.eig": "order and scale of eigenvectors"}
for _random in ("nn.functional.dropout", "bernoulli", "multinomial", "normal", "normal.number_mean", "rand_like",
                "randint_like", "randn", "randn_like", "randint", "rand", "uniform", "nn.functional.dropout2d",
                "nn.functional.feature_alpha_dropout", "nn.functional.alpha_dropout", "cauchy", "exponential",
                "geometric", "log_normal"):
    UNSPECIFIED[_random] = "random draws (ember's generator is not PyTorch's)"
UNSPECIFIED["linalg.det.singular"] = ("PyTorch 1.13 gives 0 at a singular matrix; the gradient is the cofactor "
                                      "matrix, which ember gives")
UNSPECIFIED["__rpow__"] = "PyTorch's __rpow__ copies a tensor base without its history; ember keeps it"
for _empty in ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided"):
    UNSPECIFIED[_empty] = "uninitialised memory"


class Unconvertible(Exception):
    pass


def to_ember(v):
    if isinstance(v, torch.Tensor):
        if v.is_complex() or v.is_sparse or v.layout != torch.strided:
            raise Unconvertible(f"a {v.dtype} {v.layout} tensor")
        t = v.detach()
        if t.dtype == torch.bfloat16:
            e = ember.tensor(t.float().numpy()).to(ember.bfloat16)
        else:
            e = ember.tensor(t.numpy())
        if v.requires_grad:
            e.requires_grad_()
        return e
    if isinstance(v, torch.dtype):
        name = str(v).split(".")[-1]
        if not hasattr(ember, name):
            raise Unconvertible(f"dtype {v}")
        return getattr(ember, name)
    if isinstance(v, torch.Size):
        return tuple(v)
    if isinstance(v, torch.memory_format):
        return getattr(ember, str(v).split(".")[-1])
    if isinstance(v, torch.device):
        return str(v)
    if isinstance(v, (list, tuple)):
        return type(v)(to_ember(x) for x in v) if not hasattr(v, "_fields") else type(v)(*map(to_ember, v))
    if isinstance(v, dict):
        return {k: to_ember(x) for k, x in v.items()}
    if isinstance(v, (int, float, bool, str, type(None), slice, type(Ellipsis))):
        return v
    if callable(v) and not isinstance(v, torch.nn.Module):
        raise Unconvertible(f"a callable argument ({type(v).__name__})")
    raise Unconvertible(type(v).__name__)


def resolve(op):
    """ember's callable for the OpInfo, or None."""
    name = op.name
    if name.startswith("__") and name.endswith("__"):
        if not hasattr(ember.Tensor, name):
            return None
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    if op.op is getattr(torch.Tensor, name, None):  # a method only (Tensor.unfold is not F.unfold)
        method = getattr(ember.Tensor, name, None)
        return None if method is None else (lambda x, *a, **k: method(x, *a, **k))
    obj = ember  # (each name where PyTorch has it: torch.svd is not torch.linalg.svd)
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if obj is not None and callable(obj):
        return obj
    method = getattr(ember.Tensor, name.split(".")[-1], None)
    if method is not None and op.method_variant is not None and "." not in name:
        return lambda x, *a, **k: method(x, *a, **k)
    return None


def flat(r):
    if isinstance(r, (list, tuple)):
        out = []
        for x in r:
            out.extend(flat(x))
        return out
    return [r]


def close(got, want, dtype):
    g, w = flat(got), flat(want)
    if len(g) != len(w):
        return f"{len(g)} results, PyTorch gives {len(w)}"
    for a, b in zip(g, w):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, ember.Tensor):
                return f"a {type(a).__name__} where PyTorch gives a tensor"
            if tuple(a.shape) != tuple(b.shape):
                return f"shape {tuple(a.shape)}, PyTorch's {tuple(b.shape)}"
            an = (a.float() if a.dtype == ember.bfloat16 else a).detach().numpy()
            bn = (b.float() if b.dtype == torch.bfloat16 else b).detach().numpy()
            if str(a.dtype).split(".")[-1] != str(b.dtype).split(".")[-1]:
                return f"dtype {a.dtype}, PyTorch's {b.dtype}"
            if an.dtype.kind in "fc":
                tol = {torch.float64: 1e-7, torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-3}
                rt = tol.get(b.dtype, 1e-4)
                if not np.allclose(an, bn, rtol=rt, atol=rt, equal_nan=True):
                    bad = ~np.isclose(an, bn, rtol=rt, atol=rt, equal_nan=True)
                    i = np.argwhere(bad)[0]
                    return f"values differ (at {tuple(i)}: {an[tuple(i)]!r} vs {bn[tuple(i)]!r})"
            elif not np.array_equal(an, bn):
                return "values differ"
        elif isinstance(b, (int, float, bool)):
            av = a.item() if isinstance(a, ember.Tensor) else a
            if not (av == b or (isinstance(b, float) and math.isnan(b) and math.isnan(av))):
                if not (isinstance(b, float) and math.isclose(av, b, rel_tol=1e-5, abs_tol=1e-6)):
                    return f"{av!r} vs {b!r}"
    return None


def run_sample(fn, op, s, dtype):
    """None when ember agrees, else (kind, detail)."""
    t_args = (s.input,) + tuple(s.args)
    try:
        e_args = to_ember(t_args)
        e_kwargs = to_ember(dict(s.kwargs))
    except Unconvertible as u:
        return ("unconvertible", str(u))
    try:
        want = op.op(*t_args, **s.kwargs)
        t_err = None
    except Exception as e:  # noqa: BLE001
        want, t_err = None, e
    try:
        got = fn(*e_args, **e_kwargs)
        e_err = None
    except Exception as e:  # noqa: BLE001
        got, e_err = None, e
    if t_err is not None:
        return None if e_err is not None else ("raises", f"PyTorch raises {type(t_err).__name__}, ember answers")
    if e_err is not None:
        return ("raises", f"{type(e_err).__name__}: {str(e_err).splitlines()[0][:150]}")
    why = close(got, want, dtype)
    return None if why is None else ("wrong", why)


def run_grad(fn, op, s):
    """float64 gradients of every input that requires grad, or (kind, detail)."""
    t_args = (s.input,) + tuple(s.args)
    t_in = [a for a in flat(t_args) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not t_in:
        return None
    try:
        e_args = to_ember(t_args)
        e_kwargs = to_ember(dict(s.kwargs))
    except Unconvertible:
        return None
    e_in = [a for a in flat(e_args) if isinstance(a, ember.Tensor) and a.requires_grad]
    try:
        outs = [o for o in flat(op.op(*t_args, **s.kwargs)) if isinstance(o, torch.Tensor) and o.is_floating_point()
                and o.requires_grad]
        if not outs:
            return None
        seeds = [torch.tensor(np.random.default_rng(7).standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
        want = torch.autograd.grad(outs, t_in, seeds, allow_unused=True)
    except Exception:  # noqa: BLE001
        return None
    try:
        e_outs = [o for o in flat(fn(*e_args, **e_kwargs)) if isinstance(o, ember.Tensor) and o.is_floating_point()
                  and o.requires_grad]
        e_seeds = [ember.tensor(sd.numpy()) for sd in seeds[:len(e_outs)]]
        got = ember.autograd.grad(e_outs, e_in, e_seeds, allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return ("grad", f"{type(e).__name__}: {str(e).splitlines()[0][:150]}")
    for g, w in zip(got, want):
        if w is None and g is None:
            continue
        gn = np.zeros(0) if g is None else g.numpy()
        wn = np.zeros_like(gn) if w is None else w.numpy()
        if gn.shape != wn.shape or not np.allclose(gn, wn, rtol=1e-6, atol=1e-8, equal_nan=True):
            return ("grad", "gradients differ")
    return None


def check_op(op, n_samples):
    if torch.float32 not in op.dtypes:
        return "skipped", "no float32"
    if getattr(op.op, "__name__", "") == "<lambda>" or "common_methods_invocations" in getattr(op.op, "__module__",
                                                                                              "") or "":
        return "skipped", "the OpInfo wraps its op in a function of its own"
    fn = resolve(op)
    if fn is None:
        return "missing", ""
    findings = []
    try:
        samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[:n_samples]
    except Exception as e:  # noqa: BLE001
        return "skipped", f"samples: {type(e).__name__}"
    for s in samples:
        r = run_sample(fn, op, s, torch.float32)
        if r is not None:
            findings.append(r)
    if op.supports_autograd and torch.float64 in op.dtypes and not findings:
        try:
            gsamples = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))[:n_samples]
        except Exception:  # noqa: BLE001
            gsamples = []
        for s in gsamples:
            r = run_grad(fn, op, s)
            if r is not None:
                findings.append(r)
                break
    if not findings:
        return "pass", f"{len(samples)} samples"
    order = ["wrong", "raises", "unconvertible", "grad"]
    kind, detail = min(findings, key=lambda f: order.index(f[0]))
    return kind, detail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--samples", type=int, default=6)
    args = ap.parse_args()
    wanted = set(filter(None, args.ops.split(",")))
    rows = []
    t0 = time.time()
    for op in op_db:
        full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if wanted and op.name not in wanted and full not in wanted:
            continue
        ember.manual_seed(0)
        torch.manual_seed(0)
        try:
            kind, detail = check_op(op, args.samples)
        except Exception as e:  # noqa: BLE001
            kind, detail = "raises", f"harness: {type(e).__name__}: {e}"[:160]
        if kind in ("wrong", "grad") and (full in UNSPECIFIED or op.name in UNSPECIFIED):
            kind = "unspecified"
        rows.append((full, kind, detail))
    counts = {}
    for _, k, _ in rows:
        counts[k] = counts.get(k, 0) + 1
    tested = len(rows) - counts.get("skipped", 0)
    summary = ", ".join(f"{k} {counts[k]}" for k in ("pass", "wrong", "raises", "grad", "unspecified",
                                                    "unconvertible", "missing", "skipped") if k in counts)
    print(f"{len(rows)} OpInfos in {time.time() - t0:.0f} s: {summary}")
    if wanted:
        for r in rows:
            print(r)
        return
    order = {"wrong": 0, "raises": 1, "grad": 2, "unspecified": 3, "unconvertible": 4, "missing": 5, "pass": 6,
             "skipped": 7}
    lines = ["# PyTorch's OpInfo database through ember", "",
             "Generated by `tools/opinfo_parity.py` (see its docstring for what each verdict means) from "
             f"PyTorch {torch.__version__}'s `op_db`, {args_samples(args)} sample inputs per op, float32 values "
             "and float64 gradients. Do not edit by hand.", "",
             f"**{counts.get('pass', 0)} of {tested} OpInfos with float32 pass** ({summary}).", "",
             "| OpInfo | verdict | first finding | unspecified by PyTorch |", "|---|---|---|---|"]
    for name, kind, detail in sorted(rows, key=lambda r: (order[r[1]], r[0])):
        note = UNSPECIFIED.get(name, UNSPECIFIED.get(name.split(".")[0], ""))
        lines.append(f"| `{name}` | {kind} | {detail.replace('|', '/')} | {note} |")
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}")


def args_samples(args):
    return args.samples


if __name__ == "__main__":
    main()
