"""MultiheadAttention."""

import math

from ... import _C, _creation, _ops
from .. import functional as F, init
from ..parameter import Parameter
from .linear import Linear, NonDynamicallyQuantizableLinear
from .module import Module


def _one_more_key(mask):
    """An additive mask with a column of zeros appended (an added key is
    never masked)."""
    return None if mask is None else F.pad(mask, (0, 1))


class MultiheadAttention(Module):
    """PyTorch's MultiheadAttention: packed q/k/v input projections
    (in_proj_weight, xavier-uniform; in_proj_bias zero), num_heads
    scaled-dot-product attentions, then out_proj. Inputs are (L, N, E), or
    (N, L, E) with batch_first, or unbatched (L, E). A bool attn_mask or
    key_padding_mask marks with True what may NOT be attended to; a float
    one is added to the scores. Returns (output, weights averaged over heads
    or per head, or None without need_weights)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_creation.empty(3 * embed_dim, embed_dim, dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:  # (keys and values of other sizes: a projection each)
            self.q_proj_weight = Parameter(_creation.empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(_creation.empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(_creation.empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        self.add_zero_attn = add_zero_attn
        if bias:
            self.in_proj_bias = Parameter(_creation.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:  # (after out_proj, as PyTorch orders its parameters) (a learned key and value appended to every sequence)
            self.bias_k = Parameter(_creation.empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(_creation.empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _as_additive(self, mask, what, dtype):
        if mask is None:
            return None
        if mask.dtype == _C.bool:
            return _creation.zeros(*mask.shape, dtype=dtype).masked_fill(mask, -math.inf)
        if not mask.dtype.is_floating_point:
            raise AssertionError(f"only bool and floating types of {what} are supported")
        return mask.to(dtype)

    def _project(self, query, key, value):
        """The input projections of query, key and value (packed when they
        share a size: one GEMM for self-attention)."""
        b = self.in_proj_bias
        bs = b.chunk(3) if b is not None else (None, None, None)
        if not self._qkv_same_embed_dim:
            return tuple(F.linear(x, w, bi) for x, w, bi in zip(
                (query, key, value), (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight), bs))
        if query is key and key is value:  # self-attention: one projection
            return F.linear(query, self.in_proj_weight, b).chunk(3, -1)
        return tuple(F.linear(x, wi, bi) for x, wi, bi in zip((query, key, value), self.in_proj_weight.chunk(3), bs))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got "
                                 f"{E}")
        H, hd = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        if is_causal and attn_mask is None:
            attn_mask = _creation.ones(L, S, dtype=_C.bool).triu(1)
        mask = self._as_additive(attn_mask, "attn_mask", q.dtype)
        pad = self._as_additive(key_padding_mask, "key_padding_mask", q.dtype)
        if self.bias_k is not None:  # one more key and value, which every query may attend to
            k = _ops.cat([k, self.bias_k.expand(1, N, E)], 0)
            v = _ops.cat([v, self.bias_v.expand(1, N, E)], 0)
            mask, pad = _one_more_key(mask), _one_more_key(pad)
        # (L, N, E) -> (N*H, L, hd)
        q = q.reshape(L, N * H, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], N * H, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], N * H, hd).transpose(0, 1)
        if self.add_zero_attn:  # a key and value of zeros
            zeros = _creation.zeros(N * H, 1, hd, dtype=k.dtype)
            k, v = _ops.cat([k, zeros], 1), _ops.cat([v, zeros], 1)
            mask, pad = _one_more_key(mask), _one_more_key(pad)
        S = k.shape[1]
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(hd))
        if mask is not None:
            if mask.ndim == 2 and tuple(mask.shape) != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {list(mask.shape)}, but "
                                   f"should be {[L, S]}.")
            if mask.ndim == 3 and tuple(mask.shape) != (N * H, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {list(mask.shape)}, but "
                                   f"should be {[N * H, L, S]}.")
            scores = scores + mask
        if pad is not None:
            if tuple(pad.shape) != (N, S):
                raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                                     f"{tuple(pad.shape)}")
            scores = (scores.reshape(N, H, L, S) + pad.reshape(N, 1, 1, S)).reshape(N * H, L, S)
        weights = scores.softmax(-1)
        if self.training and self.dropout > 0:
            weights = F.dropout(weights, self.dropout)
        out = (weights @ v).transpose(0, 1).reshape(L, N, E)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(N, H, L, S)
        if average_attn_weights:
            weights = weights.mean(1)
        if unbatched:
            weights = weights.squeeze(0)
        return out, weights
