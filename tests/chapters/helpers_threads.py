"""torch's thread count set for a block and put back after: the checkpoint's tests train and measure
on the thread count its log records (a helper, not a test module)."""

from contextlib import contextmanager

import torch


@contextmanager
def threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
