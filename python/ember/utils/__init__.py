"""ember.utils: helpers around the tensor library, named as in torch.utils
(ember.utils.data: Dataset, TensorDataset, DataLoader, random_split, ...)."""

from . import data  # noqa: F401
