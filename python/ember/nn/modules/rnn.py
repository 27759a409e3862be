"""Recurrent layers: RNN, LSTM, GRU (layers, bidirectional, batch_first,
dropout between layers, packed sequences) and their cells, with PyTorch's
parameter names, shapes, initialisation and gate order (LSTM i, f, g, o;
GRU r, z, n).

Each layer projects the whole input sequence with one GEMM, then runs the
recurrence a step at a time (one small GEMM and the gate arithmetic per
step). Packed sequences run padded with a mask per step, which freezes each
sequence's state after its last element; the reverse direction reads each
sequence from its own last element. Autograd differentiates through the
steps; ember.compile traces them into one graph."""

import math

from ... import _C, _creation, _ops
from .. import functional as F, init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _reverse_index, pack_padded_sequence, pad_packed_sequence
from .module import Module

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_step(gx, h, c, w_hh, b_hh, w_hr=None):
    gates = gx + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_step(gx, h, w_hh, b_hh):
    gh = F.linear(h, w_hh, b_hh)
    xr, xz, xn = gx.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h - n)


def _rnn_step(gx, h, w_hh, b_hh, relu):
    pre = gx + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be positive")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        out_size = proj_size or hidden_size  # (the state h, and each direction's output: projected with proj_size)
        self._names = []
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                ins = input_size if layer == 0 else out_size * dirs
                names = [f"weight_ih{sfx}", f"weight_hh{sfx}"] + ([f"bias_ih{sfx}", f"bias_hh{sfx}"] if bias else [])
                shapes = [(gate, ins), (gate, out_size)] + ([(gate,), (gate,)] if bias else [])
                if proj_size:
                    names.append(f"weight_hr{sfx}")
                    shapes.append((proj_size, hidden_size))
                for n, s in zip(names, shapes):
                    setattr(self, n, Parameter(_creation.empty(s, dtype=dtype)))
                self._names.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for names in self._names for n in names]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for k, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False),
                           ("proj_size", 0)):
            if getattr(self, k) != default:
                s += f", {k}={getattr(self, k)}"
        return s

    def _weights(self, layer, d):
        names = self._names[layer * (2 if self.bidirectional else 1) + d]
        w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
        b_ih, b_hh = (getattr(self, names[2]), getattr(self, names[3])) if self.bias else (None, None)
        w_hr = getattr(self, names[-1]) if self.proj_size else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _direction(self, x, h, c, layer, d, lengths):
        """One direction of one layer over x (L, N, in): (outputs (L, N, H), h, c)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
        steps = x.shape[0]
        rev = None
        if d == 1:
            rev = _reverse_index(lengths, steps) if lengths is not None else None
            x = x.flip(0) if rev is None else x.gather(0, rev.unsqueeze(-1).expand(*x.shape))
        if self.mode in ("LSTM", "RNN_TANH", "RNN_RELU") and b_ih is not None:  # both biases once, on the GEMM
            gx, b_step = F.linear(x, w_ih, b_ih + b_hh), None
        else:
            gx, b_step = F.linear(x, w_ih, b_ih), b_hh
        outs = []
        for t in range(steps):
            if self.mode == "LSTM":
                h_new, c_new = _lstm_step(gx[t], h, c, w_hh, b_step, w_hr)
            elif self.mode == "GRU":
                h_new, c_new = _gru_step(gx[t], h, w_hh, b_step), None
            else:
                h_new, c_new = _rnn_step(gx[t], h, w_hh, b_step, self.mode == "RNN_RELU"), None
            if lengths is not None:  # sequences that ended keep their state
                live = (lengths > t).to(h.dtype).unsqueeze(-1)
                h_new = h + live * (h_new - h)
                if c is not None:
                    c_new = c + live * (c_new - c)
                outs.append(h_new * live)
            else:
                outs.append(h_new)
            h, c = h_new, c_new
        out = _ops.stack(outs, 0)
        if d == 1:
            out = out.flip(0) if rev is None else out.gather(0, rev.unsqueeze(-1).expand(*out.shape))
        return out, h, c

    def flatten_parameters(self):
        """PyTorch's cuDNN weight compaction: nothing to do on the CPU."""

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        lengths = None
        if packed:  # padded in the caller's batch order (the masks need no sorting), as hx is
            x, lengths = pad_packed_sequence(input)
            batched = True
        else:
            batched = input.ndim == 3
            if input.ndim not in (2, 3):
                raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
            x = input if batched else input.unsqueeze(1)
            if batched and self.batch_first:
                x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{x.shape[-1]}")
        dirs = 2 if self.bidirectional else 1
        n = x.shape[1]
        h0, c0 = self._initial(hx, n, x.dtype, batched)
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                out, h, c = self._direction(x, h0[k], c0[k] if c0 is not None else None, layer, d, lengths)
                outs.append(out)
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else _ops.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        h_n = _ops.stack(hs, 0)
        c_n = _ops.stack(cs, 0) if self.mode == "LSTM" else None
        if packed:  # packed again in the input's order of lengths, with its indices
            si = input.sorted_indices
            if si is not None:
                x, lengths = x.index_select(1, si), lengths.index_select(0, si)
            p = pack_padded_sequence(x, lengths)
            out = PackedSequence(p.data, p.batch_sizes, si, input.unsorted_indices)
        else:
            out = x.transpose(0, 1) if batched and self.batch_first else x
            if not batched:
                out, h_n = out.squeeze(1), h_n.squeeze(1)
                c_n = c_n.squeeze(1) if c_n is not None else None
        return out, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _initial(self, hx, n, dtype, batched):
        dirs = 2 if self.bidirectional else 1
        shape = (self.num_layers * dirs, n, self.hidden_size)
        h_shape = (self.num_layers * dirs, n, self.proj_size or self.hidden_size)
        if hx is None:
            device = self._flat_weights[0].device
            return _C.zeros(h_shape, dtype=dtype, device=device), \
                (_C.zeros(shape, dtype=dtype, device=device) if self.mode == "LSTM" else None)
        h, c = hx if self.mode == "LSTM" else (hx, None)
        if not batched:
            h = h.unsqueeze(1)
            c = c.unsqueeze(1) if c is not None else None
        for name, t, want in (("hx", h, h_shape), ("cx", c, shape)):
            if t is not None and tuple(t.shape) != want:
                raise RuntimeError(f"Expected hidden size {want}, got {list(t.shape)}" if name == "hx" else
                                   f"Expected hidden[1] size {want}, got {list(t.shape)}")
        return h, c


class RNN(RNNBase):
    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """The cells' shared parameters: num_chunks gates' input and hidden
    weights (and biases), uniform in +-1/sqrt(hidden_size)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = num_chunks * hidden_size
        self.weight_ih = Parameter(_creation.empty((rows, input_size), dtype=dtype))
        self.weight_hh = Parameter(_creation.empty((rows, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_creation.empty((rows,), dtype=dtype))
            self.bias_hh = Parameter(_creation.empty((rows,), dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _zeros(self, x):
        return _C.zeros((x.shape[0], self.hidden_size) if x.ndim == 2 else (self.hidden_size,), dtype=x.dtype,
                        device=x.device)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        hx = self._zeros(input) if hx is None else hx
        return _rnn_step(F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh,
                         self.nonlinearity == "relu")


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        h, c = (self._zeros(input), self._zeros(input)) if hx is None else hx
        return _lstm_step(F.linear(input, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        hx = self._zeros(input) if hx is None else hx
        return _gru_step(F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh)
