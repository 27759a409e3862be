"""The functional API (ember.exp, ember.cat, ...) and the Tensor methods that
are not in C, under PyTorch's names and signatures.

Everything here is a thin layer over ember._C's generic entry points, which
take op ids from the one op table; anything that PyTorch spells as a
composition (stack, split, repeat, einsum, ...) is composed from ops here,
so a traced function records the primitive ops.
"""

import builtins
import collections
import math
import numbers

from . import _C

_TABLE = _C._op_table()
_ID = {row["name"]: row["id"] for row in _TABLE}
_py_max, _py_min, _py_sum, _py_abs, _py_round = builtins.max, builtins.min, builtins.sum, builtins.abs, builtins.round

__all__ = []  # filled as functions are defined
# Tensor methods for _methods.py to install: name -> (function, over_c). A
# function made from the table becomes a method where _TensorBase has none
# (its C methods are faster); one written here takes more of PyTorch's
# arguments (add's alpha), so it replaces a C method of its name.
_METHODS = {}


def _export(fn, name=None, method=False):
    """fn becomes ember.<name> (default: its own name) and, with method,
    Tensor.<name>: x.name(...) == ember.name(x, ...)."""
    name = name or fn.__name__
    globals()[name] = fn
    if name not in __all__:
        __all__.append(name)
    if method:
        _METHODS[name] = (fn, True)
    return fn


def _method(fn):
    """@_method: ember.<name> and Tensor.<name>."""
    return _export(fn, method=True)


# ---------------------------------------------------------------- elementwise

def _from_table(row):
    """ember.<name>(input) or (input, other) for an elementwise op of the
    table: the same kernel, the same promotion, broadcasting."""
    op, name = row["id"], row["name"]
    if row["kind"] == "unary":
        def fn(input):
            return _C._ew(op, input)
        fn.__doc__ = f"{name}(input) -> Tensor, elementwise."
    else:
        def fn(input, other):
            return _C._ew(op, input, other)
        fn.__doc__ = f"{name}(input, other) -> Tensor, elementwise with broadcasting."
    fn.__name__ = fn.__qualname__ = name
    return fn


# Every unary and binary op of the table, as a function and (where PyTorch
# has one) a method; the definitions below that take more arguments (add's
# alpha, div's rounding_mode, round's decimals, gelu's approximate) replace
# their plain forms.
_ELEMENTWISE = [row for row in _TABLE if row["kind"] in ("unary", "binary") and not row["hidden"]]
for _row in _ELEMENTWISE:
    _export(_from_table(_row))
    if _row["method"]:
        _METHODS[_row["name"]] = (globals()[_row["name"]], False)

# PyTorch's other names for them
_ALIASES = {"negative": "neg", "absolute": "abs", "greater": "gt",
            "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
            "fix": "trunc"}
for _alias, _target in _ALIASES.items():
    _export(globals()[_target], _alias)
    _METHODS[_alias] = _METHODS[_target]


def _numbers(input, other):
    """torch.add(2, 3.5) and its kind (add, sub, mul, div, floor_divide):
    two numbers make the first a 0-d tensor of its own dtype (int64,
    float32, bool), as PyTorch's scalar overloads do, and two floats a
    float64 one (both are wrapped numbers there, which keep float64)."""
    if not isinstance(input, _C._TensorBase) and not isinstance(other, _C._TensorBase) and \
            isinstance(input, numbers.Number):
        both_float = isinstance(input, float) and isinstance(other, float)
        return _C.tensor(input, dtype=_C.float64) if both_float else _C.tensor(input)
    return input


@_method
def mul(input, other):
    """input * other"""
    return _C._ew(_ID["mul"], _numbers(input, other), other)


@_method
def floor_divide(input, other):
    """input // other (rounded towards minus infinity)"""
    return _C._ew(_ID["floor_divide"], _numbers(input, other), other)


_export(mul, "multiply", method=True)


@_method
def add(input, other, *, alpha=1):
    """input + alpha * other"""
    input = _numbers(input, other)
    if alpha != 1:
        other = _C._ew(_ID["mul"], other, alpha)
    return _C._ew(_ID["add"], input, other)


@_method
def sub(input, other, *, alpha=1):
    """input - alpha * other"""
    input = _numbers(input, other)
    if alpha != 1:
        other = _C._ew(_ID["mul"], other, alpha)
    return _C._ew(_ID["sub"], input, other)


_export(sub, "subtract", method=True)


@_method
def div(input, other, *, rounding_mode=None):
    """True division, or rounded: rounding_mode='trunc' or 'floor'."""
    input = _numbers(input, other)
    if rounding_mode is None:
        return _C._ew(_ID["div"], input, other)
    if rounding_mode == "floor":
        return _C._ew(_ID["floor_divide"], input, other)
    if rounding_mode == "trunc":
        if _C.result_type(input, other).is_floating_point:
            return _C._ew(_ID["trunc"], _C._ew(_ID["div"], input, other))
        # integers exactly (not through a float division, which rounds past
        # 2**24), and raising on a zero divisor as fmod does: input - fmod
        # is a multiple of other, so the floor division is exact
        return _C._ew(_ID["floor_divide"], _C._ew(_ID["sub"], input, _C._ew(_ID["fmod"], input, other)), other)
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


_export(div, "divide", method=True)
_export(div, "true_divide", method=True)


@_method
def round(input, *, decimals=0):
    """Rounds half to even, optionally at `decimals` places."""
    if decimals == 0:
        return _C._ew(_ID["round"], input)
    scale = 10.0 ** decimals
    return _C._ew(_ID["round"], input * scale) / scale


@_method
def square(input):
    """input * input; bools square to int64, as pow(input, 2) gives in PyTorch."""
    if input.dtype == _C.bool:
        input = input.to(_C.int64)
    return input * input


@_export
def where(condition, input=None, other=None):
    """where(cond, x, y): x where cond else y; where(cond): nonzero(cond, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    return _C._ew(_ID["where"], condition, input, other)


def _bound(input, v, high):
    """A missing clamp bound: +-inf for floats, the dtype's limit for integers."""
    if v is not None:
        return v
    dt = input.dtype
    if dt.is_floating_point:
        return math.inf if high else -math.inf
    limits = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1), "int16": (-2**15, 2**15 - 1),
              "int8": (-128, 127), "uint8": (0, 255), "bool": (False, True)}
    lo, hi = limits[repr(dt).split(".")[-1]]
    from . import tensor
    return tensor(hi if high else lo, dtype=dt)


@_method
def clamp(input, min=None, max=None):
    """Limits values to [min, max] (either may be None; tensors broadcast)."""
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    r = _C._ew(_ID["clamp"], input, _bound(input, min, False), _bound(input, max, True))
    nan = _nan_bounds(min, max)
    return r if nan is None or not r.is_floating_point() else where(nan, math.nan, r)


def _nan_bounds(min, max):
    """Where a tensor bound is NaN, or None when no bound is a float tensor.
    PyTorch's clamp ignores a NaN number bound (std::max, std::min) but
    propagates a NaN tensor bound (clamp.Tensor is maximum, then minimum),
    and a NaN number bound when both bounds are given."""
    if isinstance(min, numbers.Real) and isinstance(max, numbers.Real) and (math.isnan(min) or math.isnan(max)):
        return _C.tensor(True)
    nan = None
    for b in (min, max):
        if isinstance(b, _C._TensorBase) and b.is_floating_point():
            m = b.isnan()
            nan = m if nan is None else nan | m
    return nan


_export(clamp, "clip", method=True)


@_method
def lerp(input, end, weight):
    """input + weight * (end - input)"""
    return _C._ew(_ID["lerp"], input, end, weight)


@_export
def gelu(input, approximate="none"):
    """GELU: x * Phi(x) (exact, with erf) or its tanh approximation."""
    if approximate == "none":
        return _C._ew(_ID["gelu"], input)
    if approximate == "tanh":
        return _C._ew(_ID["gelu_tanh"], input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _mul_add(x, a, b):
    """x * a + b, rounded once (a fused multiply-add for floats)."""
    return _C._ew(_ID["mul_add"], x, a, b)


@_export
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold."""
    return _C._ew(_ID["softplus"], input, float(beta), float(threshold))


# ---------------------------------------------------------------- reductions

class return_types:
    """The named tuples reductions return, under PyTorch's names
    (torch.return_types.max(values=..., indices=...))."""
    max = collections.namedtuple("max", ["values", "indices"])
    min = collections.namedtuple("min", ["values", "indices"])


for _t in (return_types.max, return_types.min):
    _t.__module__ = "ember.return_types"


def _reduce(name, input, dim=None, keepdim=False, correction=0.0, ord=2.0):
    return _C._reduce(_ID[name], input, dim, bool(keepdim), float(correction), float(ord))


def _with_dtype(r, dtype):
    return r if dtype is None or r.dtype == dtype else r.to(dtype)


@_method
def sum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum over dim (all elements by default); bools and integers sum to
    int64 unless dtype is given."""
    x = input if dtype is None else input.to(dtype)
    return _with_dtype(_reduce("sum", x, dim, keepdim), dtype)


@_method
def mean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean over dim (floating-point inputs, or give a dtype)."""
    x = input if dtype is None else input.to(dtype)
    return _reduce("mean", x, dim, keepdim)


@_method
def amax(input, dim=(), keepdim=False):
    """The largest value over dim (all dims by default); NaN wins."""
    return _reduce("amax", input, None if dim == () else dim, keepdim)


@_method
def amin(input, dim=(), keepdim=False):
    """The smallest value over dim (all dims by default); NaN wins."""
    return _reduce("amin", input, None if dim == () else dim, keepdim)


def _logical(name):
    def fn(input, dim=None, keepdim=False):
        r = _reduce(name, input, dim, keepdim)
        return r.to(_C.uint8) if input.dtype == _C.uint8 else r  # as PyTorch 1.13
    fn.__doc__ = f"{name}(input, dim=None, keepdim=False): bool (uint8 for uint8 inputs)"
    fn.__name__ = fn.__qualname__ = name
    return fn


_export(_logical("all"), "all", method=True)
_export(_logical("any"), "any", method=True)


@_method
def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over dim, without overflow."""
    return _reduce("logsumexp", input, dim, keepdim)


@_method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product over one dim (all elements by default)."""
    if dim is not None and not isinstance(dim, numbers.Integral):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    x = input if dtype is None else input.to(dtype)
    return _with_dtype(_reduce("prod", x, dim, keepdim), dtype)


def _minmax(name, input, dim, keepdim):
    if dim is None or not isinstance(dim, numbers.Integral):
        if not isinstance(dim, (type(None), numbers.Integral)):  # max(a, b): the elementwise form
            return _C._ew(_ID["maximum" if name == "max" else "minimum"], input, dim)
        return _reduce("amax" if name == "max" else "amin", input, None, False)
    indices = _reduce("argmax" if name == "max" else "argmin", input, dim, keepdim)
    if input.requires_grad and _C.is_grad_enabled() and input.ndim:
        # PyTorch's max(dim) sends the gradient to the one element the index
        # names (amax shares it among ties): read the values at the indices
        at = indices if keepdim else indices.unsqueeze(dim)
        values = input.gather(dim, at)
        values = values if keepdim else values.squeeze(dim)
    else:
        values = _reduce("amax" if name == "max" else "amin", input, dim, keepdim)
    return getattr(return_types, name)(values, indices)


@_method
def max(input, dim=None, keepdim=False):
    """max(x): the largest value; max(x, dim): (values, indices); max(x, y): maximum."""
    return _minmax("max", input, dim, keepdim)


@_method
def min(input, dim=None, keepdim=False):
    """min(x): the smallest value; min(x, dim): (values, indices); min(x, y): minimum."""
    return _minmax("min", input, dim, keepdim)


@_method
def argmax(input, dim=None, keepdim=False):
    return _reduce("argmax", input, dim, keepdim)


@_method
def argmin(input, dim=None, keepdim=False):
    return _reduce("argmin", input, dim, keepdim)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1.0 if unbiased in (None, True) else 0.0


@_method
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dim, dividing by N - correction (default 1)."""
    if isinstance(dim, bool):  # var(x, unbiased)
        dim, unbiased = None, dim
    if isinstance(unbiased, (tuple, list)) or (isinstance(unbiased, int) and not isinstance(unbiased, bool)):
        dim, unbiased = unbiased, None  # var(x, dim)
    return _reduce("var", input, dim, keepdim, _correction(unbiased, correction))


@_method
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over dim, dividing by N - correction (default 1)."""
    if isinstance(dim, bool):  # std(x, unbiased)
        dim, unbiased = None, dim
    if isinstance(unbiased, (tuple, list)) or (isinstance(unbiased, int) and not isinstance(unbiased, bool)):
        dim, unbiased = unbiased, None
    return _reduce("std", input, dim, keepdim, _correction(unbiased, correction))


@_method
def norm(input, p="fro", dim=None, keepdim=False):
    """The p-norm over dim (all elements by default); p='fro' is 2."""
    if p == "fro" or p is None:
        p = 2.0
    if p == "nuc":  # the sum of the singular values of the matrices in dim (the last two by default)
        from .linalg import matrix_norm
        return matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)
    return _reduce("norm", input, dim, keepdim, ord=float(p))


@_method
def cumsum(input, dim, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return _C._scan(_ID["cumsum"], x, dim)


@_method
def cumprod(input, dim, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return _C._scan(_ID["cumprod"], x, dim)


@_method
def softmax(input, dim, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return _C._scan(_ID["softmax"], x, dim)


@_method
def log_softmax(input, dim, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return _C._scan(_ID["log_softmax"], x, dim)


# ---------------------------------------------------------------- shapes

def _sizes(args):
    """f(2, 3) or f((2, 3)) or f([2, 3])."""
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        return tuple(args[0])
    return tuple(args)


@_method
def flatten(input, start_dim=0, end_dim=-1):
    n = input.ndim
    if n == 0:
        return input.reshape(1)
    s, e = start_dim % n, end_dim % n
    if s > e:
        raise IndexError("flatten: start_dim cannot come after end_dim")
    shape = input.shape
    if s == e:
        return input
    n = 1
    for d in shape[s:e + 1]:  # (the size itself, not -1: a zero-size tensor's -1 is ambiguous)
        n *= d
    return input.reshape(*shape[:s], n, *shape[e + 1:])


@_method
def unflatten(input, dim, sizes):
    d = dim % input.ndim
    return input.reshape(*input.shape[:d], *sizes, *input.shape[d + 1:])


@_method
def squeeze(input, dim=None):
    return _C._squeeze(input, dim)


@_method
def unsqueeze(input, dim):
    return _C._unsqueeze(input, dim)


@_method
def select(input, dim, index):
    """The slice at index along dim, without that dim (a view): x[..., index, ...]."""
    return _C._select(input, dim, index)


@_method
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal `offset` of the matrices over dim1 and dim2 (a view:
    writing into it writes into input), its entries as the last dim."""
    return _C._diagonal(input, offset, dim1, dim2)


@_method
def narrow(input, dim, start, length):
    n = input.shape[dim]
    if start < 0:
        start += n
    if start < 0 or start + length > n or length < 0:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n})")
    return _C._slice(input, dim, start, start + length, 1)


@_method
def movedim(input, source, destination):
    n = input.ndim
    src = [s % n for s in ((source,) if isinstance(source, int) else source)]
    dst = [d % n for d in ((destination,) if isinstance(destination, int) else destination)]
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return input.permute(*order)


@_method
def broadcast_to(input, shape):
    return input.expand(*shape)


@_method
def flip(input, dims):
    return _C._flip(input, dims)


@_method
def fliplr(input):
    return _C._flip(input, 1)


@_method
def flipud(input):
    return _C._flip(input, 0)


@_method
def roll(input, shifts, dims=None):
    if dims is None:  # roll the flattened tensor
        return _C._roll(input.reshape(-1), shifts, 0).reshape(*input.shape)
    return _C._roll(input, shifts, dims)


_MAX_OPERANDS = 64  # (one op's operands, runtime/dispatch.c's MAX_IO)


@_export
def cat(tensors, dim=0):
    tensors = list(tensors)
    while len(tensors) > _MAX_OPERANDS:  # a tree of cats: the same result, one more copy per level
        tensors = [_C._cat(tensors[i:i + _MAX_OPERANDS], dim) for i in range(0, len(tensors), _MAX_OPERANDS)]
    return _C._cat(tensors, dim)


_export(cat, "concat")
_export(cat, "concatenate")


@_export
def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty list of tensors")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, got {sorted(shapes)}")
    return cat([_C._unsqueeze(t, dim) for t in tensors], dim)


@_export
def hstack(tensors):
    tensors = list(tensors)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@_export
def vstack(tensors):
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


@_method
def split(tensor, split_size_or_sections, dim=0):
    n = tensor.shape[dim]
    if isinstance(split_size_or_sections, numbers.Integral):
        size = int(split_size_or_sections)
        if size <= 0 and n > 0:
            raise RuntimeError("split: split_size must be positive")
        sections = [_py_min(size, n - i) for i in range(0, n, size)] if n else [0]
    else:
        sections = list(split_size_or_sections)
        if _py_sum(sections) != n:
            raise RuntimeError(f"split: sections {sections} do not sum to the dimension's size {n}")
    # views sharing one autograd node, whose backward is one cat; more sections than one op returns
    # come from a split into groups of sections, each split again
    explicit = not isinstance(split_size_or_sections, numbers.Integral)
    if len(sections) <= _MAX_OPERANDS:
        return _C._split(tensor, dim, sections, explicit)
    groups = [sections[i:i + _MAX_OPERANDS] for i in range(0, len(sections), _MAX_OPERANDS)]
    parts = _C._split(tensor, dim, [_py_sum(g) for g in groups], True)
    return tuple(p for part, g in zip(parts, groups) for p in _C._split(part, dim, g, True))


@_method
def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk: the number of chunks must be positive")
    n = input.shape[dim]
    size = -(-n // chunks) if n else 1
    return split(input, size, dim)


@_method
def tensor_split(input, indices_or_sections, dim=0):
    n = input.shape[dim]
    if isinstance(indices_or_sections, numbers.Integral):
        k = int(indices_or_sections)
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return split(input, sizes, dim)
    if isinstance(indices_or_sections, _C._TensorBase):  # a 0-d tensor counts sections, a 1-d one indices
        if indices_or_sections.dtype.is_floating_point or indices_or_sections.dtype == _C.bool \
                or indices_or_sections.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have a 0-d or 1-d integer "
                               f"tensor, but got {indices_or_sections.dtype} of {indices_or_sections.ndim} dims")
        if indices_or_sections.ndim == 0:
            return tensor_split(input, int(indices_or_sections.item()), dim)
        indices_or_sections = indices_or_sections.tolist()
    bounds = [0] + [i if i >= 0 else i + n for i in indices_or_sections] + [n]
    return tuple(_C._slice(input, dim, a, _py_max(a, b), 1) for a, b in zip(bounds, bounds[1:]))


@_method
def unbind(input, dim=0):
    return tuple(_C._select(input, dim, i) for i in range(input.shape[dim]))


@_method
def repeat(input, *sizes):
    sizes = _sizes(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("repeat: the number of repeat dims cannot be smaller than the tensor's dims")
    x = input.reshape(*([1] * (len(sizes) - input.ndim)), *input.shape)
    # [a, b] repeated [r, s]: view as [1, a, 1, b], expand to [r, a, s, b], copy.
    inter, expand = [], []
    for r, n in zip(sizes, x.shape):
        inter += [1, n]
        expand += [r, n]
    return x.reshape(*inter).expand(*expand).reshape(*[r * n for r, n in zip(sizes, x.shape)])


@_method
def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, *dims)


@_method
def tril(input, diagonal=0):
    return _C._tril(input, diagonal)


@_method
def triu(input, diagonal=0):
    return _C._triu(input, diagonal)


# ---------------------------------------------------------------- indexing

@_method
def index_select(input, dim, index):
    return _C._index_select(input, dim, index)


@_method
def gather(input, dim, index):
    return _C._gather(input, dim, index)


@_method
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    if src is None:
        src = value
    if reduce is not None:
        from ._scatter_reduce import scatter_with_reduce
        return scatter_with_reduce(input, dim, index, src, reduce)
    return _C._scatter(input, dim, index, src, False)


@_method
def scatter_add(input, dim, index, src):
    return _C._scatter(input, dim, index, src, True)


@_method
def masked_select(input, mask):
    return _C._masked_select(input, mask)


@_method
def masked_fill(input, mask, value):
    return _C._ew(_ID["where"], mask, value, input)


@_method
def nonzero(input, *, as_tuple=False):
    r = _C._nonzero(input)
    if as_tuple:
        if input.ndim == 0:
            return (_C._select(r, 1, 0),) if r.shape[1] else (r.reshape(-1),)
        return tuple(_C._select(r, 1, i) for i in range(input.ndim))
    return r


@_method
def argwhere(input):
    return _C._nonzero(input)


@_export
def one_hot(tensor, num_classes=-1):
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    return _C._one_hot(tensor, num_classes)


@_export
def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to (NumPy's rule)."""
    out = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for i, n in enumerate(shape):
            j = len(out) - len(shape) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: "
                                   f"{list(shapes)}")
    return _C.Size(out)


@_export
def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape (views, as PyTorch's)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t if tuple(t.shape) == tuple(shape) else t.expand(*shape) for t in tensors)


@_export
def take_along_dim(input, indices, dim=None):
    """input's values at `indices` along dim (of the flattened input when dim
    is None); input and indices broadcast in every other dim."""
    if dim is None:
        return _C._gather(input.reshape(-1), 0, indices.reshape(-1))
    n = _py_max(input.ndim, indices.ndim)
    d = dim % n if n else 0
    x = input.reshape(*([1] * (n - input.ndim)), *input.shape)
    i = indices.reshape(*([1] * (n - indices.ndim)), *indices.shape)
    try:
        common = list(broadcast_shapes(x.shape[:d] + (1,) + x.shape[d + 1:],
                                       i.shape[:d] + (1,) + i.shape[d + 1:]))
    except RuntimeError:
        raise RuntimeError(f"take_along_dim: input of shape {list(input.shape)} and indices of "
                           f"shape {list(indices.shape)} do not broadcast outside dim {dim}") from None
    x = x.expand(*common[:d], x.shape[d], *common[d + 1:])
    i = i.expand(*common[:d], i.shape[d], *common[d + 1:])
    return _C._gather(x, d, i)


# ---------------------------------------------------------------- linear algebra

def _dims(t):
    return "x".join(str(n) for n in t.shape) or "scalar"


@_method
def mm(input, mat2):
    """The matrix product of two 2-d tensors."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-d tensors, got {input.ndim}-d and {mat2.ndim}-d")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({_dims(input)} and "
                           f"{_dims(mat2)})")
    return input @ mat2


@_method
def bmm(input, mat2):
    """Batched matrix products of two 3-d tensors with equal batch sizes."""
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-d tensors, got {input.ndim}-d and {mat2.ndim}-d")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"bmm: batch1 and batch2 shapes cannot be multiplied ({_dims(input)} "
                           f"and {_dims(mat2)})")
    return input @ mat2


@_method
def mv(input, vec):
    """Matrix (2-d) times vector (1-d)."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"mv: expected a 2-d and a 1-d tensor, got {input.ndim}-d and {vec.ndim}-d")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"mv: size mismatch, got input ({_dims(input)}) and vec ({_dims(vec)})")
    return input @ vec


def _beta_alpha(input, p, beta, alpha):
    """beta * input + alpha * p, skipping what beta = 0 and 1 do not need (as
    PyTorch, beta = 0 ignores input, NaNs included)."""
    if alpha != 1:
        p = p * alpha
    return p if beta == 0 else (p + input if beta == 1 else p + input * beta)


@_method
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)"""
    return _beta_alpha(input, mm(mat1, mat2), beta, alpha)


@_method
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2)"""
    return _beta_alpha(input, bmm(batch1, batch2), beta, alpha)


@_method
def outer(input, vec2):
    return _C._unsqueeze(input, 1) * _C._unsqueeze(vec2, 0)


_export(outer, "ger", method=True)


@_method
def dot(input, other):
    """The inner product of two 1-d tensors of the same size and dtype."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"dot: 1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] and "
                           f"src [{other.shape[0]}] to have the same number of elements")
    return input @ other


@_method
def inner(input, other):
    """Sums of products over the last dims (a product for 0-d operands)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner: last dims differ ({_dims(input)} and {_dims(other)})")
    r = input.reshape(-1, input.shape[-1]) @ other.reshape(-1, other.shape[-1]).t()
    return r.reshape(*input.shape[:-1], *other.shape[:-1])


@_export
def einsum(equation, *operands):
    """Einstein summation over up to 26 letters: transposes, diagonals are
    not supported; contractions go to batched matmul, the rest to sums."""
    from ._einsum import einsum as _einsum
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _einsum(equation, operands)


from ._sorting import *  # noqa: E402,F401,F403  (registers its functions and methods here)
from ._sampling import *  # noqa: E402,F401,F403  (likewise)
from ._extras import *  # noqa: E402,F401,F403  (likewise)
from ._math_extras import *  # noqa: E402,F401,F403  (likewise)
from ._tensor_extras import *  # noqa: E402,F401,F403  (likewise)
from ._scatter_reduce import *  # noqa: E402,F401,F403  (likewise)
from ._numeric import *  # noqa: E402,F401,F403  (likewise)
