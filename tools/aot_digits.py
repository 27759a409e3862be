"""The digits CNN ahead of time: writes what the C programs in examples/ run.

    PYTHONPATH=python:build/python /usr/bin/python3 tools/aot_digits.py OUT [--epochs N]

1. Trains tools/train_digits.py's DigitNet eagerly, compiles its forward (eval
   mode, the whole test set as one batch) to OUT/digits_cnn.so with
   ember.aot.compile, and writes the test set to OUT/digits_test.bin;
   examples/digits_infer.c prints the same accuracy as Python does here.
2. Compiles a whole training step of a fresh DigitNet (forward with dropout and
   BatchNorm, backward, Adam) to OUT/digits_step.so, writes 100 batches to
   OUT/digits_train.bin, trains 100 steps on them in Python and writes the
   losses to OUT/digits_losses.txt; examples/digits_train.c runs the compiled
   step on the same batches, with the same random seed, and compares.

File formats (little-endian): digits_test.bin: int64 n, float32 images
[n,1,8,8], int64 labels [n]. digits_train.bin: int64 steps, batch, seed, then
float32 images [steps,batch,1,8,8], int64 labels [steps,batch].
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from train_digits import DigitNet, load_digits  # noqa: E402

SEED = 1234
STEPS, BATCH = 100, 32


def train(model, xtr, ytr, epochs):
    opt = ember.optim.Adam(model.parameters(), lr=3e-3)
    g = ember.Generator().manual_seed(0)
    loader = ember.utils.data.DataLoader(ember.utils.data.TensorDataset(xtr, ytr), batch_size=32,
                                         shuffle=True, generator=g)
    for _ in range(epochs):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()


def inference(out, xtr, ytr, xte, yte, epochs):
    ember.manual_seed(0)
    model = DigitNet()
    train(model, xtr, ytr, epochs)
    model.eval()
    path = ember.aot.compile(model, (xte,), os.path.join(out, "digits_cnn.so"))
    with ember.no_grad():
        correct = int((model(xte).argmax(1) == yte).sum())
    with open(os.path.join(out, "digits_test.bin"), "wb") as f:
        np.array([len(yte)], dtype=np.int64).tofile(f)
        xte.numpy().astype(np.float32).tofile(f)
        yte.numpy().astype(np.int64).tofile(f)
    print(f"Python: test accuracy {100 * correct / len(yte):.2f}% ({correct}/{len(yte)}); "
          f"compiled ahead of time to {path} ({os.path.getsize(path)} bytes)")


def batches(xtr, ytr):
    """STEPS + 1 batches of BATCH from seeded shuffles of the training set."""
    rng = np.random.default_rng(0)
    order = np.concatenate([rng.permutation(len(ytr)) for _ in range((STEPS + 1) * BATCH // len(ytr) + 1)])
    x, y = xtr.numpy(), ytr.numpy()
    return [(ember.tensor(x[order[i * BATCH:(i + 1) * BATCH]]), ember.tensor(y[order[i * BATCH:(i + 1) * BATCH]]))
            for i in range(STEPS + 1)]


def training(out, xtr, ytr):
    ember.manual_seed(0)
    model = DigitNet().train()
    opt = ember.optim.Adam(model.parameters(), lr=3e-3)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    data = batches(xtr, ytr)
    # (the first call makes Adam's moments and takes a step; the traced one is undone)
    path = ember.aot.compile(step, data[0], os.path.join(out, "digits_step.so"))
    ember.manual_seed(SEED)  # (digits_train.c gives the compiled step the same stream)
    losses = [step(x, y).item() for x, y in data[1:]]
    with open(os.path.join(out, "digits_train.bin"), "wb") as f:
        np.array([STEPS, BATCH, SEED], dtype=np.int64).tofile(f)
        for x, _ in data[1:]:
            x.numpy().astype(np.float32).tofile(f)
        for _, y in data[1:]:
            y.numpy().astype(np.int64).tofile(f)
    with open(os.path.join(out, "digits_losses.txt"), "w") as f:
        f.writelines(f"{v!r}\n" for v in losses)
    print(f"Python: {STEPS} training steps, loss {losses[0]:.5f} -> {losses[-1]:.5f}; the step compiled "
          f"ahead of time to {path} ({os.path.getsize(path)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--epochs", type=int, default=12)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    (xtr, ytr), (xte, yte) = load_digits()
    inference(args.out, xtr, ytr, xte, yte, args.epochs)
    training(args.out, xtr, ytr)


if __name__ == "__main__":
    main()
