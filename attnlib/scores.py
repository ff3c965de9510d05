"""Alignment score functions: how much each query position looks at each key.

All take query (..., L, E_q) and key (..., S, E_k) and return scores
(..., L, S); leading dimensions broadcast as in `torch.matmul`.
"""

from __future__ import annotations

import math

import torch

from attnlib._validate import as_shape, broadcast_batch, check_floating, check_query_key

__all__ = [
    "additive_scores",
    "cosine_scores",
    "dot_scores",
    "general_scores",
    "scaled_dot_scores",
]


def _check_tensors(fn: str, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    check_floating(fn, [(n, str(t.dtype), t.is_floating_point()) for n, t in tensors.items()])


def dot_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot-product scores q_i . k_j (Luong "dot").

    Args:
        query: (..., L, E).
        key: (..., S, E).

    Returns:
        (..., L, S) scores.
    """
    _check_tensors("dot_scores", query=query, key=key)
    check_query_key("dot_scores", query.shape, key.shape)
    return query @ key.transpose(-2, -1)  # (..., L, E) @ (..., E, S) -> (..., L, S)


def scaled_dot_scores(
    query: torch.Tensor, key: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """Scaled dot-product scores (q_i . k_j) * scale, scale defaulting to 1/sqrt(E).

    The 1/sqrt(E) keeps the score variance near 1 for unit-variance inputs, so
    the softmax does not saturate as E grows.

    Args:
        query: (..., L, E).
        key: (..., S, E).
        scale: multiplier of the dot products; None means 1/sqrt(E).

    Returns:
        (..., L, S) scores.
    """
    _check_tensors("scaled_dot_scores", query=query, key=key)
    check_query_key("scaled_dot_scores", query.shape, key.shape)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return (query @ key.transpose(-2, -1)) * scale  # (..., L, S)


def general_scores(query: torch.Tensor, key: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Bilinear (Luong "general") scores q_i^T W k_j.

    Args:
        query: (..., L, E_q).
        key: (..., S, E_k).
        weight: (E_q, E_k).

    Returns:
        (..., L, S) scores.
    """
    fn = "general_scores"
    _check_tensors(fn, query=query, key=key, weight=weight)
    q_shape, k_shape, w_shape = as_shape(query.shape), as_shape(key.shape), as_shape(weight.shape)
    if query.dim() < 2 or key.dim() < 2:
        raise ValueError(f"{fn}: query {q_shape} and key {k_shape} need at least 2 dimensions")
    if w_shape != (q_shape[-1], k_shape[-1]):
        raise ValueError(
            f"{fn}: weight must have shape (E_q, E_k) = {(q_shape[-1], k_shape[-1])} for "
            f"query {q_shape} and key {k_shape}, got {w_shape}"
        )
    broadcast_batch(fn, query=q_shape, key=k_shape)
    projected = query @ weight  # (..., L, E_q) @ (E_q, E_k) -> (..., L, E_k)
    return projected @ key.transpose(-2, -1)  # (..., L, S)


def cosine_scores(query: torch.Tensor, key: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cosine similarity between every query and every key.

    Each vector is divided by max(||v||, eps), as `F.cosine_similarity` does, so
    a zero vector scores 0 instead of NaN.

    Args:
        query: (..., L, E).
        key: (..., S, E).
        eps: lower bound of the norms.

    Returns:
        (..., L, S) scores in [-1, 1].
    """
    _check_tensors("cosine_scores", query=query, key=key)
    check_query_key("cosine_scores", query.shape, key.shape)
    q = query / query.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., L, E)
    k = key / key.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., S, E)
    return q @ k.transpose(-2, -1)  # (..., L, S)


def additive_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    v: torch.Tensor,
) -> torch.Tensor:
    """Additive (Bahdanau) scores v^T tanh(W_q q_i + W_k k_j).

    Args:
        query: (..., L, E_q).
        key: (..., S, E_k).
        w_query: (H, E_q), the layout of `nn.Linear(E_q, H).weight`.
        w_key: (H, E_k).
        v: (H,).

    Returns:
        (..., L, S) scores.
    """
    fn = "additive_scores"
    _check_tensors(fn, query=query, key=key, w_query=w_query, w_key=w_key, v=v)
    q_shape, k_shape = as_shape(query.shape), as_shape(key.shape)
    if query.dim() < 2 or key.dim() < 2:
        raise ValueError(f"{fn}: query {q_shape} and key {k_shape} need at least 2 dimensions")
    if v.dim() != 1:
        raise ValueError(f"{fn}: v must have shape (H,), got {as_shape(v.shape)}")
    H = v.shape[0]
    expected = {"w_query": (H, q_shape[-1]), "w_key": (H, k_shape[-1])}
    for name, w in (("w_query", w_query), ("w_key", w_key)):
        if as_shape(w.shape) != expected[name]:
            raise ValueError(
                f"{fn}: {name} must have shape (H, E) = {expected[name]} for query {q_shape}, "
                f"key {k_shape} and v {as_shape(v.shape)}, got {as_shape(w.shape)}"
            )
    broadcast_batch(fn, query=q_shape, key=k_shape)
    q = query @ w_query.T  # (..., L, H)
    k = key @ w_key.T  # (..., S, H)
    # every query meets every key: (..., L, 1, H) + (..., 1, S, H) -> (..., L, S, H)
    hidden = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))
    return hidden @ v  # (..., L, S)
