"""Attention as a soft key-value lookup: score-agnostic attention and key-retrieval experiments.

Chapter 03 builds these. `attend` is the general Q/K/V recipe with the score
function left open (any (..., L, S) score matrix, additive scores included);
the NumPy helpers store keys, corrupt queries and measure how often a soft
lookup still lands on the right key.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib import numpy as anp
from attnlib._validate import as_shape
from attnlib.functional import masked_softmax

__all__ = [
    "SCORE_FUNCTIONS",
    "attend",
    "corrupt_queries",
    "permutation_keys",
    "retrieval_scores",
    "retrieval_trial",
]

SCORE_FUNCTIONS = ("dot", "scaled_dot", "cosine")


def attend(
    scores: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with the scores given: weights = softmax(scores), output = weights @ value.

    Whatever compared queries with keys (dot, scaled dot, bilinear, cosine,
    additive), the rest of attention is the same two lines.

    Args:
        scores: (..., L, S) floating.
        value: (..., S, Ev), same dtype.
        mask: None, or bool/float broadcastable to (..., L, S) (True = may attend).

    Returns:
        `(output, weights)`: output (..., L, Ev), weights (..., L, S).
    """
    fn = "attend"
    for name, t in (("scores", scores), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if scores.dim() < 2 or value.dim() < 2:
        raise ValueError(
            f"{fn}: scores (..., L, S) and value (..., S, Ev) need at least 2 dimensions, got "
            f"scores {as_shape(scores.shape)} and value {as_shape(value.shape)}"
        )
    if scores.shape[-1] != value.shape[-2]:
        raise ValueError(
            f"{fn}: scores {as_shape(scores.shape)} have S={scores.shape[-1]} keys but value "
            f"{as_shape(value.shape)} has S={value.shape[-2]} rows"
        )
    weights = masked_softmax(scores, mask, dim=-1)  # (..., L, S)
    output = weights @ value  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)
    return output, weights


def permutation_keys(num_pairs: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """A key store in the style of the synthetic retrieval tests: (num_pairs, dim) float64.

    Row 0 is `0, 1, ..., dim-1`; every other row is a fresh random permutation
    of it, so all keys have the same norm and differ only in their order.
    """
    if num_pairs < 1 or dim < 2:
        raise ValueError(f"permutation_keys: need num_pairs >= 1 and dim >= 2, got {num_pairs}, {dim}")
    base = np.arange(dim, dtype=np.float64)
    rows = [base] + [rng.permutation(base) for _ in range(num_pairs - 1)]
    return np.stack(rows)  # (N, dim)


def corrupt_queries(keys: np.ndarray, noise: float, swaps: int, rng: np.random.Generator) -> np.ndarray:
    """Noisy copies of `keys` (Q, dim): Gaussian noise then `swaps` random coordinate swaps.

    The noise's standard deviation is `noise` times the standard deviation of
    the key entries, so noise levels mean the same for every store. Each swap
    exchanges two distinct coordinates of a query (chosen per query).
    """
    keys = np.asarray(keys, dtype=np.float64)
    if keys.ndim != 2:
        raise ValueError(f"corrupt_queries: keys must be (Q, dim), got shape {as_shape(keys.shape)}")
    if noise < 0 or swaps < 0:
        raise ValueError(f"corrupt_queries: noise and swaps must be >= 0, got {noise}, {swaps}")
    q = keys + noise * keys.std() * rng.standard_normal(keys.shape)  # (Q, dim)
    rows = np.arange(q.shape[0])
    for _ in range(swaps):
        pairs = np.argsort(rng.random(q.shape), axis=1)[:, :2]  # (Q, 2) distinct positions
        a, b = pairs[:, 0], pairs[:, 1]
        q[rows, a], q[rows, b] = q[rows, b].copy(), q[rows, a].copy()
    return q


def retrieval_scores(query: np.ndarray, keys: np.ndarray, score: str) -> np.ndarray:
    """Scores of queries (Q, dim) against keys (N, dim) -> (Q, N) with `score` in SCORE_FUNCTIONS."""
    if score == "dot":
        return anp.dot_scores(query, keys)
    if score == "scaled_dot":
        return anp.scaled_dot_scores(query, keys)
    if score == "cosine":
        return anp.cosine_scores(query, keys)
    raise ValueError(f"retrieval_scores: score must be one of {SCORE_FUNCTIONS}, got {score!r}")


def retrieval_trial(
    keys: np.ndarray,
    noise: float,
    swaps: int,
    score: str,
    num_queries: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Query a key store with corrupted keys; return (accuracy, mean weight on the right key).

    `num_queries` stored keys are drawn at random, corrupted with
    :func:`corrupt_queries` and scored against every key. The lookup is right
    when the largest weight sits on the key the query came from; the second
    number is how much of the softmax weight that key receives on average.
    """
    target = rng.integers(0, keys.shape[0], size=num_queries)  # (Q,)
    queries = corrupt_queries(keys[target], noise, swaps, rng)  # (Q, dim)
    weights = anp.softmax(retrieval_scores(queries, keys, score), dim=-1)  # (Q, N)
    rows = np.arange(num_queries)
    accuracy = float(np.mean(weights.argmax(axis=-1) == target))
    return accuracy, float(weights[rows, target].mean())
