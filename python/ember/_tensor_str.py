"""Printing tensors the way PyTorch prints them.

Follows torch/_tensor_str.py (PyTorch 1.13): 4 digits of precision, an
integer mode for floats that hold whole numbers, scientific notation when
the magnitudes span more than 1000x (or exceed 1e8, or dip below 1e-4), and
summaries with '...' for tensors of more than 1000 elements. Values come
from a zero-copy NumPy view.
"""

import math

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not floating:
            for v in values:
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = [v for v in values if math.isfinite(v) and v != 0]
        if not finite:
            return
        mags = [abs(v) for v in finite]
        lo, hi = min(mags), max(mags)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.{PRECISION}e}"))
            else:
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.0f}") + 1)
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.{PRECISION}e}"))
            else:
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.{PRECISION}f}"))

    def format(self, v):
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{PRECISION}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


def _summarized_values(a, summarize):
    """The values the formatter sizes itself on (edges only when summarising)."""
    import numpy as np
    if a.ndim == 0:
        return [a.item()]
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        parts = list(a[:EDGEITEMS]) + list(a[-EDGEITEMS:])
    else:
        parts = list(a)
    if a.ndim == 1:
        return [p.item() for p in parts]
    out = []
    for p in parts:
        out.extend(_summarized_values(np.asarray(p), summarize))
    return out


def _vector_str(a, indent, summarize, fmt):
    element_length = fmt.max_width + 2
    per_line = max(1, int(math.floor((LINEWIDTH - indent) / element_length)))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        data = [fmt.format(v) for v in a[:EDGEITEMS].tolist()] + [" ..."] + \
               [fmt.format(v) for v in a[-EDGEITEMS:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + \
               ["..."] + \
               [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)]
    else:
        rows = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_line_len += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t):
    from .autograd import no_grad
    with no_grad():
        return _tensor_repr(t)


def _tensor_repr(t):
    import numpy as np
    from . import float32, int64, bfloat16, bool as bool_
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    # NumPy has no bfloat16; its values are exactly float32 values. (A copy:
    # exporting t's own memory would pin it for good, and resize_ could not
    # grow it after a print.)
    a = np.asarray(t.float() if t.dtype == bfloat16 else t.clone())
    if t.numel() == 0:
        if t.ndim != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype != float32:
            suffixes.append("dtype=" + repr(t.dtype))
        body = "[]"
    else:
        if t.dtype not in (float32, int64, bool_):
            suffixes.append("dtype=" + repr(t.dtype))
        summarize = t.numel() > THRESHOLD
        fmt = _Formatter(_summarized_values(a, summarize), t.dtype.is_floating_point)
        body = _tensor_str(a, indent, summarize, fmt)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
