"""Issue 43's eager CUDA figures: ember's generated kernels against
PyTorch's on the same GPU, in one run, with the memory-bandwidth bound as
the limit (the hand-written limit of a kernel that reads and writes each
byte once: bytes moved / the card's peak bandwidth).

    PYTHONPATH=python:build-gpu/python python3 bench/bench_cuda.py [PEAK_GBS]

Needs a GPU (tools/gpu_check.sh runs it on the device tool's machine).
Each figure is the median of 20 timed calls after 5 warm-ups, synchronised
around each batch; PEAK_GBS (default 4800, the H200's) sets the limit.
Prints one line per op: ember's ms, PyTorch's ms, their ratio, and each
one's share of the bandwidth limit.
"""

import statistics
import sys
import time

import ember
import ember.nn.functional as F

try:
    import torch
except ImportError:
    torch = None


def median_ms(fn, sync, n=20):
    for _ in range(5):
        fn()
    sync()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def cases(lib, F_, dev):
    n = 1 << 26
    a, b = lib.randn(n, device=dev), lib.randn(n, device=dev)
    rows = lib.randn(8192, 4096, device=dev)
    w, bias = lib.ones(4096, device=dev), lib.zeros(4096, device=dev)
    img, k = lib.randn(32, 64, 56, 56, device=dev), lib.randn(64, 64, 3, 3, device=dev)
    vocab, ids = lib.randn(50304, 768, device=dev), lib.randint(0, 50304, (8, 1024), device=dev)
    logits = lib.randn(8, 50304, device=dev)
    return [
        ("add 2^26 f32", lambda: a + b, 3 * 4 * n),
        ("exp 2^26 f32", lambda: a.exp(), 2 * 4 * n),
        ("gelu 2^26 f32", lambda: F_.gelu(a), 2 * 4 * n),
        ("sum 2^26 f32", lambda: a.sum(), 4 * n),
        ("row sums 8192x4096", lambda: rows.sum(1), 4 * rows.numel()),
        ("softmax rows 8192x4096", lambda: F_.softmax(rows, dim=1), 2 * 4 * rows.numel()),
        ("layer_norm rows 8192x4096", lambda: F_.layer_norm(rows, (4096,), w, bias), 2 * 4 * rows.numel()),
        ("transpose copy 8192x4096", lambda: rows.t().contiguous(), 2 * 4 * rows.numel()),
        # (below: ember's first versions of these kernels; the "limit" is
        # one read and write of the data, which none of them reaches)
        ("conv 3x3 32x64x56x56", lambda: F_.conv2d(img, k, padding=1), 2 * 4 * img.numel()),
        ("max_pool 2x2 32x64x56x56", lambda: F_.max_pool2d(img, 2), 4 * img.numel() * 5 // 4),
        ("embedding 8x1024 of 50304x768", lambda: F_.embedding(ids, vocab), 2 * 4 * 8 * 1024 * 768),
        ("sort rows 8192x4096", lambda: rows.sort(dim=1), 3 * 4 * rows.numel()),
        ("topk 50 of 8x50304", lambda: logits.topk(50, dim=1), 4 * logits.numel()),
    ]


def main():
    peak = float(sys.argv[1]) if len(sys.argv) > 1 else 4800.0
    if not ember.cuda.is_available():
        print(f"no CUDA device for ember: {ember.cuda.why_unavailable()}")
        return
    print(f"GPU: {ember.cuda.get_device_name()}, peak taken as {peak:.0f} GB/s")
    mine = cases(ember, F, "cuda")
    theirs = cases(torch, torch.nn.functional, "cuda") if torch is not None and torch.cuda.is_available() else None
    print(f"{'op':28s} {'ember ms':>9s} {'torch ms':>9s} {'ember/torch':>11s} {'ember %peak':>11s} {'torch %peak':>11s}")
    for i, (name, fn, nbytes) in enumerate(mine):
        limit_ms = nbytes / (peak * 1e9) * 1e3
        e = median_ms(fn, ember.cuda.synchronize)
        t = median_ms(theirs[i][1], torch.cuda.synchronize) if theirs else float("nan")
        print(f"{name:28s} {e:9.3f} {t:9.3f} {e / t:11.2f} {100 * limit_ms / e:10.0f}% {100 * limit_ms / t:10.0f}%")


if __name__ == "__main__":
    main()
