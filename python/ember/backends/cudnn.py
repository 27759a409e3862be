"""torch.backends.cudnn's flags: set and read as in PyTorch; ember has no
cuDNN (is_available() is False), so they change nothing."""

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None


def is_acceptable(tensor):
    return False


class flags:
    """with ember.backends.cudnn.flags(enabled=..., benchmark=..., ...): the
    flags set for the block, then put back."""

    def __init__(self, enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
        self._new = dict(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
                         deterministic=deterministic, allow_tf32=allow_tf32)

    def __enter__(self):
        g = globals()
        self._old = {k: g[k] for k in self._new}
        g.update(self._new)
        return self

    def __exit__(self, *exc):
        globals().update(self._old)
        return False
