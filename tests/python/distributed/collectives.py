"""Every collective of ember.distributed against NumPy, on each rank of an
`mpirun -np N` job (test_distributed.py launches it with 2 and 3 ranks).

Each rank makes its data from its rank alone, so each can compute every
other rank's with NumPy and so the expected result. Values are small
integers (exact in every dtype, in any order of combination) except where a
test is about rounding. A failure raises (a non-zero exit: mpirun fails).
"""
import datetime
import gc
import sys

import numpy as np

import ember
import ember.distributed as dist

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
R, N = dist.get_rank(), dist.get_world_size()
ReduceOp = dist.ReduceOp

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
          "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def data(rank, dtype, shape=(3, 4), salt=0):
    rng = np.random.default_rng(1000 * salt + rank)
    if dtype in ("bool",):
        return rng.random(shape) < 0.5
    lo = 0 if dtype == "uint8" else -4
    return rng.integers(lo, 5, size=shape).astype(DTYPES.get(dtype, np.float32))


def em(a, dtype):
    if dtype == "bfloat16":
        return ember.tensor(a.astype(np.float32)).to(ember.bfloat16)
    return ember.tensor(a)


def np_of(t):
    return (t.float() if t.dtype == ember.bfloat16 else t).numpy()


def check(got, want, what):
    got_np = np_of(got)
    want = np.asarray(want)
    if got_np.shape != want.shape or not np.array_equal(got_np.astype(np.float64), want.astype(np.float64),
                                                        equal_nan=True):
        raise AssertionError(f"rank {R}: {what}: got {got_np.tolist()}, want {want.tolist()}")


def fold(op, arrays, dtype):
    stackd = np.stack([a.astype(np.float64) if dtype != "bool" else a for a in arrays])
    if dtype == "bool":
        return {ReduceOp.SUM: stackd.any(0), ReduceOp.MAX: stackd.any(0), ReduceOp.PRODUCT: stackd.all(0),
                ReduceOp.MIN: stackd.all(0)}[op]
    r = {ReduceOp.SUM: stackd.sum(0), ReduceOp.AVG: stackd.mean(0), ReduceOp.PRODUCT: stackd.prod(0),
         ReduceOp.MIN: stackd.min(0), ReduceOp.MAX: stackd.max(0)}[op]
    if dtype in ("int8", "uint8", "int16", "int32", "int64"):  # integers wrap as the dtype
        return r.astype(np.int64).astype(DTYPES[dtype])
    return r


def test_all_reduce():
    for dtype in list(DTYPES) + ["bfloat16"]:
        ops = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX]
        if dtype in ("float32", "float64", "float16", "bfloat16"):
            ops.append(ReduceOp.AVG)
        for op in ops:
            arrays = [data(r, dtype) for r in range(N)]
            t = em(arrays[R], dtype)
            dist.all_reduce(t, op=op)
            want = fold(op, arrays, dtype)
            if op == ReduceOp.AVG:  # the division rounds in the dtype
                want = (fold(ReduceOp.SUM, arrays, dtype) / N).astype(np.float32 if dtype == "bfloat16" else DTYPES[dtype])
                if dtype == "bfloat16":
                    want = np_of(ember.tensor(want).to(ember.bfloat16))
            check(t, want, f"all_reduce {op.name} {dtype}")
    # a non-contiguous tensor: the result lands in its own elements
    base = ember.zeros(4, 6)
    view = base[:, ::2]
    view.copy_(ember.tensor(data(R, "float32", (4, 3))))
    dist.all_reduce(view)
    check(view, fold(ReduceOp.SUM, [data(r, "float32", (4, 3)) for r in range(N)], "float32"), "non-contiguous")
    check(base[:, 1::2], np.zeros((4, 3), np.float32), "the view's neighbours untouched")
    # 0-d and empty tensors
    s = ember.tensor(float(R + 1))
    dist.all_reduce(s)
    check(s, np.array(N * (N + 1) / 2, np.float32), "0-d")
    e = ember.zeros(0, 3)
    dist.all_reduce(e)
    check(e, np.zeros((0, 3), np.float32), "empty")
    # NaN propagates through MAX and MIN (torch.maximum's rule)
    x = ember.tensor([float("nan") if R == N - 1 else 1.0, float(R)])
    dist.all_reduce(x, op=ReduceOp.MAX)
    check(x, np.array([np.nan, N - 1], np.float32), "MAX with NaN")
    # the version counter sees the write: autograd refuses a saved tensor it changed
    w = ember.ones(3, requires_grad=True)
    y = (w * w).sum()
    dist.all_reduce(w.detach())
    expect_error(y.backward, "modified by an inplace operation")


def test_functional_all_reduce_eager_and_compiled():
    """functional_all_reduce returns a new tensor (its argument untouched),
    and inside ember.compile it is a node the compiled graph runs, on every
    call, in its place (here between two elementwise ops)."""
    arrays = [data(r, "float32", salt=5) for r in range(N)]
    x = ember.tensor(arrays[R])
    avg = dist.functional_all_reduce(x, ReduceOp.AVG)
    check(avg, (fold(ReduceOp.SUM, arrays, "float32") / N).astype(np.float32), "functional AVG")
    check(x, arrays[R], "functional leaves its argument")
    g = dist.new_group(list(range(N)))

    @ember.compile
    def f(t):
        return dist.functional_all_reduce(t * 2, ReduceOp.MAX, group=g) + 1

    for k in range(4):
        arrays = [data(r, "float32", salt=10 + k) for r in range(N)]
        got = f(ember.tensor(arrays[R]))
        check(got, fold(ReduceOp.MAX, [a * 2 for a in arrays], "float32") + 1, f"compiled call {k}")
    report = str(ember.compiler.explain(f, ember.tensor(arrays[R]), print_report=False))
    assert "ran compiled" in report and "all_reduce(" in report and "process_group=1" in report, report
    dist.destroy_process_group(g)


def test_reduce_broadcast():
    arrays = [data(r, "float32") for r in range(N)]
    for root in range(N):
        t = ember.tensor(arrays[R])
        dist.reduce(t, dst=root, op=ReduceOp.SUM)
        check(t, fold(ReduceOp.SUM, arrays, "float32") if R == root else arrays[R], f"reduce to {root}")
        b = ember.tensor(data(R, "int64", salt=root))
        dist.broadcast(b, src=root)
        check(b, data(root, "int64", salt=root), f"broadcast from {root}")


def test_gathers_and_scatters():
    mine = data(R, "float64", (2, 3))
    everyone = [data(r, "float64", (2, 3)) for r in range(N)]
    out = [ember.full((2, 3), -1.0, dtype=ember.float64) for _ in range(N)]
    dist.all_gather(out, ember.tensor(mine))
    for r in range(N):
        check(out[r], everyone[r], f"all_gather[{r}]")
    flat = ember.empty(N * 6, dtype=ember.float64)
    dist.all_gather_into_tensor(flat, ember.tensor(mine))
    check(flat, np.concatenate([a.ravel() for a in everyone]), "all_gather_into_tensor")
    # reduce_scatter: block r of every rank's input, summed, lands on rank r
    inputs = [data(r, "int32", (N, 5)) for r in range(N)]
    o = ember.zeros(5, dtype=ember.int32)
    dist.reduce_scatter_tensor(o, ember.tensor(inputs[R]))
    check(o, sum(a[R].astype(np.int64) for a in inputs).astype(np.int32), "reduce_scatter_tensor")
    o2 = ember.zeros(5, dtype=ember.int32)
    dist.reduce_scatter(o2, [ember.tensor(row) for row in inputs[R]], op=ReduceOp.MAX)
    check(o2, np.max(np.stack([a[R] for a in inputs]), 0), "reduce_scatter MAX")
    for root in range(N):
        gl = [ember.zeros(2, 3, dtype=ember.float64) for _ in range(N)] if R == root else None
        dist.gather(ember.tensor(mine), gl, dst=root)
        if R == root:
            for r in range(N):
                check(gl[r], everyone[r], f"gather to {root}, [{r}]")
        sl = [ember.tensor(data(r, "float64", (2, 3), salt=root + 7)) for r in range(N)] if R == root else None
        got = ember.zeros(2, 3, dtype=ember.float64)
        dist.scatter(got, sl, src=root)
        check(got, data(R, "float64", (2, 3), salt=root + 7), f"scatter from {root}")


def test_point_to_point_and_async():
    right, left = (R + 1) % N, (R - 1) % N
    if N == 1:
        return
    # a ring where every rank sends before it receives: posted, so no deadlock
    big = ember.full((1 << 18,), float(R))
    got = ember.zeros(1 << 18)
    sw = dist.isend(big, right, tag=3)
    rw = dist.irecv(got, left, tag=3)
    rw.wait()
    sw.wait()
    check(got[:4], np.full(4, float(left), np.float32), "ring isend/irecv")
    assert rw.source_rank() == left
    if R == 0:
        senders = set()
        for _ in range(N - 1):
            b = ember.zeros(2, dtype=ember.int64)
            src = dist.recv(b)  # from any rank
            check(b, np.array([src, src * 10]), "recv from any")
            senders.add(src)
        assert senders == set(range(1, N)), senders
    else:
        dist.send(ember.tensor([R, R * 10]), 0)
    # several collectives in flight, waited for in reverse order
    ts = [ember.full((100,), float(R + k)) for k in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for k, w in reversed(list(enumerate(works))):
        assert w.wait() is True
        assert w.is_completed()
        check(ts[k][:1], np.array([sum(r + k for r in range(N))], np.float32), f"async all_reduce {k}")
    # a received message longer than the tensor is an error naming both
    if N >= 2:
        if R == 0:
            dist.send(ember.zeros(7), 1, tag=9)
        elif R == 1:
            try:
                dist.recv(ember.zeros(5), 0, tag=9)
                raise AssertionError("a truncated recv should fail")
            except RuntimeError as e:
                assert "recv" in str(e), e
        dist.barrier()


def test_groups():
    members = sorted({0, N - 1})
    g = dist.new_group(members)
    if R in members:
        assert dist.get_rank(g) == members.index(R) and dist.get_world_size(g) == len(members)
        t = ember.tensor([float(R)])
        dist.all_reduce(t, group=g)
        check(t, np.array([float(N - 1)], np.float32), "all_reduce in a group")
        b = ember.tensor([float(R)])
        dist.broadcast(b, src=N - 1, group=g)  # src is a world rank
        check(b, np.array([float(N - 1)], np.float32), "broadcast in a group")
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(g) == -1
        assert dist.all_reduce(ember.ones(1), group=g) is None
    dist.barrier()
    dist.destroy_process_group(g)


def expect_error(fn, *needles, exc=RuntimeError):
    try:
        fn()
    except exc as e:
        for n in needles:
            if n not in str(e):
                raise AssertionError(f"rank {R}: message {str(e)!r} does not say {n!r}")
        return e
    raise AssertionError(f"rank {R}: no error; expected one saying {needles}")


def test_errors():
    if N > 1:
        e = expect_error(lambda: dist.all_reduce(ember.ones(2, 3 + R)), "all_reduce", "differ", "float32[2, 3]",
                         "float32[2, 4]")
        assert isinstance(e, dist.DistBackendError)
        expect_error(lambda: dist.all_reduce(ember.ones(3, dtype=ember.float32 if R == 0 else ember.float64)),
                     "float32[3]", "float64[3]")
        expect_error(lambda: (dist.all_reduce if R == 0 else dist.broadcast)(ember.ones(3), *(() if R == 0 else (0,))),
                     "rank 0 called all_reduce", "called broadcast")
        expect_error(lambda: dist.all_reduce(ember.ones(3), op=ReduceOp.MAX if R == 0 else ReduceOp.MIN),
                     "reduce ops differ")
    expect_error(lambda: dist.all_reduce(ember.ones(3, dtype=ember.int64), op=ReduceOp.AVG), "AVG",
                 "floating-point", "int64")
    expect_error(lambda: dist.broadcast(ember.ones(3), src=N), "not in", exc=ValueError)
    expect_error(lambda: dist.all_reduce([1, 2]), "Tensor", exc=TypeError)
    expect_error(lambda: dist.all_gather_into_tensor(ember.zeros(5), ember.ones(3)), "all_gather", "elements")
    expect_error(lambda: dist.all_gather([ember.zeros(3)] * (N + 1), ember.ones(3)), "list of", exc=ValueError)
    expect_error(lambda: dist.init_process_group("mpi"), "twice")
    expect_error(lambda: ember._C._op(dist._ALL_REDUCE, [ember.ones(2)], {"reduce_op": 0, "process_group": 77}),
                 "process group 77 does not exist", exc=RuntimeError)
    expect_error(lambda: dist.new_group([0, 0]) if N > 1 else dist.new_group([1]), "new_group", exc=ValueError)
    # the group still works after all that
    t = ember.ones(2)
    dist.all_reduce(t)
    check(t, np.full(2, N, np.float32), "after errors")


for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        fn()
        dist.barrier()
gc.collect()
stats = dist._C._dist_stats()
assert stats["works_alive"] == 0, stats
dist.destroy_process_group()
print(f"rank {R} of {N}: collectives ok", flush=True)
sys.exit(0)
