"""multi_head_attention_forward: PyTorch's functional multi-head attention,
which nn.MultiheadAttention calls with its parameters.

Inputs are (L, N, E) (batch second) or unbatched (L, E). The q/k/v
projections are one packed in_proj_weight (one GEMM when query, key and
value are the same tensor: self-attention), or three separate weights
(use_separate_proj_weight, for keys and values of other sizes). A bool
attn_mask or key_padding_mask marks with True what may NOT be attended
to; a float one is added to the scores. bias_k/bias_v append a learned
key and value, add_zero_attn a zero one; static_k/static_v replace the
projected keys and values, already split into heads (N * H, S, E / H).
Returns (output, weights averaged over heads, or per head, or None)."""

import math

from .. import _C, _creation, _ops


def _as_additive(mask, what, dtype):
    if mask is None:
        return None
    if mask.dtype == _C.bool:
        return _creation.zeros(*mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {what} are supported")
    return mask.to(dtype)


def _one_more_key(mask):
    """An additive mask with a column of zeros appended (an added key is
    never masked)."""
    from .functional import pad
    return None if mask is None else pad(mask, (0, 1))


def _project(query, key, value, in_proj_weight, in_proj_bias, separate, q_w, k_w, v_w):
    from .functional import linear
    bs = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
    if separate:
        return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), (q_w, k_w, v_w), bs))
    if query is key and key is value:  # self-attention: one projection
        return linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
    return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), in_proj_weight.chunk(3), bs))


def _heads(x, n_heads, head_dim, static, what):
    """(S, N, E) -> (N * H, S, hd), or the given static keys/values."""
    if static is None:
        return x.reshape(x.shape[0], -1, head_dim).transpose(0, 1)
    if static.shape[0] != x.shape[1] * n_heads or static.shape[2] != head_dim:
        raise AssertionError(f"expecting static_{what} of shape (batch * num_heads, S, head_dim) = "
                             f"({x.shape[1] * n_heads}, S, {head_dim}), but got {tuple(static.shape)}")
    return static


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    from .functional import dropout, linear
    unbatched = query.ndim == 2
    if unbatched:
        same = query is key and key is value
        query = query.unsqueeze(1)
        key, value = (query, query) if same else (key.unsqueeze(1), value.unsqueeze(1))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    H = num_heads
    hd = E // H
    if hd * H != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {H}")
    q, k, v = _project(query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight,
                       q_proj_weight, k_proj_weight, v_proj_weight)
    S = key.shape[0]
    if is_causal and attn_mask is None:
        attn_mask = _creation.ones(L, S, dtype=_C.bool).triu(1)
    mask = _as_additive(attn_mask, "attn_mask", q.dtype)
    pad = _as_additive(key_padding_mask, "key_padding_mask", q.dtype)
    if bias_k is not None and bias_v is not None:  # one more key and value, which every query may attend to
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key or value.")
        k = _ops.cat([k, bias_k.expand(1, N, E)], 0)
        v = _ops.cat([v, bias_v.expand(1, N, E)], 0)
        mask, pad = _one_more_key(mask), _one_more_key(pad)
    q = q.reshape(L, N * H, hd).transpose(0, 1)
    k = _heads(k, H, hd, static_k, "k")
    v = _heads(v, H, hd, static_v, "v")
    if add_zero_attn:  # a key and value of zeros
        zeros = _creation.zeros(N * H, 1, hd, dtype=k.dtype)
        k, v = _ops.cat([k, zeros], 1), _ops.cat([v, zeros], 1)
        mask, pad = _one_more_key(mask), _one_more_key(pad)
    S = k.shape[1]
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(hd))
    if mask is not None:
        if mask.ndim == 2 and tuple(mask.shape) != (L, S):
            raise RuntimeError(f"The shape of the 2D attn_mask is {list(mask.shape)}, but should be {[L, S]}.")
        if mask.ndim == 3 and tuple(mask.shape) != (N * H, L, S):
            raise RuntimeError(f"The shape of the 3D attn_mask is {list(mask.shape)}, but should be "
                               f"{[N * H, L, S]}.")
        scores = scores + mask
    if pad is not None:
        if tuple(pad.shape) != (N, S):
            raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got {tuple(pad.shape)}")
        scores = (scores.reshape(N, H, L, S) + pad.reshape(N, 1, 1, S)).reshape(N * H, L, S)
    weights = scores.softmax(-1)
    if training and dropout_p > 0:
        weights = dropout(weights, dropout_p)
    out = linear((weights @ v).transpose(0, 1).reshape(L, N, E), out_proj_weight, out_proj_bias)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(N, H, L, S)
    if average_attn_weights:
        weights = weights.mean(1)
    return out, weights.squeeze(0) if unbatched else weights
