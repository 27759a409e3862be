"""RNN, LSTM, GRU and their cells against PyTorch 1.13 (float64, values and
gradients of inputs, states and every weight), over padded and packed
sequences; nn.utils.rnn; a compiled LSTM against eager."""

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
from test_nn_functional import check_module, rnd

TU, EU = torch.nn.utils.rnn, ember.nn.utils.rnn


def pair(cls, *args, **kw):
    em = getattr(enn, cls)(*args, dtype=ember.float64, **kw)
    tm = getattr(torch.nn, cls)(*args, dtype=torch.float64, **kw)
    return em, tm


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layers,bidir,batch_first", [(1, False, False), (2, True, False), (2, False, True),
                                                      (3, True, True)])
def test_padded_sequences(cls, layers, bidir, batch_first):
    em, tm = pair(cls, 4, 5, num_layers=layers, bidirectional=bidir, batch_first=batch_first)
    x = rnd((3, 6, 4) if batch_first else (6, 3, 4), 0)
    check_module(em, tm, x, call=lambda mod, a: mod(a))


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_initial_state_unbatched_and_relu(cls):
    em, tm = pair(cls, 3, 4, num_layers=2, bidirectional=True)
    h = rnd((4, 2, 4), 1)
    if cls == "LSTM":
        c = rnd((4, 2, 4), 2)
        check_module(em, tm, rnd((5, 2, 3), 0), h, c, call=lambda mod, a, h, c: mod(a, (h, c)))
        check_module(em, tm, rnd((5, 3), 0), call=lambda mod, a: mod(a))
    else:
        check_module(em, tm, rnd((5, 2, 3), 0), h, call=lambda mod, a, h: mod(a, h))
        check_module(em, tm, rnd((5, 3), 0), rnd((4, 4), 3), call=lambda mod, a, h: mod(a, h))
    if cls == "RNN":
        em, tm = pair("RNN", 3, 4, nonlinearity="relu")
        check_module(em, tm, rnd((5, 2, 3), 0))


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences(cls, enforce_sorted):
    em, tm = pair(cls, 3, 4, num_layers=2, bidirectional=True)
    lengths = [6, 4, 4, 1] if enforce_sorted else [4, 6, 1, 4]

    def call(mod, x):
        U = EU if isinstance(mod, enn.Module) else TU
        out, state = mod(U.pack_padded_sequence(x, lengths, enforce_sorted=enforce_sorted))
        padded, lens = U.pad_packed_sequence(out, batch_first=True)
        assert lens.tolist() == lengths
        return padded, state
    check_module(em, tm, rnd((6, 4, 3), 0), call=call)


@pytest.mark.parametrize("cls,state", [("LSTMCell", 2), ("GRUCell", 1), ("RNNCell", 1)])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(cls, state, batched):
    em, tm = pair(cls, 3, 5)
    lead = (2,) if batched else ()
    states = [rnd(lead + (5,), 1 + i) for i in range(state)]
    if state == 2:
        check_module(em, tm, rnd(lead + (3,), 0), *states, call=lambda mod, x, h, c: mod(x, (h, c)))
    else:
        check_module(em, tm, rnd(lead + (3,), 0), *states, call=lambda mod, x, h: mod(x, h))
    check_module(em, tm, rnd(lead + (3,), 0), call=lambda mod, x: mod(x))


def test_parameters_names_and_init():
    em, tm = pair("LSTM", 3, 4, num_layers=2, bidirectional=True)
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    for (n, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
        assert tuple(p.shape) == tuple(q.shape)
        assert float(p.abs().max()) <= 0.5  # U(-1/sqrt(4), 1/sqrt(4))
    assert repr(em) == repr(tm).replace("torch.nn", "ember.nn")


def test_dropout_between_layers_only_when_training():
    em = enn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = ember.randn(5, 2, 3)
    em.eval()
    a, _ = em(x)
    b, _ = em(x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    em.train()
    ember.manual_seed(1)
    c, _ = em(x)
    assert not np.allclose(c.detach().numpy(), a.detach().numpy())


def test_utils_rnn():
    seqs = [rnd((n, 2), n) for n in (3, 5, 1)]
    for batch_first in (False, True):
        e = EU.pad_sequence([ember.tensor(s) for s in seqs], batch_first=batch_first, padding_value=-1.0)
        t = TU.pad_sequence([torch.tensor(s) for s in seqs], batch_first=batch_first, padding_value=-1.0)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    ep = EU.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted=False)
    tp = TU.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(ep.data.numpy(), tp.data.numpy())
    assert ep.batch_sizes.tolist() == tp.batch_sizes.tolist()
    assert ep.sorted_indices.tolist() == tp.sorted_indices.tolist()
    assert ep.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
    pe, le = EU.pad_packed_sequence(ep, total_length=7)
    pt, lt = TU.pad_packed_sequence(tp, total_length=7)
    np.testing.assert_array_equal(pe.numpy(), pt.numpy())
    assert le.tolist() == lt.tolist()
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        EU.pack_padded_sequence(ember.zeros(3, 2, 1), [1, 3])
    with pytest.raises(RuntimeError, match="greater than 0"):
        EU.pack_padded_sequence(ember.zeros(3, 2, 1), [3, 0])


def test_errors():
    em = enn.GRU(3, 4)
    with pytest.raises(RuntimeError, match="input_size"):
        em(ember.zeros(5, 2, 4))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        em(ember.zeros(5, 2, 3), ember.zeros(2, 2, 4))
    with pytest.raises(ValueError, match="2D or 3D"):
        em(ember.zeros(5))
    with pytest.raises(ValueError, match="smaller than hidden_size"):
        enn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        enn.GRU(3, 4, proj_size=2)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_with_projections_matches_pytorch(bidirectional):
    torch.manual_seed(0)
    tm = torch.nn.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=bidirectional).double()
    em = enn.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=bidirectional).double()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 2, 3))
    tx = torch.tensor(x, requires_grad=True)
    ex = ember.tensor(x).requires_grad_()
    (to, (th, tc)), (eo, (eh, ec)) = tm(tx), em(ex)
    for a, b in ((eo, to), (eh, th), (ec, tc)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    (to.sum() + th.sum()).backward()
    (eo.sum() + eh.sum()).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, p), q in zip(em.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_compiled_lstm_step_matches_eager():
    def make():
        ember.manual_seed(0)
        net = enn.LSTM(3, 4, num_layers=2)
        opt = ember.optim.SGD(net.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            out, (h, c) = net(x)
            loss = out.pow(2).mean() + h.sum() * 0.1
            loss.backward()
            opt.step()
            return loss
        return net, step
    x = ember.randn(5, 2, 3)
    ne, se = make()
    nc, sc = make()
    sc = ember.compile(sc)
    for _ in range(3):
        np.testing.assert_allclose(sc(x).item(), se(x).item(), rtol=1e-5)
    for a, b in zip(nc.parameters(), ne.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    stats = sc._stats()
    assert stats["hits"] >= 1 and stats["eager_calls"] == 0, stats
