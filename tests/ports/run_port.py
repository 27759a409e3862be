"""Runs one program of the corpus as its author runs it, with `torch` as
the real PyTorch or as ember (shim.py), in a scratch working directory:

    python run_port.py {torch|ember} PROGRAM.py [ARGS...]

The program's folder goes first on sys.path (for its own modules), the
torchvision stand-in is installed, and the program runs as __main__ with
sys.argv = [PROGRAM.py, ARGS...]. Exit status: the program's."""

import os
import runpy
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shim  # noqa: E402


def write_text_corpus(folder, words=400, lines=(300, 60, 60)):
    """train/valid/test.txt of sentences over a small vocabulary, with
    structure (each word predicts the next), for the language models."""
    import numpy as np
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(words)]
    os.makedirs(folder)
    for name, n in zip(("train", "valid", "test"), lines):
        with open(os.path.join(folder, name + ".txt"), "w") as f:
            for _ in range(n):
                w = int(rng.integers(words))
                sent = []
                for _ in range(int(rng.integers(5, 15))):
                    sent.append(vocab[w])
                    w = (w * 7 + int(rng.integers(3))) % words
                f.write(" " + " ".join(sent) + " \n")


def main():
    backend, program, args = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
    if backend == "ember":
        shim.use_ember()
    shim.install_torchvision()
    work = tempfile.mkdtemp(prefix="port-")
    os.makedirs(os.path.join(work, "results"))  # (where the VAE example writes its images)
    write_text_corpus(os.path.join(work, "data", "text"))
    os.chdir(work)
    sys.path.insert(0, os.path.dirname(program))
    sys.argv = [program] + args
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main()
