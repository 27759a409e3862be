"""Transformer layers against PyTorch 1.13 (float64, dropout 0): the same
state_dict gives the same outputs and gradients, post-norm and pre-norm,
with masks, batch_first, stacks and the full encoder-decoder."""

import pytest
import torch

import ember
import ember.nn as enn
from test_nn_functional import K, check_module, rnd


def pair(cls, *args, **kw):
    return (getattr(enn, cls)(*args, dtype=ember.float64, **kw),
            getattr(torch.nn, cls)(*args, dtype=torch.float64, **kw))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer(norm_first, batch_first, activation):
    em, tm = pair("TransformerEncoderLayer", 8, 2, dim_feedforward=16, dropout=0.0, norm_first=norm_first,
                  batch_first=batch_first, activation=activation)
    x = rnd((2, 5, 8) if batch_first else (5, 2, 8), 0)
    mask = K(torch.nn.Transformer.generate_square_subsequent_mask(5).double().numpy())
    pad = K([[False, False, False, True, True], [False] * 5])
    check_module(em, tm, x, mask, pad, call=lambda m, x, a, p: m(x, src_mask=a, src_key_padding_mask=p),
                 rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer(norm_first):
    em, tm = pair("TransformerDecoderLayer", 8, 4, dim_feedforward=12, dropout=0.0, norm_first=norm_first)
    tmask = K(torch.nn.Transformer.generate_square_subsequent_mask(4).double().numpy())
    check_module(em, tm, rnd((4, 3, 8), 0), rnd((6, 3, 8), 1), tmask,
                 call=lambda m, t, mem, a: m(t, mem, tgt_mask=a), rtol=1e-6, atol=1e-9)


def test_stacks_and_transformer():
    el = enn.TransformerEncoderLayer(8, 2, 16, 0.0, dtype=ember.float64)
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, dtype=torch.float64)
    em = enn.TransformerEncoder(el, 3, enn.LayerNorm(8, dtype=ember.float64))
    tm = torch.nn.TransformerEncoder(tl, 3, torch.nn.LayerNorm(8, dtype=torch.float64), enable_nested_tensor=False)
    check_module(em, tm, rnd((5, 2, 8), 0), rtol=1e-6, atol=1e-9)
    em, tm = pair("Transformer", 8, 2, 2, 2, 16, 0.0, batch_first=True)
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    mask = K(torch.nn.Transformer.generate_square_subsequent_mask(3).double().numpy())
    check_module(em, tm, rnd((2, 5, 8), 1), rnd((2, 3, 8), 2), mask,
                 call=lambda m, s, t, a: m(s, t, tgt_mask=a), rtol=1e-6, atol=1e-9)
    got = enn.Transformer.generate_square_subsequent_mask(3)
    assert got.tolist() == torch.nn.Transformer.generate_square_subsequent_mask(3).tolist()
    with pytest.raises(RuntimeError, match="d_model"):
        em(ember.zeros(2, 5, 6, dtype=ember.float64), ember.zeros(2, 3, 6, dtype=ember.float64))
