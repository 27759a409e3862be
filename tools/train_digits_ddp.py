"""The digits CNN of train_digits.py trained data-parallel: each process of
an MPI job takes its part of every epoch (DistributedSampler) and
DistributedDataParallel averages the gradients, so all processes hold the
same model after every step.

    mpirun -np 2 python3 tools/train_digits_ddp.py [--epochs N]

(As root, Open MPI also wants --allow-run-as-root; on a machine with fewer
cores than processes, --oversubscribe.) Rank 0 prints; at the end every
rank's parameters are compared across the job, and the test accuracy must
reach 95%.
"""

import argparse
import os
import sys
import time

import ember
import ember.distributed as dist
import ember.nn.functional as F
from ember.nn.parallel import DistributedDataParallel
from ember.utils.data import DataLoader, TensorDataset
from ember.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import DigitNet, evaluate, load_digits  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=32, help="per process")
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)
    ember.manual_seed(rank)  # different on purpose: DDP starts every rank from rank 0's weights
    (xtr, ytr), (xte, yte) = load_digits()
    train = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    test_loader = DataLoader(TensorDataset(xte, yte), batch_size=256)
    say(f"{world} processes ({dist.get_backend()}), {ember.get_num_threads()} thread(s) each; "
        f"{len(sampler)} of {len(train)} training images per process per epoch, batch {args.batch_size} "
        f"per process ({args.batch_size * world} in all)")

    model = DistributedDataParallel(DigitNet())
    opt = ember.optim.Adam(model.parameters(), lr=args.lr)
    sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        model.train()
        loss_sum = ember.zeros(())
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()  # gradients averaged across the processes, in buckets
            opt.step()
            loss_sum += loss.detach() * len(y)
        dist.all_reduce(loss_sum)  # the whole epoch's loss, over every process's part
        sched.step()
        _, acc = evaluate(model.module, test_loader)
        say(f"  epoch {epoch:2d}/{args.epochs}  train loss {float(loss_sum) / (len(sampler) * world):.4f}  "
            f"test accuracy {acc * 100:5.1f}%")
    say(f"trained in {time.perf_counter() - start:.1f} s")

    # every rank must hold the same parameters: the spread of each across ranks is 0
    flat = ember.cat([p.detach().reshape(-1) for p in model.parameters()])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    spread = float((hi - lo).abs().max())
    _, acc = evaluate(model.module, test_loader)
    say(f"parameters on the {world} processes differ by at most {spread:g}; test accuracy {acc * 100:.1f}%")
    dist.destroy_process_group()
    if spread != 0 or acc < 0.95:
        sys.exit(f"FAILED on rank {rank}: spread {spread}, accuracy {acc * 100:.1f}% (want 0 and at least 95%)")


if __name__ == "__main__":
    main()
