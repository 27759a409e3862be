"""torch.backends.openmp: ember's CPU kernels run on their own thread pool
(ember.set_num_threads), not OpenMP."""


def is_available():
    return False
