"""torch.backends.mkldnn (oneDNN): not used by ember; its flag is kept."""

enabled = True


def is_available():
    return False
