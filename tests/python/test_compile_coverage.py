"""Patterns real training scripts contain that once made compiled
functions fall back to eager (issue 39, item 4): each runs compiled now,
equal to eager, gradients included."""

import numpy as np
import pytest

import ember


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def compiled_calls(cf):
    s = cf._stats()
    return s["compiled_calls"], s["fallbacks"]


@pytest.mark.parametrize("n", [17, 64, 65, 200])
def test_cat_and_stack_of_any_number_of_operands(n):
    """cat refused more than 16 operands in a trace and 64 eagerly:
    clip_grad_norm_ over 40 parameters, an LSTM's 64 steps."""
    ember.manual_seed(n)
    params = [ember.randn(3, requires_grad=True) for _ in range(n)]

    def step():
        loss = ember.stack([p.norm() for p in params]).sum() + ember.cat([p * 2 for p in params]).square().sum()
        loss.backward()
        return loss.detach()

    cf = ember.compile(step)
    for _ in range(3):
        for p in params:
            p.grad = None
        got = cf()
    grads = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    close(got, step())
    for g, p in zip(grads, params):
        close(g, p.grad)
    calls, fallbacks = compiled_calls(cf)
    assert calls >= 1 and not fallbacks, fallbacks


@pytest.mark.parametrize("n", [10, 70, 130])
def test_split_chunk_and_unbind_into_many_pieces(n):
    x = ember.randn(n * 2, 3, requires_grad=True)

    def f(x):
        parts = x.split(2)
        rows = x.unbind(0)
        return ember.stack([p.sum() for p in parts]).sum() + ember.stack([r[0] for r in rows]).sum()

    cf = ember.compile(f)
    for _ in range(3):
        got = cf(x)
    close(got, f(x))
    assert len(x.split(2)) == n and all(np.array_equal(p.numpy(), x[2 * i:2 * i + 2].detach().numpy())
                                        for i, p in enumerate(x.split(2)))
    g_c = ember.autograd.grad(cf(x), x)[0]
    g_e = ember.autograd.grad(f(x), x)[0]
    close(g_c, g_e)
