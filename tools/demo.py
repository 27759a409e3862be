"""ember's main demo: eager tensors, a GELU compiled into one kernel, a
whole training step (forward, backward, optimizer) compiled into one function,
and a compiled model in an ordinary training loop.

Run it with tools/run_demo.sh (which builds ember and turns on IR dumps), or
    PYTHONPATH=python:build/python EMBER_DUMP=ir,passes,llvm python3 tools/demo.py
"""

import os
import time

import ember as em


@em.compile
def gelu(x):
    return 0.5 * x * (1.0 + em.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def best_time(fn, *args, repeat=10):
    fn(*args)  # warm up (allocator cache, threads)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    print(f"ember {em.__version__}: {em.get_num_threads()} threads, "
          f"LLVM backend {'on' if em.compiler.has_llvm() else 'off (interpreter)'}, "
          f"compilation {'on' if em.compiler.is_enabled() else 'off (EMBER_COMPILE=0)'}")

    print("\n1. Eager mode, like PyTorch")
    em.manual_seed(0)
    x = em.randn(1024, 1024)
    w = em.randn(1024, 1024)
    y = (x @ w + 1.0).relu() * 0.5
    print(f"   y = (x @ w + 1.0).relu() * 0.5  ->  shape {tuple(y.shape)}, dtype {y.dtype}")
    print("   y[:2, :4] via NumPy (zero-copy):", y.numpy()[:2, :4].astype(float).round(3).tolist())

    print("\n   The PyTorch API, with its semantics: dtypes, indexing, reductions, einsum")
    t = em.arange(12).reshape(3, 4)
    print("   t = arange(12).reshape(3, 4):", t.tolist())
    print("   t[1:, ::2] (a view):", t[1:, ::2].tolist(), "  t[t % 5 == 0]:", t[t % 5 == 0].tolist())
    print("   t.float().softmax(-1)[0]:", [round(v, 4) for v in t.float().softmax(-1)[0].tolist()])
    vals, idx = t.max(1)
    print(f"   t.max(1) -> values {vals.tolist()}, indices {idx.tolist()}")
    h = t.to(em.bfloat16) / 3
    print(f"   t.to(ember.bfloat16) / 3 -> dtype {h.dtype}, h[0] = {h[0].tolist()}")
    print("   einsum('ii', t @ t.T) (the trace of a Gram matrix):", em.einsum("ii", t @ t.T).item())

    print("\n2. @ember.compile: GELU on 16M float32 values")
    x = em.randn(4096, 4096)
    t = time.perf_counter()
    first = gelu(x)
    t_first = time.perf_counter() - t
    print(f"   first call (runs eagerly while tracing, then compiles): {t_first * 1e3:.1f} ms")
    t_eager = best_time(gelu.__wrapped__, x)
    t_comp = best_time(gelu, x)
    diff = float((gelu(x) - gelu.__wrapped__(x)).numpy().__abs__().max())
    print(f"   eager    (one kernel and one temporary per op): {t_eager * 1e3:7.2f} ms")
    print(f"   compiled (one fused LLVM kernel):               {t_comp * 1e3:7.2f} ms")
    print(f"   speed-up: {t_eager / t_comp:.1f}x   max |compiled - eager| = {diff:g}")
    del first

    print("\n3. Guards: a new shape is a new specialisation, still correct")
    small = em.randn(7)
    print("   gelu(randn(7)) ->", gelu(small))
    specs = gelu._specializations()
    for i, s in enumerate(specs):
        print(f"   specialisation {i}: backend {s['backend']}; guards: {s['guards'].strip()}")

    dump = specs[0]["dump_path"]
    if dump:
        print(f"\n4. The IR of specialisation 0 was dumped to {dump}/")
        for name in sorted(os.listdir(dump)):
            print(f"   {name}")
        with open(os.path.join(dump, "final.ir")) as f:
            print(f"\n   final.ir (after the passes: {', '.join(em.compiler.passes())}):")
            for line in f.read().splitlines():
                print("   " + line)
    else:
        print("\n(set EMBER_DUMP=ir,passes,llvm to see the IR: tools/run_demo.sh does)")
    training_step()
    model_in_a_loop()
    changing_sizes()


def training_step(steps=60):
    """5. A training step, compiled: forward, loss, backward and the SGD
    update in one graph, which runs as one compiled function."""
    print("\n5. A whole training step compiled: an MLP 784-256-10 on batches of 128")
    nn = em.nn
    data = [(em.randn(128, 784), em.randint(0, 10, (128,))) for _ in range(4)]

    def make():
        em.manual_seed(1)
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        opt = em.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eager, compiled = make(), em.compile(make())
    losses, times = {}, {}
    for name, step in (("eager", eager), ("compiled", compiled)):
        step(*data[0])  # (the compiled step traces its first two calls)
        step(*data[1])
        t = time.perf_counter()
        losses[name] = [step(*data[i % 4]).item() for i in range(steps)]
        times[name] = (time.perf_counter() - t) / steps
    same = max(abs(a - b) for a, b in zip(losses["eager"], losses["compiled"]))
    print(f"   loss {losses['compiled'][0]:.3f} -> {losses['compiled'][-1]:.3f} over {steps} steps; "
          f"largest difference from the eager run: {same:.1e}")
    print(f"   per step: eager {times['eager'] * 1e3:.2f} ms, compiled {times['compiled'] * 1e3:.2f} ms")
    spec = [s for s in compiled._specializations() if s["backend"] not in ("eager", "pending")][-1]
    print("   what the compiled step is (ember.compiler.explain tells more):")
    for line in spec["kernels"].splitlines()[:2]:
        print("   " + line.strip())
    for line in spec["state"].splitlines():
        if line.startswith((".grad slots", "write-backs")):
            print("   " + line)


def model_in_a_loop(steps=60):
    """6. ember.compile(model) in the training loop one already has:
    backward() and the optimizer stay outside, as with torch.compile."""
    print("\n6. A compiled model in an ordinary loop: loss.backward() and opt.step() outside")
    nn = em.nn
    data = [(em.randn(64, 784), em.randint(0, 10, (64,))) for _ in range(4)]

    def run(compiled):
        em.manual_seed(1)
        model = nn.Sequential(nn.Linear(784, 256), nn.GELU(), nn.Dropout(0.1), nn.Linear(256, 10))
        fwd = em.compile(model) if compiled else model
        opt = em.optim.Adam(model.parameters(), lr=1e-3)
        losses = []
        fwd(data[0][0])  # (the first call traces forward and backward)
        t = time.perf_counter()
        for i in range(steps):
            x, y = data[i % 4]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, (time.perf_counter() - t) / steps, fwd

    (le, te, _), (lc, tc, cmodel) = run(False), run(True)
    print(f"   loss {lc[0]:.3f} -> {lc[-1]:.3f} over {steps} steps (dropout on); largest difference from "
          f"eager: {max(abs(a - b) for a, b in zip(le, lc)):.1e}")
    print(f"   per step: eager {te * 1e3:.2f} ms, compiled model {tc * 1e3:.2f} ms")
    out = cmodel(data[0][0])
    print(f"   the model's output has grad_fn {out.grad_fn.name()}: it runs the compiled backward graph")
    spec = [s for s in cmodel._specializations() if s["backward"]][-1]
    for line in spec["partition"].splitlines():
        if not line.startswith("  "):
            print("   " + line)


def changing_sizes():
    """7. Dynamic shapes: batches of changing size through one compiled
    model; after the first size change, every size runs the same code."""
    print("\n7. Dynamic shapes: a compiled model over batches of changing size")
    nn = em.nn
    em.manual_seed(2)
    model = nn.Sequential(nn.Linear(784, 256), nn.GELU(), nn.Linear(256, 10))
    fwd = em.compile(model)
    opt = em.optim.SGD(model.parameters(), lr=1e-2)
    for n in (128, 128, 104, 77, 128, 33, 90, 61):  # a loader's batches, then stragglers
        x, y = em.randn(n, 784), em.randint(0, 10, (n,))
        t = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(fwd(x), y).backward()
        opt.step()
        spec = fwd._compiled._last_call()
        print(f"   batch {n:3d}: {spec['event']:8s} specialisation {spec['specialization']}, "
              f"{(time.perf_counter() - t) * 1e3:6.1f} ms")
    st = fwd._compiled._stats()
    print(f"   {st['specializations']} specialisations, {st['code_objects']} machine codes: sizes are read at "
          f"run time since {st['varying']} varied (a new size costs a trace, not a compile)")


if __name__ == "__main__":
    main()
