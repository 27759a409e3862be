"""ember.utils.data: datasets, DataLoader batching and shuffling,
default_collate, random_split and Subset.

Where the semantics must match torch.utils.data (how many batches, their
sizes, the structure and dtypes default_collate builds, the lengths
random_split gives) the result is compared with PyTorch's; random orders are
not, since the two libraries draw from different generators.
"""

import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import ember
from ember.utils.data import (ConcatDataset, DataLoader, Dataset, Subset, TensorDataset,
                              default_collate, random_split)


class Squares(Dataset):
    """Sample i is (i, i * i) as Python ints: a dataset that is not tensors."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i, i * i

    def __len__(self):
        return self.n


class Rows(Dataset):
    """Sample i is (x[i], y[i]) like TensorDataset, but through the generic
    path (DataLoader's TensorDataset shortcut does not apply to it)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return self.x.shape[0]


def plain(obj):
    """A batch as nested Python values, tensors as (dtype name, shape, values),
    so that ember's and torch's batches compare with ==."""
    if isinstance(obj, (ember.Tensor, torch.Tensor)):
        dtype = str(obj.dtype).split(".")[-1]
        values = obj.float().tolist() if dtype == "bfloat16" else obj.tolist()
        return ("tensor", dtype, tuple(obj.shape), values)
    if isinstance(obj, dict):
        return {"type": type(obj).__name__, **{k: plain(v) for k, v in obj.items()}}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return (type(obj).__name__, *map(plain, obj))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [plain(v) for v in obj])
    return obj


def flat_indices(loader):
    """The sample indices a loader over Squares visited, in order."""
    return [i for xb, _ in loader for i in xb.tolist()]


# ---- datasets ----

def test_dataset_subclass_batches_through_default_collate():
    batches = list(DataLoader(Squares(5), batch_size=2))
    assert len(batches) == 3
    xs, ys = batches[0]
    assert xs.dtype == ember.int64 and xs.tolist() == [0, 1] and ys.tolist() == [0, 1]
    assert [b[1].tolist() for b in batches] == [[0, 1], [4, 9], [16]]


def test_base_dataset_says_what_to_override():
    with pytest.raises(NotImplementedError, match="Dataset must implement __getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError, match="Dataset must implement __len__"):
        len(Dataset())


def test_tensor_dataset_samples_are_rows():
    x = ember.arange(12.0).reshape(4, 3)
    y = ember.tensor([0, 1, 0, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    assert xi.tolist() == [6.0, 7.0, 8.0] and yi.item() == 0
    assert ds.tensors[0] is x


def test_tensor_dataset_rejects_mismatched_or_missing_tensors():
    with pytest.raises(ValueError, match=r"Size mismatch between tensors.*\[4, 3\]"):
        TensorDataset(ember.zeros(4, 2), ember.zeros(3))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()
    with pytest.raises(TypeError, match="argument 1 must be a tensor.*got list"):
        TensorDataset(ember.zeros(2), [1, 2])
    with pytest.raises(TypeError, match="got a 0-d tensor"):
        TensorDataset(ember.tensor(1.0))


def test_concat_dataset_indexes_across_parts():
    ds = Squares(3) + Squares(2)
    assert isinstance(ds, ConcatDataset) and len(ds) == 5
    assert [ds[i][0] for i in range(5)] == [0, 1, 2, 0, 1]
    assert ds[-1] == (1, 1) and ds[-5] == (0, 0)
    with pytest.raises(IndexError, match="index 5 is out of range for 5 samples"):
        ds[5]
    with pytest.raises(IndexError):
        ds[-6]
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])


def test_subset_maps_indices():
    sub = Subset(Squares(10), [7, 2, 2, 9])
    assert len(sub) == 4
    assert [sub[i] for i in range(4)] == [(7, 49), (2, 4), (2, 4), (9, 81)]
    xb, yb = next(iter(DataLoader(sub, batch_size=4)))
    assert xb.tolist() == [7, 2, 2, 9] and yb.tolist() == [49, 4, 4, 81]


# ---- batching ----

@pytest.mark.parametrize("n", [0, 1, 9, 10, 11])
@pytest.mark.parametrize("batch_size", [1, 3, 10, 12])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_count_and_sizes_match_torch(n, batch_size, drop_last):
    ours = DataLoader(Squares(n), batch_size=batch_size, drop_last=drop_last)
    theirs = tdata.DataLoader(Squares(n), batch_size=batch_size, drop_last=drop_last)
    sizes = [len(xb) for xb, _ in ours]
    assert sizes == [len(xb) for xb, _ in theirs]
    assert len(ours) == len(theirs) == len(sizes)


def test_in_order_batches_with_a_short_last_batch_or_dropped():
    assert [xb.tolist() for xb, _ in DataLoader(Squares(7), batch_size=3)] == \
        [[0, 1, 2], [3, 4, 5], [6]]
    assert [xb.tolist() for xb, _ in DataLoader(Squares(7), batch_size=3, drop_last=True)] == \
        [[0, 1, 2], [3, 4, 5]]


def test_tensor_dataset_batches_stack_rows():
    x = ember.arange(20.0).reshape(10, 2)
    y = ember.arange(10) % 3
    batches = list(DataLoader(TensorDataset(x, y), batch_size=4))
    assert [tuple(xb.shape) for xb, _ in batches] == [(4, 2), (4, 2), (2, 2)]
    xb, yb = batches[1]
    assert xb.tolist() == [[8.0, 9.0], [10.0, 11.0], [12.0, 13.0], [14.0, 15.0]]
    assert yb.dtype == ember.int64 and yb.tolist() == [1, 2, 0, 1]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_tensor_dataset_shortcut_gives_what_stacking_samples_gives(shuffle, drop_last):
    # DataLoader gathers TensorDataset batches with one index per tensor; the
    # batches must be those of collating the samples one by one
    x = ember.randn(23, 3, 2).to(ember.bfloat16)
    y = ember.randint(0, 2, (23,)).to(ember.bool)
    def run(ds):
        ember.manual_seed(5)
        return [plain(b) for b in DataLoader(ds, batch_size=5, shuffle=shuffle,
                                             drop_last=drop_last)]
    assert run(TensorDataset(x, y)) == run(Rows(x, y))


def test_batches_are_copies_not_views_of_the_dataset():
    x = ember.zeros(4, 2)
    xb, = next(iter(DataLoader(TensorDataset(x), batch_size=4)))
    xb.fill_(1.0)
    assert x.sum().item() == 0.0


def test_custom_collate_fn_gets_the_list_of_samples():
    seen = []

    def collate(samples):
        seen.append(samples)
        return len(samples)

    assert list(DataLoader(Squares(5), batch_size=2, collate_fn=collate)) == [2, 2, 1]
    assert seen[2] == [(4, 16)]


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True, "2"])
def test_batch_size_must_be_a_positive_int(batch_size):
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        DataLoader(Squares(3), batch_size=batch_size)


# ---- shuffling ----

def test_shuffle_visits_every_index_once_per_epoch():
    ember.manual_seed(0)
    loader = DataLoader(Squares(50), batch_size=8, shuffle=True)
    epochs = [flat_indices(loader) for _ in range(3)]
    for order in epochs:
        assert sorted(order) == list(range(50))
    assert epochs[0] != list(range(50))
    assert epochs[0] != epochs[1]  # a new order for every pass


def test_shuffle_repeats_under_the_same_seed():
    def orders(seed):
        ember.manual_seed(seed)
        loader = DataLoader(Squares(40), batch_size=16, shuffle=True)
        return [flat_indices(loader) for _ in range(2)]

    assert orders(3) == orders(3)
    assert orders(3) != orders(4)


def test_shuffle_with_a_seeded_generator_repeats_and_leaves_the_global_stream_alone():
    def orders(seed):
        loader = DataLoader(Squares(30), batch_size=7, shuffle=True,
                            generator=ember.Generator().manual_seed(seed))
        return [flat_indices(loader) for _ in range(3)]

    ember.manual_seed(0)
    expected_global = ember.rand(10).tolist()
    ember.manual_seed(0)
    first = orders(42)
    assert ember.rand(10).tolist() == expected_global
    assert first == orders(42) and first != orders(43)
    for order in first:
        assert sorted(order) == list(range(30))
    assert first[0] != first[1]  # the generator advances from pass to pass
    # each pass's order is the generator's next randperm, after the draw of
    # the workers' base seed (made with or without workers, as in PyTorch)
    g = ember.Generator().manual_seed(42)
    expected = []
    for _ in range(3):
        ember.randint(0, 2 ** 62, (), generator=g)
        expected.append(ember.randperm(30, generator=g).tolist())
    assert first == expected


def test_tensor_dataset_shuffled_with_a_generator():
    x = ember.arange(10) * 10
    loader = DataLoader(TensorDataset(x), batch_size=4, shuffle=True,
                        generator=ember.Generator().manual_seed(7))
    batches = [xb.tolist() for xb, in loader]
    g = ember.Generator().manual_seed(7)
    ember.randint(0, 2 ** 62, (), generator=g)  # (the workers' base seed, drawn first as in PyTorch)
    perm = ember.randperm(10, generator=g).tolist()
    assert batches == [[10 * i for i in perm[k:k + 4]] for k in (0, 4, 8)]


def test_dataloader_refuses_a_torch_generator_at_once():
    with pytest.raises(TypeError, match=r"DataLoader\(\): generator must be an ember.Generator"):
        DataLoader(Squares(3), shuffle=True, generator=torch.Generator())


def test_shuffle_with_drop_last_drops_a_short_batch_of_the_shuffled_order():
    ember.manual_seed(0)
    batches = [xb.tolist() for xb, _ in DataLoader(Squares(10), batch_size=4, shuffle=True,
                                                   drop_last=True)]
    assert [len(b) for b in batches] == [4, 4]
    assert len(set(batches[0] + batches[1])) == 8


# ---- default_collate ----

Point = collections.namedtuple("Point", "x y")

COLLATE_CASES = {
    "ints": [1, 2, 3],
    "floats": [1.5, -2.0],
    "bools": [True, False],
    "strings": ["a", "bc"],
    "tuples": [(1, 2.0, "a"), (3, 4.0, "b")],
    "lists": [[1, 2], [3, 4]],
    "dicts": [{"label": 1, "weight": 0.5, "name": "a"}, {"label": 0, "weight": 2.0, "name": "b"}],
    "ordered dicts": [collections.OrderedDict(b=1, a=2.0), collections.OrderedDict(b=3, a=4.0)],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "nested": [{"xy": (1, [2.0, 3.0]), "meta": {"id": 7}},
               {"xy": (4, [5.0, 6.0]), "meta": {"id": 8}}],
    "numpy arrays": [np.array([1, 2], np.int16), np.array([3, 4], np.int16)],
    "numpy float32 scalars": [np.float32(1.5), np.float32(2.5)],
    "numpy float64 scalars": [np.float64(1.5), np.float64(2.5)],
    "numpy int32 scalars": [np.int32(-1), np.int32(7)],
    "numpy uint8 scalars": [np.uint8(200), np.uint8(7)],
    "numpy bools": [np.bool_(True), np.bool_(False)],
}


@pytest.mark.filterwarnings("ignore:In future, it will be an error for 'np.bool_'")  # torch's
@pytest.mark.parametrize("case", list(COLLATE_CASES))
def test_default_collate_matches_torch_on_python_and_numpy_values(case):
    batch = COLLATE_CASES[case]
    assert plain(default_collate(batch)) == plain(tdata.default_collate(batch))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool"])
def test_default_collate_stacks_tensors_like_torch(dtype):
    values = [[[1, 0], [0, 1]], [[0, 0], [1, 1]], [[1, 1], [1, 0]]]
    ours = default_collate([{"t": ember.tensor(v, dtype=getattr(ember, dtype)), "i": k}
                            for k, v in enumerate(values)])
    theirs = tdata.default_collate([{"t": torch.tensor(v, dtype=getattr(torch, dtype)), "i": k}
                                    for k, v in enumerate(values)])
    assert plain(ours) == plain(theirs)


def test_default_collate_stacks_zero_d_and_bfloat16_tensors():
    out = default_collate([ember.tensor(1.5, dtype=ember.bfloat16),
                           ember.tensor(-2.0, dtype=ember.bfloat16)])
    assert out.dtype == ember.bfloat16 and out.shape == (2,)
    assert out.float().tolist() == [1.5, -2.0]


def test_default_collate_refuses_ragged_and_unknown_samples():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain.*object"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([np.array(["a"]), np.array(["b"])])


# ---- random_split ----

@pytest.mark.filterwarnings("ignore:Length of split at index")  # both warn of empty splits
@pytest.mark.parametrize("n, lengths", [
    (10, [0.8, 0.2]), (10, [0.33, 0.33, 0.34]), (7, [0.5, 0.5]), (5, [0.1, 0.1, 0.8]),
    (10, [3, 7]), (4, [4, 0]), (0, [0, 0]),
])
def test_random_split_lengths_match_torch(n, lengths):
    ours = [len(s) for s in random_split(Squares(n), lengths)]
    theirs = [len(s) for s in tdata.random_split(Squares(n), lengths)]
    assert ours == theirs


def test_random_split_partitions_the_dataset():
    ember.manual_seed(11)
    train, val, test = random_split(Squares(20), [12, 5, 3])
    assert all(isinstance(s, Subset) for s in (train, val, test))
    picked = [train[i][0] for i in range(12)] + [val[i][0] for i in range(5)] + \
        [test[i][0] for i in range(3)]
    assert sorted(picked) == list(range(20)) and picked != list(range(20))


def test_random_split_repeats_under_the_same_seed():
    def split(seed):
        ember.manual_seed(seed)
        return [s.indices for s in random_split(Squares(30), [0.5, 0.5])]

    assert split(1) == split(1)
    assert split(1) != split(2)


def test_random_split_rejects_lengths_that_do_not_fit():
    with pytest.raises(ValueError, match=r"Sum of input lengths \(9\) does not equal the length "
                                         r"of the input dataset \(10\)"):
        random_split(Squares(10), [4, 5])
    with pytest.raises(ValueError, match="got -1 at index 1"):
        random_split(Squares(10), [11, -1])
    with pytest.raises(ValueError, match="fractions summing to 1, got 0.5 at index 0"):
        random_split(Squares(10), [0.5, 0.6])


def test_random_split_warns_about_an_empty_split():
    with pytest.warns(UserWarning, match="split at index 1 is 0"):
        random_split(Squares(2), [0.9, 0.1])


def test_random_split_with_a_seeded_generator():
    def split(seed):
        return [s.indices for s in random_split(Squares(30), [10, 20],
                                                generator=ember.Generator().manual_seed(seed))]

    assert split(1) == split(1) != split(2)
    g = ember.Generator().manual_seed(1)
    assert sum(split(1), []) == ember.randperm(30, generator=g).tolist()


def test_random_split_refuses_a_torch_generator():
    with pytest.raises(TypeError, match=r"random_split\(\): generator must be an ember.Generator"):
        random_split(Squares(3), [1, 2], generator=torch.Generator())


def test_loader_takes_its_order_from_a_sampler():
    class Backwards(ember.utils.data.Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n - 1, -1, -1))

        def __len__(self):
            return self.n

    ds = TensorDataset(ember.arange(10))
    loader = DataLoader(ds, batch_size=4, sampler=Backwards(10))
    assert len(loader) == 3
    assert [b[0].tolist() for b in loader] == [[9, 8, 7, 6], [5, 4, 3, 2], [1, 0]]
    assert [b[0].tolist() for b in DataLoader(ds, batch_size=3, sampler=Backwards(7), drop_last=True)] == \
        [[6, 5, 4], [3, 2, 1]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=Backwards(3), shuffle=True)


def test_distributed_sampler_matches_torch_without_shuffle():
    """Explicit num_replicas and rank need no process group."""
    from ember.utils.data.distributed import DistributedSampler
    import torch.utils.data.distributed as tdd
    for n in (0, 1, 5, 12, 13):
        for replicas in (1, 2, 3, 5):
            for rank in range(replicas):
                for drop_last in (False, True):
                    ours = DistributedSampler(list(range(n)), replicas, rank, shuffle=False, drop_last=drop_last)
                    theirs = tdd.DistributedSampler(list(range(n)), replicas, rank, shuffle=False,
                                                    drop_last=drop_last)
                    assert list(ours) == list(theirs) and len(ours) == len(theirs), (n, replicas, rank)
    s = DistributedSampler(list(range(30)), 3, 1, seed=4)
    order = list(s)
    assert list(DistributedSampler(list(range(30)), 3, 1, seed=4)) == order  # the seed fixes it
    parts = [set(DistributedSampler(list(range(30)), 3, r, seed=4)) for r in range(3)]
    assert set.union(*parts) == set(range(30)) and sum(map(len, parts)) == 30
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(list(range(3)))
