"""The corpus of real programs (tests/ports/README.md): every program
present under tests/ports/programs runs unchanged under ember, and each
model program matches PyTorch (forward, training, checkpoints) and
compiles its training step. Skipped where the programs are absent: they
are placed there by hand, not kept in the repository."""

import os
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ports")

pytestmark = pytest.mark.skipif(not os.path.isdir(os.path.join(HERE, "programs")) or
                                not os.listdir(os.path.join(HERE, "programs")),
                                reason="the corpus's programs are not present (tests/ports/README.md)")


def test_the_corpus_runs_unchanged_and_matches_pytorch():
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, os.path.join(HERE, "run_all.py")], capture_output=True, text=True,
                       env=env, timeout=3000)
    report = "\n".join(line for line in r.stdout.splitlines() if ": " in line and not line.startswith(" "))
    assert r.returncode == 0, report + r.stderr[-3000:]
