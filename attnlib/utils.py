"""Small helpers shared by the chapters."""

from __future__ import annotations

import numbers
import random

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's generators so that a chapter reruns identically on a CPU.

    Parameters
    ----------
    seed : int
        In ``[0, 2**32)``, the range NumPy's legacy generator accepts.

    Returns
    -------
    None
        The three global generators are seeded as a side effect.

    Raises
    ------
    TypeError
        ``seed`` is not an integer.
    ValueError
        ``seed`` is negative or too large.

    Examples
    --------
    >>> import torch
    >>> seed_everything(0); a = torch.rand(1)
    >>> seed_everything(0); torch.equal(a, torch.rand(1))
    True
    """
    import torch

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed_everything: seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed_everything: seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - chapters and seeds use the legacy global generator
    torch.manual_seed(seed)
