"""ember's main job: train a small CNN on scikit-learn's 8x8 handwritten
digits (1,797 images that ship with Debian's python3-sklearn), eagerly, the
way a PyTorch user would write it: a Module, a DataLoader, Adam, a cosine
schedule, loss.backward(), opt.step(). Then save a checkpoint as PyTorch
users write one (model, optimizer and scheduler state, the epoch) in
PyTorch's own .pt format, which torch.load reads too, load it into a fresh
model and optimizer, and check it predicts the same.

    PYTHONPATH=python:build/python /usr/bin/python3 tools/train_digits.py [--epochs N]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.utils.data import DataLoader, TensorDataset


class DigitNet(nn.Module):
    """conv 3x3 (16) - pool - conv 3x3 (32) - pool - linear 64 - linear 10"""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))  # 16 x 4 x 4
        x = self.pool(F.relu(self.conv2(x)))             # 32 x 2 x 2
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def load_digits(seed=0, test_fraction=0.2):
    """Images scaled to [0, 1] as (N, 1, 8, 8) float32, labels int64, split
    into train and test by a seeded shuffle."""
    try:
        from sklearn.datasets import load_digits as sk_digits
    except ImportError:
        sys.exit("this demo needs scikit-learn's digits: apt-get install python3-sklearn")
    d = sk_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (ember.tensor(x[train]), ember.tensor(y[train])), (ember.tensor(x[test]), ember.tensor(y[test]))


def progress(epoch, epochs, done, total, text, width=30):
    """Redraws the epoch's line: a bar of the images seen so far, then text."""
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    sys.stdout.write(f"\r  epoch {epoch:2d}/{epochs} [{bar}] {text}")
    sys.stdout.flush()


@ember.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    for x, y in loader:
        out = model(x)
        loss_sum += float(F.cross_entropy(out, y, reduction="sum"))
        correct += int((out.argmax(1) == y).sum())
        total += len(y)
    return loss_sum / total, correct / total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    ember.manual_seed(0)
    (xtr, ytr), (xte, yte) = load_digits()
    print(f"ember {ember.__version__}, {ember.get_num_threads()} threads")
    print(f"digits: {len(ytr)} training and {len(yte)} test images of 8x8 pixels, 10 classes")
    g = ember.Generator().manual_seed(0)
    train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, shuffle=True,
                              generator=g)
    test_loader = DataLoader(TensorDataset(xte, yte), batch_size=256)

    model = DigitNet()
    print(model)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")
    opt = ember.optim.Adam(model.parameters(), lr=args.lr)
    sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)

    print(f"\ntraining eagerly for {args.epochs} epochs (Adam, cosine schedule, batch "
          f"{args.batch_size}); compiled training steps come with ember.compile's autograd "
          f"support")
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        seen, loss_sum = 0, 0.0
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(y)
            loss_sum += float(loss) * len(y)
            progress(epoch, args.epochs, seen, len(ytr), f"{seen:4d}/{len(ytr)} loss {loss_sum / seen:.4f}")
        sched.step()
        test_loss, acc = evaluate(model, test_loader)
        progress(epoch, args.epochs, seen, len(ytr),
                 f"train loss {loss_sum / seen:.4f}  test loss {test_loss:.4f}  test accuracy "
                 f"{acc * 100:5.1f}%  ({(time.perf_counter() - t0) * 1e3:.0f} ms)\n")
    print(f"trained in {time.perf_counter() - start:.1f} s")

    _, acc = evaluate(model, test_loader)
    path = os.path.join(tempfile.mkdtemp(prefix="ember-digits-"), "digits.pt")
    ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "epoch": args.epochs, "config": {"lr": args.lr, "batch_size": args.batch_size}}, path)
    checkpoint = ember.load(path)  # (a restricted unpickler: tensors and plain containers only)
    fresh = DigitNet()
    fresh.load_state_dict(checkpoint["model"])
    ember.optim.Adam(fresh.parameters(), lr=args.lr).load_state_dict(checkpoint["optimizer"])
    _, acc2 = evaluate(fresh, test_loader)
    print(f"\ncheckpoint: {path} ({os.path.getsize(path)} bytes, PyTorch's zip format: model, optimizer, "
          f"scheduler, epoch {checkpoint['epoch']}); reloaded model's test accuracy {acc2 * 100:.1f}% (the "
          f"trained model's: {acc * 100:.1f}%)")
    if acc < 0.95 or acc2 != acc:
        sys.exit(f"FAILED: test accuracy {acc * 100:.1f}% (want at least 95%, and the reloaded "
                 f"model to match)")


if __name__ == "__main__":
    main()
