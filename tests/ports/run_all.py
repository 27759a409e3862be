"""Runs the whole corpus that is present under programs/: each script
program unchanged under ember (run_port.py; it must exit 0), then each
model program against PyTorch (check_models.py). Prints a line per program
and exits non-zero if any failed.

    PYTHONPATH=python:build/python /usr/bin/python3 tests/ports/run_all.py"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")

# (name, program, arguments): small runs of each program's own loop
SCRIPTS = [
    ("mnist", "mnist/main.py", ["--epochs", "1", "--no-accel"]),
    ("mnist_rnn", "mnist_rnn/main.py", ["--epochs", "1"]),
    ("mnist_forward_forward", "mnist_forward_forward/main.py", ["--epochs", "1", "--no_accel"]),
    ("vae", "vae/main.py", ["--epochs", "1", "--no-accel"]),
    ("regression", "regression/main.py", []),
    ("dcgan", "dcgan/main.py", ["--dataset", "fake", "--niter", "1", "--batchSize", "16", "--ngf", "16",
                                "--ndf", "16", "--workers", "0"]),
    ("word_language_model", "word_language_model/main.py", ["--data", "data/text", "--epochs", "1", "--emsize",
                                                            "32", "--nhid", "32", "--bptt", "20"]),
    ("word_language_model_transformer", "word_language_model/main.py",
     ["--data", "data/text", "--epochs", "1", "--emsize", "32", "--nhid", "64", "--bptt", "20", "--model",
      "Transformer"]),
]


def main():
    failed = 0
    env = dict(os.environ, PORTS_TRAIN="256", PORTS_TEST="256")  # (vae assumes a full first test batch of 128)
    for name, prog, args in SCRIPTS:
        path = os.path.join(PROGRAMS, prog)
        if not os.path.exists(path):
            print(f"{name}: absent")
            continue
        r = subprocess.run([sys.executable, os.path.join(HERE, "run_port.py"), "ember", path] + args,
                           capture_output=True, text=True, env=env, timeout=900)
        last = (r.stdout.strip().splitlines() or [""])[-1]
        why = (r.stderr.strip().splitlines() or [""])[-1]
        print(f"{name}: {'runs unchanged' if r.returncode == 0 else 'FAILS: ' + why} ({last[:100]})", flush=True)
        failed += r.returncode != 0
    r = subprocess.run([sys.executable, os.path.join(HERE, "check_models.py")], text=True, timeout=1800)
    return 1 if failed or r.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
