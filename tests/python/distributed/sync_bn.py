"""SyncBatchNorm on each rank of an `mpirun -np N` job (test_distributed.py
runs it with 2 and 3 ranks): each rank normalises its own slice of a batch,
and must get what BatchNorm gets on the whole batch in one process: the
outputs (its slice), the input gradients (its slice), the running
statistics, and the weight and bias gradients summed over the ranks. The
ranks' slices are of different sizes, so the statistics are weighted by
count. A failure raises (a non-zero exit: mpirun fails)."""
import datetime
import sys

import numpy as np

import ember
import ember.distributed as dist
import ember.nn as nn

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
R, N = dist.get_rank(), dist.get_world_size()
SIZES = [3 + r for r in range(N)]  # each rank's slice of the batch
START = sum(SIZES[:R])


def check(got, want, what, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"rank {R}: {what}")


def run(shape_tail, steps=3):
    rng = np.random.default_rng(7)
    C = shape_tail[0]
    whole = [rng.standard_normal((sum(SIZES),) + shape_tail) * 3 + 1 for _ in range(steps)]
    upstream = [rng.standard_normal((sum(SIZES),) + shape_tail) for _ in range(steps)]
    ref = nn.BatchNorm1d(C, dtype=ember.float64) if len(shape_tail) < 3 else nn.BatchNorm2d(C, dtype=ember.float64)
    sync = nn.SyncBatchNorm(C, dtype=ember.float64)
    with ember.no_grad():
        for m in (ref, sync):
            m.weight.copy_(ember.tensor(np.linspace(0.5, 2, C)))
            m.bias.copy_(ember.tensor(np.linspace(-1, 1, C)))
    for step in range(steps):
        xr = ember.tensor(whole[step], requires_grad=True)
        yr = ref(xr)
        (yr * ember.tensor(upstream[step])).sum().backward()
        mine = whole[step][START:START + SIZES[R]]
        xs = ember.tensor(mine, requires_grad=True)
        ys = sync(xs)
        (ys * ember.tensor(upstream[step][START:START + SIZES[R]])).sum().backward()
        check(ys.detach().numpy(), yr.detach().numpy()[START:START + SIZES[R]], f"output, step {step}")
        check(xs.grad.numpy(), xr.grad.numpy()[START:START + SIZES[R]], f"input gradient, step {step}")
        for name in ("weight", "bias"):
            g = getattr(sync, name).grad.clone()
            dist.all_reduce(g)
            check(g.numpy(), getattr(ref, name).grad.numpy(), f"{name} gradient summed, step {step}")
            getattr(sync, name).grad = None
            getattr(ref, name).grad = None
        check(sync.running_mean.numpy(), ref.running_mean.numpy(), f"running mean, step {step}")
        check(sync.running_var.numpy(), ref.running_var.numpy(), f"running var, step {step}")
    sync.eval()
    ref.eval()
    x = ember.tensor(whole[0][START:START + SIZES[R]])
    check(sync(x).numpy(), ref(x).numpy(), "eval output")


run((4,))
run((3, 5))
run((2, 3, 3))
dist.destroy_process_group()
print(f"rank {R} of {N}: sync_bn ok", flush=True)
sys.exit(0)
