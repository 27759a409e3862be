"""Model programs of the corpus against PyTorch 1.13: a program's module is
loaded twice, once with the real torch and once with `torch` pointed at
ember (shim.py), and its model is checked the way a user would check a
port:

  forward      the same weights (copied from PyTorch's model), the same
               inputs: outputs within tolerance;
  training     a few SGD steps of the same loss on both: parameters within
               tolerance afterwards;
  checkpoints  ember's state_dict saved by ember.save and loaded by
               torch.load into PyTorch's model, and PyTorch's saved by
               torch.save and loaded by ember.load: the same outputs;
  compile      the training step under ember.compile: the eager step's
               losses, and every call after the first two ran compiled code
               (no fallback; the reasons are reported otherwise).
"""

import importlib.util
import io
import os
import sys
import tempfile

import numpy as np

import shim


def load(path, backend):
    """The program file at `path` imported as a fresh module whose `torch`
    is the real one (backend "torch") or ember's."""
    import torch  # noqa: F401  (the real one, first)
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    finder = None
    if backend == "ember":
        for k in saved:
            del sys.modules[k]
        finder = shim._TorchAlias()
        sys.meta_path.insert(0, finder)
    sys.path[:0] = [os.path.dirname(path), os.path.dirname(os.path.dirname(path))]  # (its package's parent too)
    try:
        name = f"port_{backend}_{os.path.basename(path)[:-3]}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        del sys.path[:2]
        for k in [k for k in sys.modules if k.startswith("mingpt")]:  # (a package of the program's: per backend)
            del sys.modules[k]
        if finder is not None:
            sys.meta_path.remove(finder)
            for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
                del sys.modules[k]
            sys.modules.update(saved)


def to_np(t):
    return t.detach().cpu().numpy().astype(np.float64)


def rel(a, b):
    a, b = to_np(a), to_np(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def copy_weights(src_torch, dst_ember):
    """PyTorch's weights into ember's model. Keys only PyTorch 1.13's model
    has are left out: buffers a program registers only where
    scaled_dot_product_attention is missing (nanoGPT's causal mask)."""
    import ember
    want = dst_ember.state_dict()
    sd = {k: ember.tensor(v.detach().numpy()) for k, v in src_torch.state_dict().items() if k in want}
    dst_ember.load_state_dict(sd)


def outputs(y):
    if isinstance(y, (tuple, list)):
        return [o for o in y if o is not None and hasattr(o, "shape")]
    return [y]


def check_model(case, tol=1e-4):
    """case: dict with path, build(module, m) -> model, inputs(m) -> tuple,
    loss(module, m, model, inputs) -> scalar, train (bool: train() mode for
    the steps; False where dropout would make runs differ). Returns
    {check: (ok, detail)}."""
    import ember
    import torch
    results = {}
    tmod, emod = load(case["path"], "torch"), load(case["path"], "ember")
    torch.manual_seed(0)
    tm = case["build"](tmod, torch)
    em = case["build"](emod, ember)
    copy_weights(tm, em)
    tin, ein = case["inputs"](torch), case["inputs"](ember)

    tm.eval(), em.eval()
    with torch.no_grad(), ember.no_grad():
        ty, ey = outputs(tm(*tin)), outputs(em(*ein))
    err = max(rel(e, t) for e, t in zip(ey, ty))
    results["forward"] = (err <= tol, f"{err:.1e}")

    def train(m, mod, model, inputs, steps=3):
        model.train(case.get("train", True))
        opt = mod.optim.SGD(model.parameters(), lr=case.get("lr", 0.01))
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = case["loss"](m, mod, model, inputs)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        return losses

    # the same steps in float64: the training check is ember's distance from
    # it against PyTorch's float32 distance (some models, BatchNorm after
    # BatchNorm at batch 4, amplify float32 rounding by 1e3 in both)
    t64 = case["build"](tmod, torch).double()
    t64.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in tm.state_dict().items()})
    def double(t):
        return tuple(double(u) for u in t) if isinstance(t, tuple) else t.double() if t.is_floating_point() else t
    t64in = double(tin)
    tl, el = train(tmod, torch, tm, tin), train(emod, ember, em, ein)
    train(tmod, torch, t64, t64in)
    tsd, esd, dsd = tm.state_dict(), em.state_dict(), t64.state_dict()

    def dist(sd):  # largest difference from float64, each tensor on its own scale (at least 1e-3)
        return max((float(np.abs(to_np(sd[k]) - to_np(dsd[k])).max() / max(np.abs(to_np(dsd[k])).max(), 1e-3)), k)
                   for k in esd if dsd[k].is_floating_point())
    (de, worst), (dt, _) = dist(esd), dist(tsd)
    results["training"] = (de <= 2 * dt + 10 * tol, f"params {de:.1e} from float64 ({worst}; PyTorch's {dt:.1e}), "
                                                     f"losses {el[-1]:.5f} vs {tl[-1]:.5f}")

    tm.eval(), em.eval()
    with tempfile.TemporaryDirectory() as d:
        ember.save(em.state_dict(), os.path.join(d, "e.pt"))
        tm2 = case["build"](tmod, torch)
        missing = tm2.load_state_dict(torch.load(os.path.join(d, "e.pt")), strict=False).missing_keys
        assert all(k in dict(tm2.named_buffers()) for k in missing), missing  # (see copy_weights)
        torch.save(tm.state_dict(), os.path.join(d, "t.pt"))
        em2 = case["build"](emod, ember)
        extra = em2.load_state_dict(ember.load(os.path.join(d, "t.pt")), strict=False).unexpected_keys
        assert all(k in dict(tm.named_buffers()) for k in extra), extra  # (see copy_weights)
        tm2.eval(), em2.eval()
        with torch.no_grad(), ember.no_grad():
            a = outputs(tm2(*tin))[0]
            b = outputs(em(*ein))[0]
            c = outputs(em2(*ein))[0]
            t0 = outputs(tm(*tin))[0]
        cerr = max(rel(a, b), rel(c, t0))
    results["checkpoints"] = (cerr <= tol, f"{cerr:.1e}")

    results["compile"] = check_compile(case, emod)
    return results


def check_compile(case, emod):
    import ember
    torch_free = {}

    def fresh():
        ember.manual_seed(0)
        model = case["build"](emod, ember)
        model.train(case.get("train", True))
        return model, ember.optim.SGD(model.parameters(), lr=case.get("lr", 0.01))

    ein = case["inputs"](ember)

    def stepper(model, opt):
        def step(*inputs):
            opt.zero_grad()
            loss = case["loss"](emod, ember, model, inputs)
            loss.backward()
            opt.step()
            return loss
        return step

    m1, o1 = fresh()
    eager = [float(stepper(m1, o1)(*ein).item()) for _ in range(4)]
    m2, o2 = fresh()
    compiled = ember.compile(stepper(m2, o2))
    try:
        got = [float(compiled(*ein).item()) for _ in range(4)]
    except Exception as e:  # noqa: BLE001 (reported as the port's result)
        return False, f"{type(e).__name__}: {e}"[:300]
    stats = compiled._stats()
    err = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, eager))
    ok = err <= 1e-4 and stats["compiled_calls"] >= 2 and stats["eager_calls"] == 0
    detail = f"losses {err:.1e} from eager, {stats['compiled_calls']} compiled calls"
    if not ok:
        detail += f", {stats['eager_calls']} eager; fallbacks: {stats['fallbacks']}"
    return ok, detail[:400]
