"""ember.distributed's speed on this machine, next to a plain MPI C program
(the same Open MPI) and PyTorch's gloo backend, in one run. Prints Markdown
tables for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_distributed.py

1. all_reduce (SUM, in place) of 64 MB of float32 between 2 processes:
   ember, MPI_Allreduce in C (allreduce_ref.c, built here with mpicc; one
   call, and calls of 4 MiB as ember makes them, on memory allocated as
   ember's allocator does), and torch.distributed with gloo. Each launch times 8 calls after 2 of
   warm-up, between barriers, on rank 0; the median counts.
2. The MLP step of bench_train.py (784-512-512-10, batch 128 per process,
   SGD) with 1 thread per process: one process alone, and 2 processes
   under DistributedDataParallel (the global batch is 256), eager and with
   the whole step compiled (the reduction a node of its graph); the same
   for PyTorch (gloo), eager. Throughput is samples per second of the whole job;
   medians over 40 steps after 5. The ember rows "single-copy off" run with
   Open MPI's single-copy transfers (CMA) off, each message through its
   shared memory (OMPI_MCA_btl_vader_single_copy_mechanism=none).
   2b. Where one rank's eager step goes (worker_timeline): alone, in
   lockstep with another process (a barrier, nothing reduced), and under
   DDP, whose hooks are split into the all_reduce calls and the rest.
3. all_reduce's cost against its size (2 processes): a latency and a
   bandwidth fitted to it.
4. A model of DDP's scaling to 8 and 64 processes (one per node), from
   measured per-bucket figures: when each bucket of the MLP is ready in a
   single process's backward (post-accumulate hooks), what compute follows
   it, and a ring all_reduce's cost 2(p-1) a + 2 (p-1)/p n b for the
   bucket's n bytes, with this machine's fitted a and b, and with two
   networks' (stated assumptions): a bucket's reduction overlaps the
   backward after it (on a core of its own, as on a cluster node with
   cores to spare), the last one's is exposed. Copies into and out of the
   buckets, and the ranks' skew, are left out (see RESULTS.md).

`--pairs N` instead runs N interleaved pairs of launches of the compiled
DDP step and the eager one (compiled_against_eager).

Launches of the contenders interleave over ROUNDS rounds and each keeps
its best median, as the other bench scripts do: this 2-core machine is
noisy. Every launch is a fresh `mpirun -np 2` (ranks bound to a core each,
Open MPI's default).
"""
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = 3
AR_FLOATS = 16 << 20  # 64 MB
MLP_STEPS, MLP_WARM, BATCH = 40, 5, 128
SIZES = [1 << k for k in range(10, 25, 2)]  # floats: 4 KB .. 64 MB


def median_ms(times):
    return statistics.median(times) * 1e3


# ---------------------------------------------------------------- workers (run under mpirun)

def timed_all_reduce(d, t, warm, iters):
    """Seconds of d.all_reduce(t) (d: ember's or torch's distributed),
    each started after a barrier, after `warm` untimed calls."""
    times = []
    for i in range(warm + iters):
        d.barrier()
        s = time.perf_counter()
        d.all_reduce(t)
        if i >= warm:
            times.append(time.perf_counter() - s)
    return times


def worker_allreduce_ember(count, warm, iters):
    import ember
    import ember.distributed as dist
    dist.init_process_group("mpi")
    t = ember.full((count,), 1e-3 * (dist.get_rank() + 1))
    return dist.get_rank(), timed_all_reduce(dist, t, warm, iters)


def _torch_init():
    import torch.distributed as tdist
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['BENCH_PORT']}",
                             rank=int(os.environ["OMPI_COMM_WORLD_RANK"]),
                             world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
    return tdist


def worker_allreduce_torch(count, warm, iters):
    import torch
    torch.set_num_threads(1)
    tdist = _torch_init()
    t = torch.full((count,), 1e-3 * (tdist.get_rank() + 1))
    times = timed_all_reduce(tdist, t, warm, iters)
    rank = tdist.get_rank()
    tdist.destroy_process_group()
    return rank, times


def mlp_step(m, ddp, views=False, compiled=False):
    """One SGD step of the MLP in library m, wrapped in DDP when ddp (with
    gradient_as_bucket_view and zero_grad(set_to_none=False) when views),
    the whole step under ember.compile when compiled."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    net = m.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=views) if ddp else model
    opt = m.optim.SGD(model.parameters(), lr=0.01)
    x = m.randn(BATCH, 784)
    y = m.randint(0, 10, (BATCH,))

    def step(x, y):
        opt.zero_grad(set_to_none=not views)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss
    run = m.compile(step) if compiled else step
    call = lambda: run(x, y)  # noqa: E731
    call.compiled = run if compiled else None
    return call


def worker_mlp(lib, ddp, views=False, compiled=False):
    if lib == "ember":
        import ember as m
        m.set_num_threads(1)
        if ddp:
            m.distributed.init_process_group("mpi")
        rank = m.distributed.get_rank() if ddp else 0
    else:
        import torch as m
        import torch.nn.parallel  # noqa: F401
        m.set_num_threads(1)
        if ddp:
            _torch_init()
        rank = m.distributed.get_rank() if ddp else 0
    step = mlp_step(m, ddp, views, compiled)
    for _ in range(MLP_WARM):
        step()
    times = []
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compiled_check import ran_compiled
    import contextlib
    with ran_compiled(step.compiled, "ember, compiled step") if step.compiled else contextlib.nullcontext():
        for _ in range(MLP_STEPS):  # (a compiled row: every timed call checked to run compiled)
            s = time.perf_counter()
            step()
            times.append(time.perf_counter() - s)
    if ddp:
        m.distributed.destroy_process_group()
    return rank, times


def worker_timeline(mode):
    """Where one rank's eager MLP step goes, medians over MLP_STEPS * 5
    steps: `alone` (one process), `lockstep` (2 processes meeting at a
    barrier after backward, nothing reduced: the cost of running side by
    side in step) or `ddp` (2 processes under DDP, whose hooks' time is
    taken out of backward's and split into its all_reduce calls, which the
    communication thread runs at once on the rank's one core, the ranks'
    skew included, and the rest: copies and Python)."""
    import ember
    import ember.distributed as dist
    import ember.nn.parallel.distributed as D
    ember.set_num_threads(1)
    if mode != "alone":
        dist.init_process_group("mpi")
    nn, F = ember.nn, ember.nn.functional
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    net = D.DistributedDataParallel(model) if mode == "ddp" else model
    opt = ember.optim.SGD(model.parameters(), lr=0.01)
    x, y = ember.randn(BATCH, 784), ember.randint(0, 10, (BATCH,))
    spent = {}

    def timed(name, fn):
        def run(*a, **k):
            s = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - s
        return run
    D.DistributedDataParallel._grad_ready = timed("hooks", D.DistributedDataParallel._grad_ready)
    dist.all_reduce = timed("all_reduce", dist.all_reduce)
    dist.Work.wait = timed("wait", dist.Work.wait)
    rows = {k: [] for k in ("forward", "backward (compute)", "DDP: all_reduce calls and waits",
                            "DDP: copies and Python", "barrier (skew)", "optimizer", "step")}
    for k in range(MLP_WARM + MLP_STEPS * 5):
        spent.clear()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        hooks, comm = spent.get("hooks", 0.0), spent.get("all_reduce", 0.0) + spent.get("wait", 0.0)
        if mode == "lockstep":
            dist.barrier()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        if k < MLP_WARM:
            continue
        for name, v in (("forward", t1 - t0), ("backward (compute)", t2 - t1 - hooks),
                        ("DDP: all_reduce calls and waits", comm), ("DDP: copies and Python", hooks - comm),
                        ("barrier (skew)", t3 - t2), ("optimizer", t4 - t3), ("step", t4 - t0)):
            rows[name].append(v)
    rank = 0
    if mode != "alone":
        rank = dist.get_rank()
        dist.destroy_process_group()
    return rank, {k: median_ms(v) for k, v in rows.items()}


def worker_bucket_times(cap_mb):
    """For each DDP bucket of the MLP (cap bucket_cap_mb): its bytes, and
    the milliseconds of the step left after it is ready (backward's rest
    and the optimizer), median over steps; and the step's time."""
    import ember
    from ember.nn.parallel.distributed import DistributedDataParallel as DDP
    ember.set_num_threads(1)
    nn, F = ember.nn, ember.nn.functional
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    params = list(model.parameters())
    buckets = DDP._make_buckets(params, cap_mb)
    ready = {}
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: ready.__setitem__(i, time.perf_counter()))
    opt = ember.optim.SGD(params, lr=0.01)
    x, y = ember.randn(BATCH, 784), ember.randint(0, 10, (BATCH,))
    after = [[] for _ in buckets]
    steps = []
    for k in range(MLP_WARM + MLP_STEPS):
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        end = time.perf_counter()
        if k >= MLP_WARM:
            steps.append(end - t0)
            for j, b in enumerate(buckets):
                after[j].append(end - max(ready[i] for i in b.params))
    return 0, {"step": median_ms(steps),
               "buckets": [[sum(params[i].numel() * 4 for i in b.params), median_ms(a)]
                           for b, a in zip(buckets, after)]}


def ring_ms(p, nbytes, alpha_ms, gb_s):
    return 2 * (p - 1) * alpha_ms + 2 * (p - 1) / p * nbytes / (gb_s * 1e6)


def model_step(p, cost, alpha_ms, gb_s):
    """A step's time on p ranks: the buckets reduce one after another on a
    core of their own, each starting when it is ready and the one before it
    is done; what is left after backward's end is exposed."""
    free_at = 0.0  # when the communication thread is free, in ms after the step's start
    for nbytes, after in cost["buckets"]:
        ready = cost["step"] - after
        free_at = max(free_at, ready) + ring_ms(p, nbytes, alpha_ms, gb_s)
    return max(cost["step"], free_at)


def worker_sizes():
    import ember
    import ember.distributed as dist
    dist.init_process_group("mpi")
    out = {}
    for n in SIZES:
        out[n] = median_ms(timed_all_reduce(dist, ember.ones(n), 3, 15))
    return dist.get_rank(), out


# ---------------------------------------------------------------- the driver

def env():
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    e.pop("OPENBLAS_CORETYPE", None)
    return e


_port = [29600]
NO_CMA = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def launch(n, args, **extra_env):
    """Runs this script's worker on n ranks (n == 1: without mpirun), with
    extra_env added to the environment; returns rank 0's result."""
    _port[0] += 1
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(args)]
    if n > 1:
        cmd = ["mpirun", "-np", str(n), "-x", f"BENCH_PORT={_port[0]}"] + cmd
    proc = subprocess.run(cmd, env=dict(env(), BENCH_PORT=str(_port[0]), **extra_env), capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            rank, value = json.loads(line[7:])
            if rank == 0:
                return value
    raise RuntimeError(f"no result from {cmd}: {proc.stdout[-2000:]}")


def launch_c(exe, count, warm, iters, chunk=None):
    extra = [str(chunk)] if chunk else []
    proc = subprocess.run(["mpirun", "-np", "2", exe, str(count), str(warm), str(iters)] + extra, env=env(),
                          capture_output=True, text=True, timeout=600, check=True)
    return [float(line.split()[1]) / 1e3 for line in proc.stdout.splitlines() if line.startswith("ms ")]


def have_torch_gloo():
    try:
        import torch.distributed as tdist
        return tdist.is_available() and tdist.is_gloo_available()
    except ImportError:
        return False


def main():
    if not shutil.which("mpirun") or not shutil.which("mpicc"):
        sys.exit("needs Open MPI: apt-get install openmpi-bin libopenmpi-dev")
    exe = os.path.join(tempfile.mkdtemp(prefix="ember-bench-"), "allreduce_ref")
    subprocess.run(["mpicc", "-O2", os.path.join(HERE, "allreduce_ref.c"), "-o", exe], check=True)
    torch_ok = have_torch_gloo()

    # 1. all_reduce of 64 MB
    best = {}
    for _ in range(ROUNDS):
        runs = {"ember": lambda: launch(2, ["allreduce_ember", AR_FLOATS, 2, 8]),
                "C": lambda: launch_c(exe, AR_FLOATS, 2, 8),
                "C4": lambda: launch_c(exe, AR_FLOATS, 2, 8, 1 << 20)}
        if torch_ok:
            runs["torch"] = lambda: launch(2, ["allreduce_torch", AR_FLOATS, 2, 8])
        for name, fn in runs.items():
            ms = median_ms(fn())
            best[name] = min(best.get(name, ms), ms)
    nbytes = AR_FLOATS * 4
    print("\n### all_reduce of 64 MB float32, 2 processes\n")
    print("| contender | median ms | GB/s (bytes / time) | speed vs one MPI_Allreduce | vs 4 MiB calls in C |")
    print("|---|---:|---:|---:|---:|")
    names = {"ember": "ember.distributed.all_reduce (4 MiB calls)", "C": "one MPI_Allreduce in C (same Open MPI)",
             "C4": "MPI_Allreduce in C, 4 MiB calls", "torch": "torch.distributed (gloo)"}
    for k in best:
        print(f"| {names[k]} | {best[k]:.1f} | {nbytes / best[k] / 1e6:.2f} | {best['C'] / best[k]:.2f}x "
              f"| {best['C4'] / best[k]:.2f}x |")

    # 2. DDP throughput on the MLP step
    best = {}
    for _ in range(ROUNDS):
        runs = {("ember", 1): lambda: launch(1, ["mlp", "ember", False]),
                ("ember", 2): lambda: launch(2, ["mlp", "ember", True]),
                ("ember, gradient_as_bucket_view", 2): lambda: launch(2, ["mlp", "ember", True, True]),
                # Open MPI's single-copy transfers (CMA) off: each message through its shared memory
                ("ember, single-copy off", 2): lambda: launch(2, ["mlp", "ember", True], **NO_CMA),
                ("ember, compiled step", 1): lambda: launch(1, ["mlp", "ember", False, False, True]),
                ("ember, compiled step", 2): lambda: launch(2, ["mlp", "ember", True, False, True]),
                ("ember, compiled step, single-copy off", 2):
                    lambda: launch(2, ["mlp", "ember", True, False, True], **NO_CMA)}
        if torch_ok:
            runs[("torch", 1)] = lambda: launch(1, ["mlp", "torch", False])
            runs[("torch", 2)] = lambda: launch(2, ["mlp", "torch", True])
        for key, fn in runs.items():
            ms = median_ms(fn())
            best[key] = min(best.get(key, ms), ms)
    print("\n### DistributedDataParallel, MLP step, 1 thread per process\n")
    print("| library | processes | step ms (median) | samples/s | vs 1 process |")
    print("|---|---:|---:|---:|---:|")
    for lib, n in best:
        parts = lib.split(", ")  # against the 1-process run of the longest prefix of its name
        base = next(k for k in (", ".join(parts[:j]) for j in range(len(parts), 0, -1)) if (k, 1) in best)
        one = 1 * BATCH / best[(base, 1)]
        thr = n * BATCH / best[(lib, n)]
        print(f"| {lib} | {n} | {best[(lib, n)]:.2f} | {thr * 1e3:.0f} | {thr / one:.2f}x |")

    # 2b. where the time of a DDP step goes
    parts = {}
    for _ in range(ROUNDS):
        for mode, n in (("alone", 1), ("lockstep", 2), ("ddp", 2)):
            got = launch(n, ["timeline", mode], **NO_CMA)
            if mode not in parts or got["step"] < parts[mode]["step"]:
                parts[mode] = got
    print("\n### Where one rank's eager MLP step goes (ms, medians; the round with the fastest step; "
          "single-copy off)\n")
    print("| part | one process | 2 processes in lockstep, nothing reduced | 2 processes under DDP |")
    print("|---|---:|---:|---:|")
    for part in parts["ddp"]:
        print(f"| {part} | " + " | ".join(f"{parts[m][part]:.2f}" if parts[m][part] > 0.005 else "-"
                                         for m in ("alone", "lockstep", "ddp")) + " |")

    # 3. all_reduce cost against size
    sizes = launch(2, ["sizes"])
    print("\n### ember all_reduce against size, 2 processes\n")
    print("| floats | bytes | median ms | GB/s |")
    print("|---:|---:|---:|---:|")
    for n, ms in sizes.items():
        print(f"| {int(n):,} | {int(n) * 4:,} | {ms:.3f} | {int(n) * 4 / ms / 1e6:.2f} |")
    # latency from the smallest message, bandwidth from the two largest (a
    # least-squares line is all large messages and may give a negative latency)
    items = sorted((int(n) * 4, ms) for n, ms in sizes.items())
    alpha = items[0][1]
    beta = (items[-1][1] - items[-2][1]) / (items[-1][0] - items[-2][0])
    print(f"\nfit: time = {alpha * 1e3:.1f} us (the smallest message) + bytes / {1 / beta / 1e6:.2f} GB/s "
          f"(the slope between the two largest)")

    # 4. the scaling model
    nets = [("this machine's shared memory (fit above)", alpha / 2, 1 / beta / 1e6, (2,)),
            ("25 Gb/s Ethernet (assumed: 25 us, 3.1 GB/s)", 0.025, 3.1, (2, 8, 64)),
            ("100 Gb/s InfiniBand (assumed: 2 us, 12 GB/s)", 0.002, 12.0, (2, 8, 64))]
    for cap in (25, 1):
        cost = launch(1, ["buckets", cap])
        print(f"\n### scaling model, bucket_cap_mb={cap}: buckets (bytes, ms of the step after it is ready) "
              f"{[(b, round(a, 3)) for b, a in cost['buckets']]}, step {cost['step']:.2f} ms alone\n")
        print("| network | ranks | step ms | efficiency | speed-up |")
        print("|---|---:|---:|---:|---:|")
        for name, a_ms, gbs, ranks in nets:
            for p in ranks:
                t = model_step(p, cost, a_ms, gbs)
                print(f"| {name} | {p} | {t:.2f} | {cost['step'] / t * 100:.0f}% | {p * cost['step'] / t:.1f}x |")

    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"\nMachine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}; {mpi}")


def compiled_against_eager(pairs):
    """The compiled DDP step against the eager one, launched in interleaved
    pairs (a noisy machine moves both of a pair alike), with Open MPI's
    single-copy transfers off and on: each pair's eager/compiled ratio."""
    print("| pair | single-copy | eager ms | compiled ms | eager / compiled |")
    print("|---:|---|---:|---:|---:|")
    for k in range(pairs):
        for name, extra in (("off", NO_CMA), ("on", {})):
            e = median_ms(launch(2, ["mlp", "ember", True], **extra))
            c = median_ms(launch(2, ["mlp", "ember", True, False, True], **extra))
            print(f"| {k + 1} | {name} | {e:.2f} | {c:.2f} | {e / c:.3f} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--pairs":
        compiled_against_eager(int(sys.argv[2]))
    elif len(sys.argv) > 2 and sys.argv[1] == "--worker":
        args = json.loads(sys.argv[2])
        fn = {"allreduce_ember": worker_allreduce_ember, "allreduce_torch": worker_allreduce_torch,
              "mlp": worker_mlp, "sizes": worker_sizes, "buckets": worker_bucket_times,
              "timeline": worker_timeline}[args[0]]
        rank, value = fn(*args[1:])
        if rank == 0:  # (the ranks' lines would interleave)
            print("RESULT " + json.dumps([rank, value]), flush=True)
    else:
        main()
