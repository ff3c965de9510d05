"""Scaffolding that the answer banks share: the mistake-free parts of answers (a transpose,
a stable softmax, a source mask) that several banks, ``banks/`` and ``banks_independent/``
alike, would otherwise each write again.

Nothing here decides whether an answer is right or wrong: a helper whose arguments choose a
mistake (rescale or not, which maximum, which scale) stays in its own bank, and so does any
helper that a right answer of the independent banks is built on, so that the independent
author's answers stay their own (tests/checks/independent_banks.py).
"""

from __future__ import annotations

import numpy as np
import torch


def swap_last(a: np.ndarray) -> np.ndarray:
    """The transpose of the last two axes, batch axes kept: ``(..., M, N) -> (..., N, M)``."""
    return np.swapaxes(a, -1, -2)


def shifted_softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """A softmax of ``scores`` along ``axis`` that cannot overflow (each slice's maximum is
    subtracted first); the result has the shape of ``scores``. Which axis is the caller's choice,
    and a wrong one the caller's mistake."""
    with np.errstate(all="ignore"):  # fully masked (-inf) slices give NaN, as they would anyway
        e = np.exp(scores - scores.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def source_key_mask(src_lengths: torch.Tensor, src_len: int) -> torch.Tensor:
    """``src_lengths`` of shape ``(B,)`` -> a bool mask ``(B, 1, 1, src_len)``, True where a
    source position is a real token (its index is below the sentence's length)."""
    return (torch.arange(src_len)[None, :] < src_lengths[:, None])[:, None, None, :]
