"""einsum as diagonals, permutes, reshapes, sums and batched matmuls.

Each operand's subscripts are first made plain: '...' becomes fresh letters
(right-aligned across operands, so ellipsis dims broadcast), and a letter
repeated within one operand takes that diagonal. Operands are then
contracted left to right. For each pair, every letter is a batch letter (in
both, still needed), a contracted letter (in both, not needed later), or
belongs to one side (kept, or summed out first). The pair becomes one bmm:
[batch, left, contracted] @ [batch, contracted, right]. Size-1 dims
broadcast against their partner's size.
"""

import string

from . import _C

# Fresh letters for ellipsis dims; equations use ASCII letters only.
_ELLIPSIS_LETTERS = "".join(chr(c) for c in range(0x3b1, 0x3b1 + 16))  # Greek


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise RuntimeError(f"einsum(): {len(inputs)} operands in the equation '{equation}' but "
                           f"{len(operands)} tensors were given")
    n_ell = 0
    plain = []
    for s, t in zip(inputs, operands):
        letters = s.replace("...", "")
        if not all(c in string.ascii_letters for c in letters) or s.count("...") > 1:
            raise RuntimeError(f"einsum(): invalid subscripts '{s}' in the equation '{equation}' "
                               "(letters and at most one '...')")
        if "..." in s:
            k = t.ndim - len(letters)
            if k < 0:
                raise RuntimeError(f"einsum(): subscripts '{s}' have more dims than the "
                                   f"{t.ndim}-d operand")
            n_ell = max(n_ell, k)
        elif len(s) != t.ndim:
            raise RuntimeError(f"einsum(): the subscripts '{s}' do not match the operand's "
                               f"{t.ndim} dims (shape {list(t.shape)})")
    ell = _ELLIPSIS_LETTERS[:n_ell]
    for s, t in zip(inputs, operands):
        k = t.ndim - len(s.replace("...", ""))
        plain.append(s.replace("...", ell[n_ell - k:]) if "..." in s else s)
    if arrow:
        if rhs.count("...") > 1 or not all(c in string.ascii_letters for c in rhs.replace("...", "")):
            raise RuntimeError(f"einsum(): invalid output subscripts '{rhs}'")
        out = rhs.replace("...", ell)  # without '...' there, ellipsis dims are summed
        for c in out:
            if not any(c in s for s in plain):
                raise RuntimeError(f"einsum(): output subscript '{c}' does not appear in the "
                                   f"inputs of '{equation}'")
        if len(set(out)) != len(out):
            raise RuntimeError(f"einsum(): output subscript repeated in '{equation}'")
    else:  # implicit output: the ellipsis dims, then letters seen once, alphabetically
        counts = {}
        for s in plain:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return plain, out


def _diagonals(x, subs):
    """Takes the diagonal for every letter repeated in subs."""
    while len(set(subs)) != len(subs):
        c = next(c for c in subs if subs.count(c) > 1)
        pos = [i for i, d in enumerate(subs) if d == c]
        sizes = {x.shape[p] for p in pos}
        if len(sizes) != 1:
            raise RuntimeError(f"einsum(): subscript '{c}' is repeated for dims of different "
                               f"sizes {sorted(sizes)}")
        rest = [i for i in range(len(subs)) if i not in pos]
        x = x.permute(*pos, *rest)
        ar = _C.arange(x.shape[0])
        x = x[(ar,) * len(pos)]
        subs = c + "".join(subs[i] for i in rest)
    return x, subs


def _sum_out(x, subs, keep):
    """Sums the letters of subs not in keep; returns (tensor, remaining subs)."""
    drop = [i for i, c in enumerate(subs) if c not in keep]
    if drop:
        x = x.sum(dim=drop)
    return x, "".join(c for c in subs if c in keep)


def _pair(a, sa, b, sb, keep):
    """Contracts a (subscripts sa) with b (sb), keeping the letters in keep."""
    a, sa = _sum_out(a, sa, set(sb) | keep)
    b, sb = _sum_out(b, sb, set(sa) | keep)
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {c: a.shape[sa.index(c)] for c in sa}
    for c in sb:
        n = b.shape[sb.index(c)]
        if c in size and size[c] != n and 1 not in (size[c], n):
            raise RuntimeError(f"einsum(): subscript '{c}' has size {n} for one operand which does "
                               f"not broadcast with size {size[c]} of another")
        if size.get(c, 1) == 1:
            size[c] = n
    a = a.permute(*[sa.index(c) for c in batch + left + contract])
    b = b.permute(*[sb.index(c) for c in batch + contract + right])

    def n(cs):
        p = 1
        for c in cs:
            p *= size[c]
        return p
    sizes = [size[c] for c in batch]
    a = a.expand(*sizes, *[size[c] for c in left + contract]).reshape(n(batch), n(left), n(contract))
    b = b.expand(*sizes, *[size[c] for c in contract + right]).reshape(n(batch), n(contract), n(right))
    r = (a @ b).reshape(*sizes, *[size[c] for c in left], *[size[c] for c in right])
    return r, "".join(batch + left + right)


def einsum(equation, operands):
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    inputs, out = _parse(equation, operands)
    ops = []
    for s, t in zip(inputs, operands):
        ops.append(_diagonals(t, s))
    x, sx = ops[0]
    for i in range(1, len(ops)):
        later = set(out).union(*[set(s) for _, s in ops[i + 1:]])
        x, sx = _pair(x, sx, ops[i][0], ops[i][1], later)
    x, sx = _sum_out(x, sx, set(out))
    return x.permute(*[sx.index(c) for c in out]) if sx != out else x
