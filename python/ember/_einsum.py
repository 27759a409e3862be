"""einsum as permutes, reshapes, sums and batched matmuls.

Operands are contracted left to right. For each pair, every letter is a batch
letter (in both, still needed), a contracted letter (in both, not needed
later), or belongs to one side (kept, or summed out first). The pair becomes
one bmm: [batch, left, contracted] @ [batch, contracted, right]. Repeated
letters within one operand (diagonals) and '...' are not supported.
"""


def _parse(equation, n):
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise NotImplementedError("einsum: '...' (ellipsis) is not implemented in ember yet")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != n:
        raise RuntimeError(f"einsum: the equation has {len(inputs)} operands but {n} were given")
    for s in inputs:
        if len(set(s)) != len(s):
            raise NotImplementedError(f"einsum: repeated subscripts in one operand ('{s}') are not "
                                      "implemented in ember yet")
        if not all(c.isalpha() for c in s):
            raise RuntimeError(f"einsum: subscripts must be letters, got '{s}'")
    if not arrow:  # implicit output: letters seen once, alphabetically
        counts = {}
        for s in inputs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1))
    for c in rhs:
        if not any(c in s for s in inputs):
            raise RuntimeError(f"einsum: output subscript '{c}' does not appear in the inputs")
    return inputs, rhs


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
        if c in size and size[c] != b.shape[sb.index(c)] and size[c] != 1 and b.shape[sb.index(c)] != 1:
            raise RuntimeError(f"einsum: subscript '{c}' has size {size[c]} and {b.shape[sb.index(c)]}")
        size.setdefault(c, b.shape[sb.index(c)])
    a = a.permute(*[sa.index(c) for c in batch + left + contract])
    b = b.permute(*[sb.index(c) for c in batch + contract + right])

    def n(cs):
        p = 1
        for c in cs:
            p *= size[c]
        return p
    nb = [size[c] for c in batch]
    a = a.expand(*nb, *[size[c] for c in left + contract]).reshape(n(batch), n(left), n(contract))
    b = b.expand(*nb, *[size[c] for c in contract + right]).reshape(n(batch), n(contract), n(right))
    r = (a @ b).reshape(*nb, *[size[c] for c in left], *[size[c] for c in right])
    return r, "".join(batch + left + right)


def einsum(equation, operands):
    if not operands:
        raise RuntimeError("einsum: expected at least one operand")
    inputs, out = _parse(equation, len(operands))
    for s, t in zip(inputs, operands):
        if len(s) != t.ndim:
            raise RuntimeError(f"einsum: subscripts '{s}' do not match a {t.ndim}-d operand")
    x, sx = operands[0], inputs[0]
    for i in range(1, len(operands)):
        later = set(out).union(*[set(s) for s in inputs[i + 1:]])
        x, sx = _pair(x, sx, operands[i], inputs[i], later)
    x, sx = _sum_out(x, sx, set(out))
    return x.permute(*[sx.index(c) for c in out]) if sx != out else x
