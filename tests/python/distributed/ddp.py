"""DistributedDataParallel and DistributedSampler on each rank of an
`mpirun -np N` job (test_distributed.py runs it with 2 and 3 ranks).

Every rank also trains the same model alone on the global batch (the
reference DDP must equal): the MLP and the CNN for 20 steps, with one
bucket and with a bucket per parameter, eager and compiled; no_sync
accumulation; unused parameters found, and not. The models are small, so
each is also run with the size from which a gradient is reduced alone
(in its own memory, not packed into a bucket) lowered: some alone, or all.
"""
import contextlib
import datetime
import sys

import numpy as np

import ember
import ember.distributed as dist
import ember.nn as nn
import ember.nn.functional as F
from ember.nn.parallel import DistributedDataParallel as DDP
from ember.utils.data import DataLoader, TensorDataset
from ember.utils.data.distributed import DistributedSampler

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
R, N = dist.get_rank(), dist.get_world_size()
GLOBAL = 12  # divisible by 1, 2, 3 and 4 ranks
LOCAL = GLOBAL // N


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3),
                         nn.ReLU(), nn.Flatten(), nn.Linear(6 * 2 * 2, 5))


def batches(kind, steps):
    rng = np.random.default_rng(7)  # the same on every rank: the global batches
    shape = (GLOBAL, 20) if kind == "mlp" else (GLOBAL, 1, 8, 8)
    return [(ember.tensor(rng.standard_normal(shape).astype(np.float32)),
             ember.tensor(rng.integers(0, 5, GLOBAL))) for _ in range(steps)]


def params_of(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def assert_close(got, want, what, rtol=1e-6, atol=1e-7):
    for k, (g, w) in enumerate(zip(got, want)):
        if not np.allclose(g, w, rtol=rtol, atol=atol):
            raise AssertionError(f"rank {R}: {what}: parameter {k} differs by {np.abs(g - w).max()}")


def train(make, kind, steps, ddp_kwargs=None, compiled=False):
    """(DDP parameters after `steps`, the reference's)."""
    ember.manual_seed(1234 + R)  # different on every rank: DDP must broadcast rank 0's
    model = make()
    ember.manual_seed(1234)  # rank 0's initial weights, for the reference
    ref = make()
    ddp = DDP(ember.compile(model) if compiled else model, **(ddp_kwargs or {}))
    assert_close(params_of(model), params_of(ref), f"{kind}: the broadcast at construction", 0, 0)
    opt = ember.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for k, (x, y) in enumerate(batches(kind, steps)):
        opt.zero_grad(set_to_none=k % 2 == 0)  # both ways: new gradients, and accumulation into old ones
        F.cross_entropy(ddp(x[R * LOCAL:(R + 1) * LOCAL]), y[R * LOCAL:(R + 1) * LOCAL]).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    return params_of(model), params_of(ref)


@contextlib.contextmanager
def alone_from(nbytes):
    """Gradients of `nbytes` times (ranks - 1) or more are reduced alone
    (None: the default)."""
    import ember.nn.parallel.distributed as D
    old = D._ALONE_MIN_BYTES
    D._ALONE_MIN_BYTES = old if nbytes is None else nbytes
    try:
        yield
    finally:
        D._ALONE_MIN_BYTES = old


ALONE_SIZES = (None, 400, 0)  # none of these models' gradients alone; some weights (not the biases); all


def test_training_equals_the_global_batch():
    import ember.nn.parallel.distributed as D
    spare = D._core_to_spare
    try:
        for overlap in (False, True):  # reduced at backward's end, or bucket by bucket during it
            D._core_to_spare = lambda: overlap
            for make, kind in ((mlp, "mlp"), (cnn, "cnn")):
                for kwargs in ({}, {"bucket_cap_mb": 1e-4}, {"gradient_as_bucket_view": True}):
                    for alone in ALONE_SIZES[:2]:
                        with alone_from(alone):
                            got, want = train(make, kind, 20, kwargs)
                        assert_close(got, want, f"{kind} {kwargs} overlap={overlap} alone from {alone}")
    finally:
        D._core_to_spare = spare
    for alone in ALONE_SIZES:
        with alone_from(alone):
            got, want = train(mlp, "mlp", 20, compiled=True)
        assert_close(got, want, f"compiled mlp, alone from {alone}")


def test_gradients_reduced_alone_keep_their_tensors():
    """A gradient reduced alone is averaged in its own memory: .grad stays
    the same tensor, contiguous or not (a non-contiguous one through a
    contiguous stand-in, written back)."""
    ember.manual_seed(4)
    model, ref = mlp(), mlp()
    ref.load_state_dict(model.state_dict())
    with alone_from(0):
        ddp = DDP(model)
        w = model[0].weight
        w.grad = ember.zeros(w.shape[1], w.shape[0]).t()  # accumulated into, in place: stays non-contiguous
        kept = [p.grad for p in model.parameters()]
        (x, y), = batches("mlp", 1)
        before = dist._C._dist_stats()["collectives"]
        F.cross_entropy(ddp(x[R * LOCAL:(R + 1) * LOCAL]), y[R * LOCAL:(R + 1) * LOCAL]).backward()
        calls = dist._C._dist_stats()["collectives"] - before
    assert calls == len(kept), f"{calls} all_reduce calls for {len(kept)} gradients, each alone"
    assert model[0].weight.grad is kept[0] and not kept[0].is_contiguous()
    F.cross_entropy(ref(x), y).backward()
    assert_close([p.grad.numpy() for p in model.parameters()], [p.grad.numpy() for p in ref.parameters()],
                 "gradients reduced alone", rtol=1e-5, atol=1e-6)


def test_no_sync_accumulates():
    for alone in ALONE_SIZES:
        with alone_from(alone):
            no_sync_accumulates(alone)


def no_sync_accumulates(alone):
    ember.manual_seed(5)
    model, ref = mlp(), mlp()
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model, bucket_cap_mb=1e-4)
    (x1, y1), (x2, y2) = batches("mlp", 2)
    stats0 = dist._C._dist_stats()["collectives"]
    with ddp.no_sync():
        F.cross_entropy(ddp(x1[R * LOCAL:(R + 1) * LOCAL]), y1[R * LOCAL:(R + 1) * LOCAL]).backward()
    assert dist._C._dist_stats()["collectives"] == stats0, "no_sync communicated"
    F.cross_entropy(ddp(x2[R * LOCAL:(R + 1) * LOCAL]), y2[R * LOCAL:(R + 1) * LOCAL]).backward()
    F.cross_entropy(ref(x1), y1).backward()
    F.cross_entropy(ref(x2), y2).backward()
    assert_close([p.grad.numpy() for p in model.parameters()], [p.grad.numpy() for p in ref.parameters()],
                 f"no_sync then sync, alone from {alone}", rtol=1e-5, atol=1e-6)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 6)
        self.head_a = nn.Linear(6, 2)
        self.head_b = nn.Linear(6, 2)
        self.never = nn.Linear(6, 2)

    def forward(self, x, use_b):
        h = self.body(x).relu()
        return self.head_b(h) if use_b else self.head_a(h)


def test_unused_parameters():
    for alone in (None, 60, 0):  # (60: the body's weight alone, the rest packed, on 2 and 3 ranks)
        with alone_from(alone):
            unused_parameters(alone)
    finds_unfinished_reduction()


def unused_parameters(alone):
    ember.manual_seed(9)
    model = TwoHeads()
    ref = TwoHeads()
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model, find_unused_parameters=True)
    x = ember.ones(N, 6) * ember.arange(N).float().reshape(N, 1)
    use_b = R == 0  # rank 0 uses head_b, the others head_a
    ddp(x[R:R + 1], use_b).sum().backward()
    # the reference: the same losses, summed over ranks and divided by N
    total = sum(ref(x[r:r + 1], r == 0).sum() for r in range(N)) / N
    total.backward()
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        if name.startswith("never"):
            assert p.grad is None, f"{name}: a parameter no rank used keeps grad None"
        elif q.grad is None:
            assert p.grad is None or not p.grad.abs().sum().item(), name
        else:
            assert_close([p.grad.numpy()], [q.grad.numpy()], f"unused params: {name}, alone from {alone}")


def finds_unfinished_reduction():
    """Without find_unused_parameters, the next forward names the parameters."""
    x = ember.ones(N, 6) * ember.arange(N).float().reshape(N, 1)
    ddp2 = DDP(TwoHeads())
    ddp2(x[R:R + 1], False).sum().backward()
    try:
        ddp2(x[R:R + 1], False)
        raise AssertionError("an unfinished reduction should make forward fail")
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e) and "head_b.weight" in str(e) and "never.bias" in str(e), e


def test_compiled_step_holds_the_all_reduce():
    """A whole training step compiled with DDP inside: the reduction is an
    all_reduce node of the graph, the step runs compiled, and its
    parameters follow the global batch's as eager DDP's do. With
    find_unused_parameters the step runs eagerly, saying why. With every
    gradient reduced alone, the graph holds an all_reduce per parameter."""
    for find_unused, alone in ((False, None), (True, None), (False, 0)):
        with alone_from(alone):
            compiled_step_holds_the_all_reduce(find_unused, alone)


def compiled_step_holds_the_all_reduce(find_unused, alone):
    ember.manual_seed(11)
    model, ref = mlp(), mlp()
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model, find_unused_parameters=find_unused)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)

    @ember.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    for k, (x, y) in enumerate(batches("mlp", 8)):
        xs, ys = x[R * LOCAL:(R + 1) * LOCAL], y[R * LOCAL:(R + 1) * LOCAL]
        before = dist._C._dist_stats()["collectives"]
        if k == 5:
            report = str(ember.compiler.explain(step, xs, ys, print_report=False))
            if find_unused:
                assert "find_unused_parameters" in report and "ran eagerly" in report, report
            else:
                assert "ran compiled" in report and "all_reduce(" in report, report
        else:
            step(xs, ys)
        if k == 6 and alone == 0:  # compiled by now: the graph's all_reduce nodes
            calls = dist._C._dist_stats()["collectives"] - before
            n = len(list(model.parameters()))
            assert calls == n, f"{calls} all_reduce calls in a compiled step, not one per gradient ({n})"
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    assert_close(params_of(model), params_of(ref),
                 f"compiled step with DDP (find_unused={find_unused}, alone from {alone})")


def test_sampler_partitions():
    for n_items in (10, 12, 13, 1):
        for drop_last in (False, True):
            for shuffle in (False, True):
                data = list(range(n_items))
                s = DistributedSampler(data, shuffle=shuffle, seed=3, drop_last=drop_last)
                mine = list(s)
                assert len(mine) == len(s), (len(mine), len(s))
                everyone = [ember.zeros(len(s), dtype=ember.int64) for _ in range(N)]
                dist.all_gather(everyone, ember.tensor(mine, dtype=ember.int64) if mine else ember.zeros(0, dtype=ember.int64))
                allx = [i for t in everyone for i in t.tolist()]
                if drop_last:
                    assert len(set(allx)) == len(allx) == (n_items // N) * N, (n_items, allx)
                else:
                    assert set(allx) == set(data), (n_items, allx)  # covered, padded by repeats
                    assert len(allx) == -(-n_items // N) * N
                if not shuffle:
                    try:
                        import torch.utils.data.distributed as tdd
                    except ImportError:
                        continue
                    want = list(tdd.DistributedSampler(data, num_replicas=N, rank=R, shuffle=False,
                                                       drop_last=drop_last))
                    assert mine == want, (mine, want)
    s = DistributedSampler(list(range(40)), seed=1)
    first = list(s)
    assert list(s) == first
    s.set_epoch(1)
    assert list(s) != first, "set_epoch draws a new order"
    # through a DataLoader
    ds = TensorDataset(ember.arange(24).float(), ember.arange(24))
    loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, shuffle=False))
    seen = [int(v) for xb, yb in loader for v in yb.tolist()]
    assert seen == list(range(24))[R::N], seen
    try:
        DistributedSampler(ds, num_replicas=2, rank=2)
        raise AssertionError("rank 2 of 2 should be refused")
    except ValueError as e:
        assert "Invalid rank" in str(e)


for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        fn()
        dist.barrier()
dist.destroy_process_group()
print(f"rank {R} of {N}: ddp ok", flush=True)
sys.exit(0)
