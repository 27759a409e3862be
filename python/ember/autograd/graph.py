"""Hook handles (PyTorch's torch.utils.hooks.RemovableHandle)."""


class RemovableHandle:
    """A registered hook; remove() turns it off. The engine keeps an inert
    entry until the tensor or node it hangs on goes."""

    def __init__(self, hook):
        self._hook = hook

    def __call__(self, grad):
        return None if self._hook is None else self._hook(grad)

    def remove(self):
        self._hook = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
