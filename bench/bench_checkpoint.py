"""Loading and saving checkpoints: time and peak memory (issue 38, item 4).

A checkpoint of 16 float32 tensors, 256 MiB in all (--mib to change), is
written once by torch.save (PyTorch's .pt) and once by ember.save
(safetensors). Each contender then loads it in fresh processes, so that
the peak resident memory it adds (VmHWM after the load minus before it) is
its own. The limit is reading the file's bytes into one
preallocated buffer (readinto: one copy out of the page cache, no parsing). Every contender
loads in --procs fresh processes, interleaved, --runs loads each.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_checkpoint.py [--mib 256] [--runs 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
kind, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind.startswith("torch"):
    import torch
    load = lambda: torch.load(path, weights_only=(kind == "torch weights_only"))
elif kind.startswith("ember"):
    import ember
    load = lambda: ember.load(path)
else:
    import os
    buf = bytearray(os.path.getsize(path))  # (allocated and touched before the clock)
    def load():
        with open(path, "rb", buffering=0) as f:
            f.readinto(buf)
        return buf
def peak():  # (this process's own high-water mark: ru_maxrss would start at the parent's after exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
before = peak()
t0 = time.perf_counter()
obj = load()
first = time.perf_counter() - t0
grown = peak() - before
del obj
times = [first]
for _ in range(runs - 1):
    t0 = time.perf_counter()
    obj = load()
    times.append(time.perf_counter() - t0)
    del obj
print(json.dumps({"grown": grown, "times": times}))
"""


def run(kind, path, runs):
    out = subprocess.run([sys.executable, "-c", CHILD, kind, path, str(runs)], check=True, capture_output=True,
                         text=True, env=os.environ)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=4, help="loads per process")
    ap.add_argument("--procs", type=int, default=5, help="fresh processes per contender")
    args = ap.parse_args()
    import numpy as np
    import torch

    import ember
    nbytes = args.mib << 20
    per = nbytes // 16 // 4
    rng = np.random.default_rng(0)
    arrays = {f"layer{i}.weight": rng.standard_normal(per, dtype=np.float32).reshape(-1, 1024) for i in range(16)}
    with tempfile.TemporaryDirectory() as d:
        pt, st = os.path.join(d, "ck.pt"), os.path.join(d, "ck.safetensors")
        torch.save({k: torch.from_numpy(v) for k, v in arrays.items()}, pt)
        ember.save({k: ember.from_numpy(v) for k, v in arrays.items()}, st)
        # correctness first: ember reads torch's file to the bit
        back = ember.load(pt)
        assert all(np.array_equal(back[k].numpy(), v) for k, v in arrays.items())
        del back
        rows = [("read into one buffer (limit)", "raw", pt), ("ember.load(.pt)", "ember", pt),
                ("torch.load(.pt)", "torch", pt), ("torch.load(.pt, weights_only=True)", "torch weights_only", pt),
                ("ember.load(.safetensors)", "ember", st)]
        # fresh processes, contenders interleaved: the cost of faulting in new
        # memory varies with the machine's state (huge-page compaction), so
        # every contender samples it alike
        runs = {label: [] for label, _, _ in rows}
        for _ in range(args.procs):
            for label, kind, path in rows:
                runs[label].append(run(kind, path, args.runs))
        results = [(label, {"first": [r["times"][0] for r in runs[label]],
                            "later": [t for r in runs[label] for t in r["times"][1:]],
                            "grown": max(r["grown"] for r in runs[label])}) for label, _, _ in rows]
    limit = statistics.median(results[0][1]["later"])
    print(f"{args.mib} MiB checkpoint, 16 float32 tensors, page cache warm; first: median over {args.procs} fresh "
          f"processes of their first load (its memory faulted in), with min-max; later: median of the "
          f"{args.runs - 1} further loads of each; peak: resident memory a first load added / tensor bytes")
    print(f"ember {ember.__version__}, PyTorch {torch.__version__}, NumPy {np.__version__}, "
          f"Python {sys.version.split()[0]}")
    print("| contender | first ms (min-max) | later ms | later vs limit | peak memory / bytes |")
    print("|---|---:|---:|---:|---:|")
    for label, r in results:
        med, first = statistics.median(r["later"]), r["first"]
        print(f"| {label} | {statistics.median(first) * 1e3:.0f} ({min(first) * 1e3:.0f}-{max(first) * 1e3:.0f}) | "
              f"{med * 1e3:.1f} | {med / limit:.2f}x | {r['grown'] / nbytes:.2f}x |")


if __name__ == "__main__":
    main()
