"""The GPT-2 block's whole training step (issue 13): forward, backward and
AdamW, eager and compiled as one step, with its peak memory.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_block_step.py

d768, 12 heads, seq 256, batch 4 (bench_train.py's block), loss the mean
square of the output. Times are medians of 10 steps, best of 3 interleaved
rounds; PyTorch runs the same step eagerly in this process (2 threads).
Peak memory is ember's allocator's peak_in_use during one step (after two
warm-up steps and ember.reset_peak_memory_stats), in a fresh process per
variant: everything held counts, the parameters, gradients and AdamW state
both have, and the compiled step's arena of intermediates, which it keeps
between calls.
"""

import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember  # noqa: E402
from bench_train import machine, make_gpt_block  # noqa: E402
from compiled_check import median_ms_checked  # noqa: E402

BATCH, SEQ, D = 4, 256, 768


def step_fn(m, compile_block=False):
    """One training step of the block; with compile_block, the block is
    ember.compile(block) and the step around it plain Python (step.fwd)."""
    block = make_gpt_block(m, SEQ, D)
    fwd = m.compile(block) if compile_block else block
    opt = m.optim.AdamW(block.parameters(), lr=1e-4)
    x = m.randn(BATCH, SEQ, D)

    def step():
        opt.zero_grad()
        loss = fwd(x).square().mean()
        loss.backward()
        opt.step()
        return loss
    step.fwd = fwd
    return step


def median_ms(fn, n=10):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def peak_bytes(compiled):
    """The peak in a fresh process (see the header)."""
    import subprocess
    code = ("import gc, ember, bench_block_step as b\n"
            f"s = b.step_fn(ember)\ns = ember.compile(s) if {compiled} else s\n"
            "s(); s(); gc.collect(); ember.reset_peak_memory_stats(); s()\n"
            "print(ember.memory_stats()['peak_in_use'])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return int(out.stdout.split()[-1])


def main():
    eager = step_fn(ember)
    compiled_step = ember.compile(step_fn(ember))
    t0 = time.perf_counter()
    compiled_step()
    first_ms = (time.perf_counter() - t0) * 1e3
    compiled_step()
    timed_compiled = lambda: compiled_step()  # noqa: E731
    timed_compiled.compiled = compiled_step  # (every timed call checked to run compiled)
    contenders = {"ember eager": eager, "ember compiled step": timed_compiled}
    try:
        import torch
        torch.set_num_threads(2)
        contenders["PyTorch eager (2 threads)"] = step_fn(torch)
    except ImportError:
        pass
    best = {k: float("inf") for k in contenders}
    for _ in range(3):
        for k, fn in contenders.items():
            fn()
            best[k] = min(best[k], median_ms_checked(fn, 10, k, warm=0))
    print(machine())
    print(f"\n| GPT-2 block training step (AdamW) | ms | / ember eager |\n|---|---:|---:|")
    for k, v in best.items():
        print(f"| {k} | {v:.1f} | {v / best['ember eager']:.2f}x |")
    pe, pc = peak_bytes(False), peak_bytes(True)
    print(f"\npeak memory in a step: eager {pe / 2**20:.1f} MiB, compiled {pc / 2**20:.1f} MiB "
          f"({pc / pe:.2f}x); first compiled call (trace + compile + run) {first_ms:.0f} ms")
    print(f"compiled calls: {compiled_step._stats()['compiled_calls']}")


if __name__ == "__main__":
    main()
