"""Variable-length sequences for the recurrent layers, as
torch.nn.utils.rnn: pad_sequence, pack_padded_sequence,
pad_packed_sequence, pack_sequence and PackedSequence (data: the
time-major concatenation of the batch's live elements, batch_sizes: how
many sequences are live at each step, sorted longest first;
sorted_indices / unsorted_indices undo that sort)."""

from collections import namedtuple

from ... import _C, _ops
from ..._creation import tensor


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)


def _invert(perm):
    inv = [0] * perm.numel()
    for i, p in enumerate(perm.tolist()):
        inv[p] = i
    return tensor(inv, dtype=_C.int64)


def _lengths_list(lengths):
    return [int(n) for n in (lengths.tolist() if isinstance(lengths, _C._TensorBase) else lengths)]


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """A list of (L_i, *) tensors as one (L_max, N, *) tensor (batch_first:
    (N, L_max, *)), padded with padding_value."""
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        extra = longest - s.shape[0]
        if extra:
            s = _ops.cat([s, _C.zeros((extra, *s.shape[1:]), dtype=s.dtype) + padding_value], 0)
        rows.append(s)
    return _ops.stack(rows, 0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """input (L, N, *) (batch_first: (N, L, *)) with each sequence's length."""
    lens = _lengths_list(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    if len(lens) != input.shape[1]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} (batch_size="
                           f"{input.shape[1]})")
    if any(n <= 0 for n in lens):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if any(n > input.shape[0] for n in lens):
        raise RuntimeError(f"a length ({max(lens)}) is longer than the sequence ({input.shape[0]})")
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])  # (stable: ties keep their order)
        sorted_indices = tensor(order, dtype=_C.int64)
        input = input.index_select(1, sorted_indices)
        lens = [lens[i] for i in order]
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = _ops.cat([input[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(batch_sizes, dtype=_C.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded (L, N, *) or (N, L, *), lengths): the inverse of
    pack_padded_sequence, in the original batch order."""
    data, batch_sizes = sequence.data, _lengths_list(sequence.batch_sizes)
    n, steps = batch_sizes[0], len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    rows, offset = [], 0
    for t in range(steps):
        b = batch_sizes[t] if t < len(batch_sizes) else 0
        part = data[offset:offset + b]
        offset += b
        if b < n:
            part = _ops.cat([part, _C.zeros((n - b, *data.shape[1:]), dtype=data.dtype) + padding_value], 0)
        rows.append(part)
    padded = _ops.stack(rows, 0)
    lengths = tensor([sum(1 for b in batch_sizes if b > i) for i in range(n)], dtype=_C.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices)
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences, enforce_sorted=True):
    """A list of (L_i, *) tensors as a PackedSequence."""
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def _reverse_index(lengths, steps):
    """(steps, N) int64: for sequence n, time t reads t' = len_n - 1 - t
    while t < len_n (each sequence reversed in place), t itself after."""
    lens = _lengths_list(lengths)
    rows = [[(n - 1 - t) if t < n else t for n in lens] for t in range(steps)]
    return tensor(rows, dtype=_C.int64)
