"""Runs PyTorch's own op database (OpInfo, from python3-torch's
torch.testing._internal.common_methods_invocations) through ember and
writes what it finds to docs/opinfo_parity.md (issue 40, item 6).

    PYTHONPATH=python:build/python /usr/bin/python3 tools/opinfo_parity.py [--ops NAME,...] [--no-write]

For every OpInfo that has real dtypes (complex-only and sparse-only ones are
skipped), in float32 (or int64, or bool, for ops without floats):
- values: every *reference* input (the sample inputs plus the extremes:
  NaN, infinities, huge and tiny values, 0-d and zero-size shapes, where the
  OpInfo defines them) is converted to ember and run through ember's op of
  the same name (ember.<name>, nn.functional, linalg, special, fft, the
  Tensor method for method variants). An OpInfo that wraps its op in a
  function of its own (a lambda calling x.T, torch.polygamma(n, x), ...)
  runs that same function with its `torch` bound to ember
  (tools/parity_common.rebind);
- gradients: every sample input in float64, with a fixed output gradient
  for each result, paired to PyTorch's by position;
- compiled: ember.compile of the op on its first two sample inputs, called
  twice (a trace, then the compiled code) and compared with the eager
  result; "eager" says the call ran eagerly and why.

Verdicts, worst first:
- "wrong": a value differs from PyTorch's: a silent wrong result;
- "raises": ember raises where PyTorch answers (or answers where PyTorch
  raises);
- "grad": values pass, a float64 gradient differs or raises;
- "compile": eager passes, the compiled op differs or raises;
- "unconvertible": a sample uses an argument this harness cannot convert;
- "missing": ember has no such name;
- "pass".
Random and uninitialised ops are compared for shapes and dtypes only.
Where PyTorch 1.13's own answer is an artefact (see ARTEFACTS), the
verdict is kept and the table says why in its last column; such an op is
"pass (artefact)" only for the samples named there.
"""

import argparse
import os
import signal
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import (Unconvertible, finish, call, compare, compare_grads, first_line, flat, grad_pairs,  # noqa: E402
                           import_databases, rebind, seed_like, to_ember, to_numpy)

op_db, _ = import_databases()
import torch  # noqa: E402

import ember  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "opinfo_parity.md")
SECONDS_PER_OP = 120

RANDOM = {"nn.functional.dropout", "bernoulli", "multinomial", "normal", "normal.number_mean", "rand_like",
          "randint_like", "randn", "randn_like", "randint", "rand", "uniform", "nn.functional.dropout2d",
          "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout.with_train",
          "nn.functional.alpha_dropout", "cauchy", "exponential", "geometric", "log_normal",
          "nn.functional.rrelu", "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
          "randperm", "svd_lowrank", "pca_lowrank"}
# ops random only for some samples: name -> sample test (those compare shapes only, and no gradients)
RANDOM_WHEN = {"nn.functional._scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0.0}
UNINITIALISED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided"}

# Where PyTorch leaves a result partly unspecified, compare what it fixes.
# name -> (why, how): how is "shapes" (shapes and dtypes only) or a
# function (ember's result, PyTorch's) -> comparable pair

def _values_only(g, w, sample):
    return flat(g)[:1], flat(w)[:1]


def _unique_set(g, w, sample):
    """unique(sorted=False): PyTorch 1.13 returns the values in its hash
    table's order; compare them sorted (and the counts with them)."""
    if sample.kwargs.get("sorted", True) or sample.kwargs.get("dim") is not None:
        return g, w
    gv, wv = flat(g)[0], flat(w)[0]
    return [ember.sort(gv).values], [torch.sort(wv).values]


UNSPECIFIED = {
    "linalg.svd": ("signs of singular vectors", "shapes"),
    "svd": ("signs of singular vectors", "shapes"),
    "linalg.eigh": ("signs of eigenvectors", "shapes"),
    "linalg.eig": ("order and scale of eigenvectors", "shapes"),
    "linalg.qr": ("signs of Q's columns and R's rows", "shapes"),
    "qr": ("signs of Q's columns and R's rows", "shapes"),
    "geqrf": ("signs of the Householder vectors", "shapes"),
    "sort": ("order of ties (ember's sort is stable; PyTorch's indices of ties vary)", _values_only),
    "argsort": ("order of ties", "shapes"),
    "topk": ("order of ties", _values_only),
    "kthvalue": ("which tied index", _values_only),
    "mode": ("which tied index", _values_only),
    "median": ("which tied index", _values_only),
    "nanmedian": ("which tied index", _values_only),
    "max.reduction_with_dim": ("which tied index", _values_only),
    "min.reduction_with_dim": ("which tied index", _values_only),
    "msort": ("order of ties", _values_only),
    "unique": ("order of the values when sorted=False (PyTorch's hash table's)", _unique_set),
}


# Gradients PyTorch leaves unspecified: name -> (why, positions of the
# inputs whose gradients are compared)
GRADS_COMPARED = {
    "__rpow__": ("PyTorch's __rpow__ copies a tensor base with torch.tensor(), dropping its history (and "
                 "warning); ember keeps it: only the exponent's gradient is compared", (0,)),
}


def _cofactors(t_in, seeds):
    """det's gradient at a singular matrix: seed * cof(A), the cofactor
    matrix (signed minors), computed from its definition in float64."""
    a = t_in[0].detach().numpy()
    seed = seeds[0].numpy()
    out = np.zeros_like(a)
    n = a.shape[-1]
    for idx in np.ndindex(*a.shape[:-2]):
        m = a[idx]
        for i in range(n):
            for j in range(n):
                minor = np.delete(np.delete(m, i, 0), j, 1)
                out[idx + (i, j)] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
        out[idx] *= seed[idx]
    return [torch.tensor(out)]


def _directional_check(op, got, t_in, seeds, t_args, t_kwargs):
    """None when ember's gradients `got` agree with central differences of
    PyTorch's own forward (which is right where its backward is not) along
    a fixed random direction, in float64; else why not."""
    rng = np.random.default_rng(11)
    dirs = [torch.tensor(rng.standard_normal(tuple(x.shape))) for x in t_in]

    def loss(h):
        saved = [x.detach().clone() for x in t_in]
        with torch.no_grad():
            for x, d in zip(t_in, dirs):
                x.add_(h * d)
            outs = [o for o in flat(op.op(*t_args, **t_kwargs)) if isinstance(o, torch.Tensor)
                    and o.is_floating_point()]
            total = sum((o * sd).sum().item() for o, sd in zip(outs, seeds))
            for x, v in zip(t_in, saved):
                x.copy_(v)
        return total

    h = 1e-5
    numeric = (loss(h) - loss(-h)) / (2 * h)
    analytic = sum((to_numpy(g) * d.numpy()).sum() for g, d in zip(got, dirs) if g is not None)
    if not np.isclose(analytic, numeric, rtol=1e-6, atol=1e-8):
        return f"directional derivative {analytic!r}, central differences of PyTorch's forward {numeric!r}"
    return None


# Gradients PyTorch 1.13 gets wrong, checked against a reference of ours:
# name -> (why, reference(inputs requiring grad, output gradients, args, kwargs))
GRAD_REFERENCES = {
    "linalg.det.singular": ("PyTorch 1.13 gives a zero gradient at every singular matrix; the gradient of det is "
                            "the cofactor matrix, nonzero at rank n-1, which ember gives (checked against the "
                            "cofactors themselves)", lambda t_in, seeds, args, kwargs: _cofactors(t_in, seeds)),
    "cholesky_solve": ("PyTorch's gradient for the factor is that of input2 input2^T taken whole, nonzero in the "
                       "triangle the forward never reads; checked against central differences of PyTorch's "
                       "forward", None),
    "cholesky_inverse": ("PyTorch's gradient is that of input input^T taken whole, nonzero in the triangle the "
                         "forward never reads; checked against central differences of PyTorch's forward", None),
    "as_strided_scatter": ("PyTorch 1.13's input gradient reads memory it never wrote (values such as 6.9e-310 "
                           "appear); checked against central differences of PyTorch's forward (views that reach "
                           "an element twice are left out: which write wins is undefined)", None),
    "nn.functional.ctc_loss": ("PyTorch's ctc_loss backward returns the gradient as if log_probs were renormalised "
                               "by log_softmax (pytorch/pytorch#52241, #82545); ember gives the gradient of the "
                               "loss as computed, checked against central differences of PyTorch's forward", None),
}


# Ops whose float32 results PyTorch computes by recurrences that cancel
# (losing digits to rounding in float32): their float32 samples are compared
# with PyTorch's float64 result rounded to float32 (where PyTorch's float32
# result is not finite, its NaN from a degree limit is kept; a float64 result
# beyond float32's range is +-inf, where float32 overflowing mid-recurrence
# gave PyTorch NaN).
FLOAT64_REFERENCE = {name: "PyTorch's float32 recurrence loses digits where it cancels; compared with PyTorch's "
                           "float64 result rounded to float32 (ember computes float32 in float64)"
                     for name in ("special.chebyshev_polynomial_t", "special.chebyshev_polynomial_u",
                                  "special.chebyshev_polynomial_v", "special.chebyshev_polynomial_w",
                                  "special.shifted_chebyshev_polynomial_t", "special.shifted_chebyshev_polynomial_u",
                                  "special.shifted_chebyshev_polynomial_v", "special.shifted_chebyshev_polynomial_w",
                                  "special.hermite_polynomial_h", "special.hermite_polynomial_he",
                                  "special.laguerre_polynomial_l", "special.legendre_polynomial_p")}
for _name in ("special.bessel_j0", "special.bessel_j1", "special.bessel_y0", "special.bessel_y1", "special.airy_ai"):
    FLOAT64_REFERENCE[_name] = ("PyTorch's float32 Cephes forms lose the phase of the oscillation far out (x - pi/4 "
                                "in float32); compared with PyTorch's float64 result rounded (ember computes in "
                                "float64)")
FLOAT64_REFERENCE["ormqr"] = ("PyTorch's float32 LAPACK ormqr loses digits on these ill-conditioned inputs (values "
                              "to 5e10); compared with PyTorch's float64 result rounded (ember computes in float64)")
FLOAT64_REFERENCE["polygamma"] = ("PyTorch's float32 trigamma loses digits near the poles (sin(pi x) in float32); "
                                  "compared with PyTorch's float64 result rounded (ember computes in float64)")


def _float64_reference(op, t_args, t_kwargs, want):
    """PyTorch's result computed in float64 and rounded to float32, where
    its float32 result is finite."""
    def wide(v):
        if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
            return v.double()
        if isinstance(v, (list, tuple)):
            return type(v)(wide(x) for x in v)
        return v
    ref = op.op(*wide(t_args), **{k: wide(v) for k, v in t_kwargs.items()})
    if not isinstance(ref, torch.Tensor) or not isinstance(want, torch.Tensor) or want.dtype != torch.float32:
        return want
    ref32 = ref.float()  # (where float32 overflows mid-recurrence PyTorch gives NaN; the value is +-inf)
    return torch.where(torch.isfinite(want) | torch.isinf(ref32), ref32, want)


def _has(x, test):
    """Whether any element of x (a tensor or a number) passes test."""
    t = x if isinstance(x, torch.Tensor) else torch.tensor(x)
    return bool(test(t.double()).any())


def _shift_defined(sample):
    counts = sample.args[0] if sample.args else None
    if not isinstance(counts, torch.Tensor):
        return True
    x = sample.input
    bits = torch.iinfo(x.dtype).bits if isinstance(x, torch.Tensor) else 64
    return bool(((counts >= 0) & (counts < bits)).all())


def _cast_defined(target):
    """A float -> int cast is undefined (C's and PyTorch's) outside the
    target's range, and for NaN and infinities."""
    def defined(sample):
        x = sample.input
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
            return True
        info = torch.iinfo(target)
        return bool(torch.isfinite(x).all() and (x >= info.min).all() and (x <= info.max).all())
    return defined


# PyTorch 1.13's answers that are artefacts (undefined behaviour, bugs
# fixed since): samples where `defined(sample)` is false are not compared.
ARTEFACTS = {
    "bitwise_left_shift": ("shift counts outside [0, bits) are undefined in C; PyTorch 1.13 gives x86's count "
                           "mod 64, ember (as PyTorch 2) gives 0", _shift_defined),
    "bitwise_right_shift": ("shift counts outside [0, bits) are undefined in C; PyTorch 1.13 gives x86's count "
                            "mod 64, ember (as PyTorch 2) fills with the sign", _shift_defined),
    "unique": ("PyTorch 1.13 orders the slices of unique(dim=d) for d >= 2 by transpose(0, d), not moveaxis "
               "(pytorch/pytorch#24168, #101681); ember sorts as NumPy", lambda s: s.kwargs.get("dim") is None or
               s.input.ndim < 3 or s.kwargs["dim"] % s.input.ndim < 2),
    "aminmax": ("PyTorch 1.13's CPU aminmax of a 0-d tensor with keepdim=True gives shape (1,), fixed in 2.0 "
                "(pytorch/pytorch#96042); ember gives () as amin and amax do",
                lambda s: not (s.input.ndim == 0 and s.kwargs.get("keepdim"))),
    "special.zeta": ("PyTorch's zeta overflows an intermediate to NaN for x past about 1e15 (and at x = inf), "
                     "where zeta(x, q) tends to 0 for q > 1 (ember's; tests/python/test_special_functions.py "
                     "checks the limits)", lambda s: not _has(s.input, lambda t: t.abs() > 1e15)),
    "polygamma": ("PyTorch 1.13's polygamma of order 2 and more is NaN at +inf, where it tends to 0 (ember's)",
                  lambda s: s.kwargs.get("n", 0) < 2 or not _has(s.input, lambda t: t.isinf())),
    **{name: ("PyTorch 1.13's Cephes forms give NaN at +-inf (exp(inf) / sqrt(inf), cos(inf)) where the function "
              "tends to inf or 0 (ember gives the limits; tests/python/test_special_functions.py checks them)",
              lambda s: not _has(s.input, lambda t: t.isinf()))
       for name in ("i0", "special.i1", "special.modified_bessel_i0", "special.modified_bessel_i1",
                    "special.bessel_j0", "special.bessel_j1", "special.bessel_y0", "special.bessel_y1",
                    "special.airy_ai")},
    "native_layer_norm": ("PyTorch 1.13's mean of a one-element row differs from the element by rounding, which "
                          "1/sqrt(eps) then amplifies (0.00038 where x - mean is 0); those samples are not compared",
                          lambda s: int(np.prod(s.args[0])) > 1),
    "byte": ("float -> uint8 of values outside [0, 255], NaN or inf is undefined", _cast_defined(torch.uint8)),
    "char": ("float -> int8 outside its range, NaN or inf is undefined", _cast_defined(torch.int8)),
    "short": ("float -> int16 outside its range, NaN or inf is undefined", _cast_defined(torch.int16)),
    "int": ("float -> int32 outside its range, NaN or inf is undefined", _cast_defined(torch.int32)),
    "long": ("float -> int64 outside its range, NaN or inf is undefined", _cast_defined(torch.int64)),
}


def resolve(op):
    """ember's callable for the OpInfo, or None."""
    fn = op.op
    if isinstance(fn, types.FunctionType) and fn.__module__.startswith("torch.testing"):
        return rebind(fn)
    name = op.name
    if name.startswith("__") and name.endswith("__"):
        if not hasattr(ember.Tensor, name):
            return None
        method = getattr(ember.Tensor, name)  # (unbound, as the OpInfo's torch.Tensor.__rmod__ is called)
        return lambda x, *a, **k: method(x, *a, **k)
    if fn is getattr(torch.Tensor, name, None):  # a method only (Tensor.unfold is not F.unfold)
        method = getattr(ember.Tensor, name, None)
        return None if method is None else (lambda x, *a, **k: method(x, *a, **k))
    obj = ember  # each name where PyTorch has it: torch.svd is not torch.linalg.svd
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


def pick_dtype(op):
    for dt in (torch.float32, torch.int64, torch.bool):
        if dt in op.dtypes:
            return dt
    return None


def sample_args(s):
    return (s.input,) + tuple(s.args), dict(s.kwargs)


def run_values(fn, op, s, how):
    """None when ember agrees on this sample, else (kind, detail)."""
    t_args, t_kwargs = sample_args(s)
    try:
        e_args, e_kwargs = to_ember(t_args), to_ember(t_kwargs)
    except Unconvertible as u:
        return ("unconvertible", str(u))
    want, t_err = call(op.op, t_args, t_kwargs)
    got, e_err = call(fn, e_args, e_kwargs)
    # (a reflected operator that refuses its operands returns NotImplemented:
    # a refusal, as raising TypeError is)
    if want is NotImplemented:
        want, t_err = None, TypeError("NotImplemented")
    if got is NotImplemented:
        got, e_err = None, TypeError("NotImplemented")
    if t_err is not None:
        return None if e_err is not None else ("raises", f"PyTorch raises {first_line(t_err)}; ember answers")
    if e_err is not None:
        return ("raises", first_line(e_err))
    artefact = ARTEFACTS.get(op.name)
    if artefact and not artefact[1](s):
        return None
    if op.name in FLOAT64_REFERENCE:
        want = _float64_reference(op, t_args, t_kwargs, want)
    if how == "shapes" or (op.name in RANDOM_WHEN and RANDOM_WHEN[op.name](s)):
        why = compare(got, want, shapes_only=True)
    elif callable(how):
        why = compare(*how(got, want, s))
    else:
        why = compare(got, want)
    return None if why is None else ("wrong", why)


def _view_overlaps(sample):
    """Whether an as_strided view of the sample reaches one element twice."""
    size, stride = sample.args[1], sample.args[2]
    positions = {sum(i * st for i, st in zip(idx, stride)) for idx in np.ndindex(*size)}
    return len(positions) < int(np.prod(size))


# Samples whose gradient PyTorch leaves undefined: name -> (why, defined(sample))
GRAD_DEFINED = {
    "as_strided_scatter": ("a view that reaches an element twice writes it twice, in an order PyTorch leaves "
                           "undefined: those samples' gradients are not compared",
                           lambda s: not _view_overlaps(s)),
}


def run_grads(fn, op, s):
    """None when ember's float64 gradients are PyTorch's, else ("grad", why)."""
    if (op.name in GRAD_DEFINED and not GRAD_DEFINED[op.name][1](s)) or \
            (op.name in RANDOM_WHEN and RANDOM_WHEN[op.name](s)):
        return None
    t_args, t_kwargs = sample_args(s)
    t_in = [a for a in flat(t_args) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not t_in:
        return None
    try:
        e_args, e_kwargs = to_ember(t_args), to_ember(t_kwargs)
    except Unconvertible:
        return None
    e_in = [a for a in flat(e_args) if isinstance(a, ember.Tensor) and a.requires_grad]
    t_out, t_err = call(op.op, t_args, t_kwargs)
    if t_err is not None:
        return None
    t_pairs = grad_pairs(t_out)
    if not t_pairs:
        return None
    seeds = {i: seed_like(o.shape, o.dtype, i) for i, o in t_pairs}
    full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    try:
        if full in GRAD_REFERENCES:
            reference = GRAD_REFERENCES[full][1]
            want = reference and reference(t_in, [seeds[i] for i, _ in t_pairs], t_args, t_kwargs)
        else:
            want = torch.autograd.grad([o for _, o in t_pairs], t_in, [seeds[i] for i, _ in t_pairs],
                                       allow_unused=True)
    except Exception:  # noqa: BLE001 (PyTorch cannot differentiate this sample)
        return None
    try:
        e_out = flat(fn(*e_args, **e_kwargs))
        e_pairs = [(i, e_out[i]) for i, _ in t_pairs if i < len(e_out) and isinstance(e_out[i], ember.Tensor)
                   and e_out[i].requires_grad]
        if len(e_pairs) != len(t_pairs):
            return ("grad", f"results {[i for i, _ in t_pairs]} carry history in PyTorch, "
                            f"{[i for i, _ in e_pairs]} in ember")
        got = ember.autograd.grad([o for _, o in e_pairs], e_in, [to_ember(seeds[i]) for i, _ in e_pairs],
                                  allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return ("grad", first_line(e))
    if op.name in GRADS_COMPARED:
        keep = GRADS_COMPARED[op.name][1]
        got = [g for i, g in enumerate(got) if i in keep]
        want = [w for i, w in enumerate(want) if i in keep]
    if want is None:  # (a reference by differences)
        why = _directional_check(op, got, t_in, [seeds[i] for i, _ in t_pairs], t_args, t_kwargs)
    else:
        why = compare_grads(got, want)
    return None if why is None else ("grad", why)


def run_compiled(fn, s, how):
    """None when ember.compile of the op gives eager's result; else
    ("compile", why) or ("eager", why the compiled call ran eagerly)."""
    t_args, t_kwargs = sample_args(s)
    try:
        e_args, e_kwargs = to_ember(t_args), to_ember(t_kwargs)
    except Unconvertible:
        return None
    tensors = [i for i, a in enumerate(e_args) if isinstance(a, ember.Tensor)]
    if not tensors:
        return None
    want, err = call(fn, e_args, e_kwargs)
    if err is not None:
        return None

    def with_args(*ts):
        full = list(e_args)
        for i, t in zip(tensors, ts):
            full[i] = t
        return fn(*full, **e_kwargs)

    cf = ember.compile(with_args)
    ts = [e_args[i] for i in tensors]
    try:
        cf(*ts)
        got = cf(*ts)
    except Exception as e:  # noqa: BLE001
        return ("compile", first_line(e))
    stats = cf._stats()
    if how != "shapes":
        why = compare(got, want_as_reference(want), tolerance=(1e-5, 1e-6))
        if why is not None:
            return ("compile", why)
    if stats["compiled_calls"] == 0:
        reasons = ", ".join(stats["fallbacks"]) or "no compiled call"
        return ("eager", reasons[:150])
    return None


def want_as_reference(want):
    """ember's eager results as what compare() takes for PyTorch's: the
    same values, as PyTorch tensors."""
    def conv(x):
        if isinstance(x, ember.Tensor):
            t = x.detach()
            if t.dtype == ember.bfloat16:
                return torch.tensor(t.float().numpy()).bfloat16()
            return torch.tensor(t.numpy())
        if isinstance(x, (list, tuple)):
            return [conv(y) for y in x]
        return x
    return conv(want)


class Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise Timeout(f"took over {SECONDS_PER_OP} s")


def not_real(op, full):
    """Why an OpInfo is outside ember's real, strided, CPU tensors (its
    results are complex or sparse, it runs on CUDA only, or it is an ATen
    operator rather than public API), or None."""
    name = op.name
    if name.startswith("jiterator_"):
        return "CUDA only (jiterator)"
    if name in ("to_sparse", "sparse.sampled_addmm"):
        return "sparse results"
    if name in ("chalf", "complex", "polar", "view_as_complex", "stft", "istft", "linalg.eig", "linalg.eigvals") or \
            (name.startswith("fft.") and name not in ("fft.fftshift", "fft.ifftshift")):
        return "complex results (ember has no complex dtypes; it raises NotImplementedError naming the function)"
    if getattr(op.op, "__module__", None) == "torch._ops.aten" or type(op.op).__name__ == "OpOverload":
        return "an ATen operator (torch.ops.aten), not public API"
    return None


def check_op(op, full, compile_samples=2):
    """(verdict, first finding, samples, compiled note)."""
    dtype = pick_dtype(op)
    if dtype is None:
        return "skipped", "complex or sparse dtypes only", 0, ""
    why = not_real(op, full)
    if why is not None:
        return "skipped", why, 0, ""
    fn = resolve(op)
    if fn is None:
        return "missing", "", 0, ""
    how = "shapes" if full in RANDOM or op.name in RANDOM or full in UNINITIALISED else \
        UNSPECIFIED.get(full, UNSPECIFIED.get(op.name, (None, None)))[1]
    findings = []
    try:
        samples = list(op.reference_inputs("cpu", dtype, requires_grad=False))
    except Exception as e:  # noqa: BLE001
        return "skipped", f"PyTorch's samples: {first_line(e)}", 0, ""
    unconvertible = []
    for s in samples:
        ember.manual_seed(0)
        r = run_values(fn, op, s, how)
        if r is not None and r[0] == "unconvertible":
            unconvertible.append(r)  # (a complex scalar, ...: this sample is PyTorch's alone)
        elif r is not None:
            findings.append(r)
            if r[0] == "wrong":
                break
    if unconvertible and len(unconvertible) == len(samples):
        findings.append(unconvertible[0])
    if not findings and op.supports_autograd and torch.float64 in op.dtypes and how != "shapes":
        try:
            gsamples = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))
        except Exception:  # noqa: BLE001
            gsamples = []
        for s in gsamples:
            r = run_grads(fn, op, s)
            if r is not None:
                findings.append(r)
                break
    note = f"{len(unconvertible)} samples not convertible ({unconvertible[0][1]}); " if unconvertible else ""
    if not findings:
        for s in samples[:compile_samples]:
            r = run_compiled(fn, s, how)
            if r is None:
                continue
            if r[0] == "eager":
                if "eager:" not in note:
                    note += f"eager: {r[1]}"
            else:
                findings.append(r)
                break
        if "eager:" not in note and not findings:
            note += "compiled"
    if not findings:
        return "pass", "", len(samples), note
    order = ["wrong", "raises", "grad", "compile", "unconvertible"]
    kind, detail = min(findings, key=lambda f: order.index(f[0]))
    return kind, detail, len(samples), note


def run(wanted=()):
    rows = []
    signal.signal(signal.SIGALRM, _on_alarm)
    for op in op_db:
        full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if wanted and op.name not in wanted and full not in wanted:
            continue
        ember.manual_seed(0)
        torch.manual_seed(0)
        t0 = time.time()
        signal.alarm(SECONDS_PER_OP)
        try:
            kind, detail, n, note = check_op(op, full)
        except Timeout as e:
            kind, detail, n, note = "raises", f"harness: {e}", 0, ""
        except Exception as e:  # noqa: BLE001
            kind, detail, n, note = "raises", f"harness: {first_line(e)}", 0, ""
        finally:
            signal.alarm(0)
        rows.append((full, kind, detail, n, note, time.time() - t0))
    return rows


def summarise(rows):
    counts = {}
    for r in rows:
        counts[r[1]] = counts.get(r[1], 0) + 1
    kinds = ("pass", "wrong", "raises", "grad", "compile", "unconvertible", "missing", "skipped")
    return counts, ", ".join(f"{k} {counts[k]}" for k in kinds if k in counts)


ORDER = {"wrong": 0, "raises": 1, "grad": 2, "compile": 3, "unconvertible": 4, "missing": 5, "pass": 6,
         "skipped": 7}


def table(rows):
    counts, summary = summarise(rows)
    tested = len(rows) - counts.get("skipped", 0)
    compiled = sum(1 for r in rows if r[4].endswith("compiled"))
    eager = sum(1 for r in rows if "eager:" in r[4])
    lines = ["# PyTorch's OpInfo database through ember", "",
             "Generated by `tools/opinfo_parity.py` (its docstring says what each verdict means) from "
             f"PyTorch {torch.__version__}'s `op_db`: every reference input in float32 (int64 or bool for ops "
             "without floats), every sample's float64 gradients, and `ember.compile` on the first two samples. "
             "`tests/python/test_torch_databases.py` reruns it and fails when a verdict changes. "
             "Do not edit by hand.", "",
             f"**{counts.get('pass', 0)} of {tested} OpInfos with real dtypes and results pass** ({summary}); of those "
             f"passing, {compiled} compile and match eager, {eager} run eagerly when compiled.", "",
             "| OpInfo | verdict | samples | first finding | compiled | unspecified by PyTorch |",
             "|---|---|---:|---|---|---|"]
    for name, kind, detail, n, note, _ in sorted(rows, key=lambda r: (ORDER[r[1]], r[0])):
        why = UNSPECIFIED.get(name, UNSPECIFIED.get(name.split(".")[0], ARTEFACTS.get(name, GRADS_COMPARED.get(
            name, GRAD_REFERENCES.get(name, ("", None))))))[0] or FLOAT64_REFERENCE.get(name, "")
        if name in RANDOM or name.split(".")[0] in RANDOM:
            why = "random draws (ember's generator is not PyTorch's): shapes and dtypes compared"
        if name in UNINITIALISED:
            why = "uninitialised memory: shapes and dtypes compared"
        cells = [f"`{name}`", kind, str(n), detail, note, why]
        lines.append("| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    wanted = set(filter(None, args.ops.split(",")))
    t0 = time.time()
    rows = run(wanted)
    print(f"{len(rows)} OpInfos in {time.time() - t0:.0f} s: {summarise(rows)[1]}")
    finish(rows, wanted, args.no_write, 45, table, OUT, ORDER)

if __name__ == "__main__":
    main()
