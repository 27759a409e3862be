"""The import shim that points a PyTorch program's `torch` at ember, and a
stand-in for the parts of torchvision the corpus's programs use (datasets
they would download, transforms, save_image), so that each program's own
code runs unchanged.

    import shim
    shim.use_ember()        # `import torch` / `torch.nn` ... now give ember's modules
    shim.install_torchvision()

The torch alias is a meta-path finder: `torch.X` is the module `ember.X`
itself (one module object under two names), so classes keep one identity
(isinstance(m, torch.nn.Module) is ember's test) and nothing is loaded
twice. The torchvision stand-in is test scaffolding, not part of ember: its
datasets are synthetic, deterministic and small (labels drawn into the
images, so a model can learn them), built with whichever `torch` is active.
"""

import importlib
import importlib.abc
import importlib.util
import os
import sys
import types

import numpy as np


class _TorchAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("ember" + spec.name[len("torch"):])

    def exec_module(self, module):
        pass


def use_ember():
    """Makes `import torch` (and every torch.X) import ember's modules."""
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _TorchAlias())


# ---------------------------------------------------------------- torchvision stand-in

SIZES = {"train": int(os.environ.get("PORTS_TRAIN", "640")), "test": int(os.environ.get("PORTS_TEST", "200"))}


def _images(n, shape, classes, seed):
    """n uint8 images of shape (H, W) or (H, W, C) with labels: each class a
    bright bar at its own place, plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    imgs = rng.integers(0, 60, (n,) + shape).astype(np.uint8)
    h = shape[0]
    for i, c in enumerate(labels):
        r = int(c) * h // classes
        imgs[i, r:r + max(1, h // classes)] = 230
    return imgs, labels


class _SyntheticDataset:
    shape, classes = (28, 28), 10

    def __init__(self, root=None, train=True, download=False, transform=None, target_transform=None, **kwargs):
        self.transform, self.target_transform = transform, target_transform
        n = SIZES["train" if train else "test"]
        self.data, self.targets = _images(n, self.shape, self.classes, seed=1 if train else 2)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        img, target = self.data[i], int(self.targets[i])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class MNIST(_SyntheticDataset):
    pass


class FashionMNIST(_SyntheticDataset):
    pass


class CIFAR10(_SyntheticDataset):
    shape = (32, 32, 3)


class FakeData(_SyntheticDataset):
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, **kwargs):
        self.transform, self.target_transform = transform, None
        c, h, w = image_size
        self.data, self.targets = _images(size, (h, w, c), num_classes, seed=3)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    def __call__(self, img):
        import torch
        a = np.asarray(img, dtype=np.float32) / 255.0
        a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
        return torch.tensor(np.ascontiguousarray(a))


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, t):
        import torch
        mean = torch.tensor(self.mean, dtype=t.dtype).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=t.dtype).view(-1, 1, 1)
        return (t - mean) / std


class Lambda:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


def save_image(tensor, fp, nrow=8, **kwargs):
    """Checks what would be drawn (finite numbers) and writes its values as
    raw float32 bytes where the image would go (no PNG encoder here)."""
    a = np.asarray(tensor.detach().cpu().numpy(), dtype=np.float32)
    if not np.isfinite(a).all():
        raise ValueError(f"save_image: non-finite values in the image for {fp}")
    with open(fp, "wb") as f:  # (a missing folder fails here, as with PIL)
        f.write(a.tobytes())


def install_torchvision():
    tv = types.ModuleType("torchvision")
    datasets = types.ModuleType("torchvision.datasets")
    transforms = types.ModuleType("torchvision.transforms")
    utils = types.ModuleType("torchvision.utils")
    for cls in (MNIST, FashionMNIST, CIFAR10, FakeData):
        setattr(datasets, cls.__name__, cls)
    for cls in (Compose, ToTensor, Normalize, Lambda):
        setattr(transforms, cls.__name__, cls)
    utils.save_image = save_image
    tv.datasets, tv.transforms, tv.utils = datasets, transforms, utils
    sys.modules.update({"torchvision": tv, "torchvision.datasets": datasets,
                        "torchvision.transforms": transforms, "torchvision.utils": utils})
