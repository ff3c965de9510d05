"""Small helpers shared by the chapters."""

from __future__ import annotations

import random

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's generators so that a chapter reruns identically on a CPU."""
    import torch

    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - chapters and seeds use the legacy global generator
    torch.manual_seed(seed)
