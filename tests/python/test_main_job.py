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
