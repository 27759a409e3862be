"""What tools/opinfo_parity.py and tools/moduleinfo_parity.py share: the
stand-in for `expecttest`, moving values from PyTorch to ember, running the
same code with `torch` bound to ember, and comparing results.

PyTorch's test databases import `expecttest`, which Debian does not ship:
`import_databases()` puts a stand-in in its place first.
"""

import math
import os
import sys
import types
import warnings

import numpy as np


def import_databases():
    """(op_db, module_db) from the installed PyTorch's testing package."""
    sys.modules.setdefault("expecttest", types.SimpleNamespace(ACCEPT=False, TestCase=object))
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db
    return op_db, module_db


MAX_DIMS = 8  # EM_MAX_DIMS


class Unconvertible(Exception):
    """An argument the harness cannot hand to ember (complex, sparse, a
    PyTorch object with no ember counterpart)."""


def to_ember(v, memo=None):
    """v with every PyTorch tensor, dtype, device, size and memory format
    replaced by ember's; containers keep their type."""
    import torch
    import ember
    if isinstance(v, torch.Tensor):
        if v.is_complex() or v.layout != torch.strided:
            raise Unconvertible(f"a {v.dtype} {v.layout} tensor")
        if v.dim() > MAX_DIMS:
            raise Unconvertible(f"a {v.dim()}-d tensor (ember's tensors have at most {MAX_DIMS} dims)")
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
        if not hasattr(ember, name) or not isinstance(getattr(ember, name), ember.dtype):
            raise Unconvertible(f"dtype {v}")
        return getattr(ember, name)
    if isinstance(v, torch.Size):
        return tuple(v)
    if isinstance(v, torch.memory_format):
        return getattr(ember, str(v).split(".")[-1])
    if isinstance(v, torch.device):
        return str(v)
    if isinstance(v, torch.Generator):
        raise Unconvertible("a torch.Generator")
    if isinstance(v, (list, tuple)):
        if hasattr(v, "_fields"):
            return type(v)(*(to_ember(x) for x in v))
        return type(v)(to_ember(x) for x in v)
    if isinstance(v, dict):
        return {k: to_ember(x) for k, x in v.items()}
    if isinstance(v, (int, float, bool, str, type(None), slice, type(Ellipsis), np.ndarray, np.generic)):
        return v
    if isinstance(v, types.FunctionType):
        return rebind(v)
    if isinstance(v, types.BuiltinFunctionType) and (getattr(v, "__module__", "") or "").startswith("torch"):
        # (torch's own functions given as arguments, F.gelu as an activation: ember's of the name)
        for space in (ember.nn.functional, ember):
            if hasattr(space, v.__name__):
                return getattr(space, v.__name__)
    if isinstance(v, torch.nn.Module):
        return _module_to_ember(v)
    if callable(v):
        raise Unconvertible(f"a callable argument ({type(v).__name__})")
    raise Unconvertible(type(v).__name__)


def _module_to_ember(m):
    """ember's module of the same class with m's settings, for modules
    without parameters or buffers (PairwiseDistance as a loss's distance)."""
    import ember
    cls = getattr(ember.nn, type(m).__name__, None)
    if cls is None or list(m.parameters()) or list(m.buffers()):
        raise Unconvertible(f"a torch module ({type(m).__name__})")
    e = cls.__new__(cls)
    ember.nn.Module.__init__(e)
    for k, v in vars(m).items():
        if not k.startswith("_"):
            setattr(e, k, to_ember(v))
    return e


_REBOUND = {}


def _ember_namespace_for(value):
    """ember's module for a PyTorch module a function's globals name, or
    None when the value is not one of PyTorch's modules."""
    import ember
    if not isinstance(value, types.ModuleType) or not value.__name__.startswith("torch"):
        return None
    obj = ember
    for part in value.__name__.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def rebind(fn):
    """A copy of the Python function fn whose globals name ember where fn's
    name torch (torch, torch.nn.functional as F, torch.linalg, ...), and
    whose helper functions from the same module are rebound the same way:
    the code an OpInfo wraps its op in runs on ember unchanged."""
    if not isinstance(fn, types.FunctionType):
        return fn
    key = id(fn)
    if key in _REBOUND:
        return _REBOUND[key][1]
    g = dict(fn.__globals__)
    copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    _REBOUND[key] = (fn, copy)  # (fn is kept alive so its id is not reused)
    for name in _global_names(fn.__code__):
        value = g.get(name)
        ns = _ember_namespace_for(value)
        if ns is not None:
            g[name] = ns
        elif isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
            g[name] = rebind(value)
    if "wrapper_set_seed" in g:
        g["wrapper_set_seed"] = _ember_wrapper_set_seed
    return copy


def _global_names(code):
    """The global names code and the functions nested in it (lambdas made
    when it runs, which share its globals) refer to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _ember_wrapper_set_seed(op, *args, **kwargs):
    """The database's wrapper_set_seed on ember's generator: a fixed seed,
    the global state restored afterwards."""
    import ember
    state = ember.get_rng_state()
    try:
        ember.manual_seed(42)
        return op(*args, **kwargs)
    finally:
        ember.set_rng_state(state)


def flat(r):
    """Results as a flat list (tuples, lists and named tuples opened)."""
    if isinstance(r, (list, tuple)):
        out = []
        for x in r:
            out.extend(flat(x))
        return out
    return [r]


# float tolerances by PyTorch's result dtype: relative and absolute
TOLERANCE = {"float64": (1e-7, 1e-7), "float32": (1e-4, 1e-5), "bfloat16": (1.6e-2, 1e-2),
             "float16": (2e-3, 1e-3)}


def dtype_name(dt):
    return str(dt).split(".")[-1]


def to_numpy(t):
    """A tensor of either library as NumPy (bfloat16 through float32)."""
    t = t.detach()
    if getattr(t, "is_sparse", False):
        t = t.to_dense()  # (PyTorch's sparse gradients, as the dense ones ember gives)
    if getattr(t, "_is_zerotensor", lambda: False)():
        t = t.clone()  # (PyTorch's lazy zero gradients: their .numpy() reads memory never written)
    if dtype_name(t.dtype) == "bfloat16":
        t = t.float()
    return t.numpy()


def compare(got, want, shapes_only=False, tolerance=None):
    """None when ember's results `got` agree with PyTorch's `want`, else
    what differs. shapes_only: random or uninitialised results, where only
    the structure, shapes and dtypes are PyTorch's business."""
    import torch
    import ember
    g, w = flat(got), flat(want)
    if len(g) != len(w):
        return f"{len(g)} results, PyTorch gives {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        where = f"result {i}: " if len(w) > 1 else ""
        if isinstance(b, torch.Tensor):
            if not isinstance(a, ember.Tensor):
                return f"{where}a {type(a).__name__} where PyTorch gives a tensor"
            if tuple(a.shape) != tuple(b.shape):
                return f"{where}shape {tuple(a.shape)}, PyTorch's {tuple(b.shape)}"
            if dtype_name(a.dtype) != dtype_name(b.dtype):
                return f"{where}dtype {dtype_name(a.dtype)}, PyTorch's {dtype_name(b.dtype)}"
            if shapes_only:
                continue
            an, bn = to_numpy(a), to_numpy(b)
            if an.dtype.kind in "fc":
                rt, at = tolerance or TOLERANCE.get(dtype_name(b.dtype), (1e-4, 1e-5))
                if not np.allclose(an, bn, rtol=rt, atol=at, equal_nan=True):
                    bad = ~np.isclose(an, bn, rtol=rt, atol=at, equal_nan=True)
                    j = tuple(np.argwhere(bad)[0])
                    return f"{where}values differ (at {j}: {an[j]!r}, PyTorch's {bn[j]!r})"
            elif not np.array_equal(an, bn):
                j = tuple(np.argwhere(an != bn)[0])
                return f"{where}values differ (at {j}: {an[j]!r}, PyTorch's {bn[j]!r})"
        elif isinstance(b, (bool, int, float)):
            av = a.item() if isinstance(a, ember.Tensor) else a
            if not isinstance(av, (bool, int, float)):
                return f"{where}a {type(av).__name__} where PyTorch gives {b!r}"
            if shapes_only:
                continue
            if isinstance(b, float) and math.isnan(b):
                if not (isinstance(av, float) and math.isnan(av)):
                    return f"{where}{av!r}, PyTorch's nan"
            elif av != b and not (isinstance(b, float) and math.isclose(av, b, rel_tol=1e-5, abs_tol=1e-6)):
                return f"{where}{av!r}, PyTorch's {b!r}"
        elif isinstance(b, (torch.dtype, torch.Size)):
            if str(to_ember(b)) != str(a):
                return f"{where}{a!r}, PyTorch's {b!r}"
        elif b is None:
            if a is not None:
                return f"{where}{type(a).__name__}, PyTorch's None"
    return None


def first_line(e):
    """An exception as 'Type: first line of its message'."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:150] if text else ''}"


def call(fn, args, kwargs):
    """(result, None) or (None, exception)."""
    try:
        return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001
        return None, e


def grad_pairs(outs):
    """The float results of a call that carry history, with their positions
    (so that PyTorch's and ember's are paired by position, not by count)."""
    pairs = []
    for i, o in enumerate(flat(outs)):
        if hasattr(o, "requires_grad") and o.requires_grad and o.is_floating_point():
            pairs.append((i, o))
    return pairs


def seed_like(shape, dtype, k):
    """A fixed, nonzero output gradient of a shape (the k-th result's)."""
    import torch
    rng = np.random.default_rng(7 + k)
    return torch.tensor(rng.standard_normal(tuple(shape)), dtype=dtype)


def compare_grads(got, want, rtol=1e-6, atol=1e-8):
    """None when ember's float64 gradients equal PyTorch's; a gradient
    PyTorch leaves as None (an input the results do not use) reads as 0."""
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None and g is None:
            continue
        ref = g if w is None else w
        shape = tuple(ref.shape)
        gn = np.zeros(shape) if g is None else to_numpy(g)
        wn = np.zeros(shape) if w is None else to_numpy(w)
        if gn.shape != wn.shape:
            return f"gradient {i}: shape {gn.shape}, PyTorch's {wn.shape}"
        if not np.allclose(gn, wn, rtol=rtol, atol=atol, equal_nan=True):
            bad = ~np.isclose(gn, wn, rtol=rtol, atol=atol, equal_nan=True)
            j = tuple(np.argwhere(bad)[0])
            return f"gradient {i} differs (at {j}: {gn[j]!r}, PyTorch's {wn[j]!r})"
    return None


def finish(rows, wanted, no_write, width, table, out, order):
    """The end of a parity run: the rows printed when some were asked for
    (or --no-write), else the table written (atomically) to out."""
    if wanted or no_write:
        for r in sorted(rows, key=lambda r: (order[r[1]], r[0])):
            print(f"{r[0]:{width}s} {r[1]:8s} {r[3]:4d} {r[5]:6.1f}s  {r[2]}  [{r[4]}]")
        return
    with open(out + ".tmp", "w") as f:
        f.write(table(rows))
    os.replace(out + ".tmp", out)
    print(f"wrote {out}")
