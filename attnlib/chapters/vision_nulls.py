"""Chapter 11's nulls: what a measurement gives with nothing learned.

Not imported by the modules whose code the records hash (``vit.py``,
``vit_controls.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlib.chapters import vit


def random_table_gaps(
    draws: int = 2000, n_patches: int = 16, d_model: int = 32, seed: int = 0
) -> torch.Tensor:
    """Neighbour-similarity gaps (``draws``,) of untrained position tables.

    Each draw is a table (``n_patches``, ``d_model``) of independent normal
    entries (the cosine similarity does not depend on their scale); the gap is
    :func:`vit.neighbour_similarity`'s grid neighbours' mean minus the other
    pairs', as for a trained ViT. Fixed generator: the same gaps every time.
    """
    g = torch.Generator().manual_seed(seed)
    gaps = torch.empty(draws)
    for i in range(draws):
        pos = F.normalize(torch.randn(n_patches, d_model, generator=g), dim=-1)
        near, far = vit.neighbour_similarity(pos @ pos.T)
        gaps[i] = near - far
    return gaps
