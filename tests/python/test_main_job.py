"""The README's main job (tools/train_digits.py) trains to at least 95%
test accuracy and its checkpoint reloads to the same predictions; the
script itself exits non-zero otherwise."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_train_digits_reaches_95_percent():
    pytest.importorskip("sklearn", reason="the digits come with python3-sklearn")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "train_digits.py")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    last_epoch = [line for line in r.stdout.replace("\r", "\n").splitlines()
                  if "test accuracy" in line][-1]
    acc = float(last_epoch.split("test accuracy")[1].split("%")[0])
    assert acc >= 95.0
    assert "reloaded model's test accuracy" in r.stdout


def test_demo_runs_and_its_compiled_training_step_matches_eager():
    """tools/demo.py (the main job's second half) runs to the end; its
    compiled training step gives the eager step's losses."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("EMBER_DUMP", None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "demo.py")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    line = [s for s in r.stdout.splitlines() if "largest difference from the eager run" in s][0]
    assert float(line.rsplit(": ", 1)[1]) <= 1e-6, line
    assert "write-backs: 8" in r.stdout
    line = [s for s in r.stdout.splitlines() if "largest difference from eager" in s][0]  # the model in a loop
    assert float(line.rsplit(": ", 1)[1]) <= 1e-6, line
    assert "grad_fn CompiledFunctionBackward" in r.stdout
    codes = 6 if "LLVM backend off" in r.stdout else 2  # (the interpreter has no machine code to share)
    assert f"6 specialisations, {codes} machine codes" in r.stdout, r.stdout[-1500:]  # dynamic shapes
