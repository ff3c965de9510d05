"""Attention as a soft key-value lookup: `attend`, and key-retrieval tests.

Chapter 03 builds these. `attend` is the general Q/K/V recipe with the score
function left open (any (..., L, S) score matrix, additive scores included);
the NumPy helpers store keys, corrupt queries and measure how often a soft
lookup still lands on the right key. Chapter 03 displays the source of the
retrieval helpers, so their lines stay within the page's 80 characters.
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
    scores: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with the scores given: softmax(scores), then weights @ value.

    Whatever compared queries with keys (dot, scaled dot, bilinear, cosine,
    additive), the rest of attention is the same two lines.

    Parameters
    ----------
    scores : (..., L, S) floating tensor.
    value : (..., S, d_v) tensor of the same dtype.
    mask : None, or bool/float broadcastable to (..., L, S) (True = may attend).

    Returns
    -------
    (output, weights): output (..., L, d_v), weights (..., L, S).
    """
    fn = "attend"
    for name, t in (("scores", scores), ("value", value)):
        if not isinstance(t, torch.Tensor):
            got = type(t).__name__
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {got}")
    if scores.dim() < 2 or value.dim() < 2:
        raise ValueError(
            f"{fn}: scores (..., L, S) and value (..., S, d_v) need at least 2 "
            f"dimensions, got scores {as_shape(scores.shape)} and value "
            f"{as_shape(value.shape)}"
        )
    if scores.shape[-1] != value.shape[-2]:
        raise ValueError(
            f"{fn}: scores {as_shape(scores.shape)} have S={scores.shape[-1]}"
            f" keys but value {as_shape(value.shape)} has"
            f" S={value.shape[-2]} rows"
        )
    weights = masked_softmax(scores, mask, dim=-1)  # (..., L, S)
    output = weights @ value  # (..., L, S) @ (..., S, d_v) -> (..., L, d_v)
    return output, weights


def permutation_keys(
    num_pairs: int,
    dim: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """A store of permutation keys: (num_pairs, dim) float64.

    Row 0 is `0, 1, ..., dim-1`; every other row is a fresh random
    permutation of it, so all keys have the same norm and differ only in
    their order.
    """
    if num_pairs < 1 or dim < 2:
        need = "need num_pairs >= 1 and dim >= 2"
        raise ValueError(f"permutation_keys: {need}, got {num_pairs}, {dim}")
    base = np.arange(dim, dtype=np.float64)
    rows = [base] + [rng.permutation(base) for _ in range(num_pairs - 1)]
    return np.stack(rows)  # (S, dim)


def corrupt_queries(
    keys: np.ndarray,
    noise: float,
    swaps: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Noisy copies of `keys` (Q, dim): Gaussian noise, then `swaps` swaps.

    The noise's standard deviation is `noise` times the standard deviation
    of the key entries, so noise levels mean the same for every store. Each
    swap exchanges two distinct coordinates of a query (chosen per query).
    """
    keys = np.asarray(keys, dtype=np.float64)
    if keys.ndim != 2:
        shape = as_shape(keys.shape)
        msg = f"corrupt_queries: keys must be (Q, dim), got shape {shape}"
        raise ValueError(msg)
    if noise < 0 or swaps < 0:
        msg = "corrupt_queries: noise and swaps must be >= 0"
        raise ValueError(f"{msg}, got {noise}, {swaps}")
    gauss = rng.standard_normal(keys.shape)  # (Q, dim)
    q = keys + noise * keys.std() * gauss  # (Q, dim)
    rows = np.arange(q.shape[0])
    for _ in range(swaps):
        # two distinct random positions per query: (Q, 2)
        pairs = np.argsort(rng.random(q.shape), axis=1)[:, :2]
        a, b = pairs[:, 0], pairs[:, 1]
        q[rows, a], q[rows, b] = q[rows, b].copy(), q[rows, a].copy()
    return q


def retrieval_scores(
    query: np.ndarray,
    keys: np.ndarray,
    score: str,
) -> np.ndarray:
    """Scores of queries (Q, dim) against keys (S, dim) -> (Q, S).

    `score` is one of SCORE_FUNCTIONS.
    """
    if score == "dot":
        return anp.dot_scores(query, keys)
    if score == "scaled_dot":
        return anp.scaled_dot_scores(query, keys)
    if score == "cosine":
        return anp.cosine_scores(query, keys)
    msg = f"retrieval_scores: score must be one of {SCORE_FUNCTIONS}"
    raise ValueError(f"{msg}, got {score!r}")


def retrieval_trial(
    keys: np.ndarray,
    noise: float,
    swaps: int,
    score: str,
    num_queries: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Query a key store with corrupted keys: (accuracy, mean right weight).

    `num_queries` stored keys are drawn at random, corrupted with
    `corrupt_queries` and scored against every key. The lookup is right
    when the largest weight sits on the key the query came from; the second
    number is how much of the softmax weight that key receives on average.
    """
    target = rng.integers(0, keys.shape[0], size=num_queries)  # (Q,)
    queries = corrupt_queries(keys[target], noise, swaps, rng)  # (Q, dim)
    scores = retrieval_scores(queries, keys, score)  # (Q, S)
    weights = anp.softmax(scores, dim=-1)  # (Q, S)
    rows = np.arange(num_queries)
    accuracy = float(np.mean(weights.argmax(axis=-1) == target))
    return accuracy, float(weights[rows, target].mean())


# --------------------------------------------------------------------------
# Chapter 03's retrieval sweeps, as one experiment per seed (its spread over
# seeds is recorded by attnlib.chapters.spread in spreads/ch03.json).

NOISE_LEVELS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
STORE_SIZES = (8, 64, 512)
SWAP_COUNTS = (0, 1, 2, 4, 8, 16)
SWAP_DIMS = (8, 16, 64)
NORM_NOISE = (0.0, 0.5, 1.0)


def _rng(seed: int, *keys: int) -> np.random.Generator:
    """A generator for one part of the sweep, seeded by (seed, *keys)."""
    return np.random.default_rng((seed, *keys))


def experiment(seed: int = 0, dim: int = 16, num_queries: int = 400) -> dict:
    """Chapter 03's retrieval sweeps for one seed: a dict of numbers/lists.

    Keys (lists follow NOISE_LEVELS, SWAP_COUNTS or NORM_NOISE):

    * ``acc_{score}_{S}``, ``weight_{score}_{S}``: accuracy and mean weight
      on the right key against query noise, permutation keys of size
      `dim`, S in STORE_SIZES, every score in SCORE_FUNCTIONS;
    * ``dot64_min``, ``dot64_max``: the dot scores between the 64 stored
      keys;
    * ``swaps_{d}``: accuracy against the number of swaps (no noise), 64
      keys of size d in SWAP_DIMS, scaled dot scores;
    * ``norm_{score}_{S}``: accuracy at NORM_NOISE for Gaussian keys whose
      norms are scaled by factors drawn from [0.25, 2].
    """
    out = {}
    for S in STORE_SIZES:
        store = permutation_keys(S, dim, _rng(seed, 1, S))
        for score in SCORE_FUNCTIONS:
            accs, weights = [], []
            for noise in NOISE_LEVELS:
                acc, w = retrieval_trial(store, noise, 0, score, num_queries, _rng(seed, 2, S))
                accs.append(acc)
                weights.append(w)
            out[f"acc_{score}_{S}"] = accs
            out[f"weight_{score}_{S}"] = weights
        if S == 64:
            dots = store @ store.T  # (64, 64)
            out["dot64_min"] = float(dots.min())
            out["dot64_max"] = float(dots.max())
    for d in SWAP_DIMS:
        store = permutation_keys(64, d, _rng(seed, 3, d))
        out[f"swaps_{d}"] = [
            retrieval_trial(store, 0.0, s, "scaled_dot", num_queries, _rng(seed, 4, d))[0]
            for s in SWAP_COUNTS
        ]
    for S in STORE_SIZES:
        gen = _rng(seed, 5, S)
        norms = gen.uniform(0.25, 2.0, size=(S, 1))  # (S, 1)
        store = gen.standard_normal((S, dim)) * norms  # (S, dim)
        for score in SCORE_FUNCTIONS:
            out[f"norm_{score}_{S}"] = [
                retrieval_trial(store, n, 0, score, num_queries, _rng(seed, 6, S))[0] for n in NORM_NOISE
            ]
    return out
