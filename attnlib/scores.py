"""Alignment score functions: how much each query position looks at each key (chapters 2 and 3).

All take query (..., L, E_q) and key (..., S, E_k) and return scores
(..., L, S); leading dimensions broadcast as in ``torch.matmul``. float16 and
bfloat16 inputs are computed in float32 and the scores cast back.
"""

from __future__ import annotations

import torch

from attnlib._doc import TORCH
from attnlib._tensors import check_floating_tensors, upcast
from attnlib._validate import check_additive, check_general, check_query_key, scale_or_default

__all__ = [
    "additive_scores",
    "cosine_scores",
    "dot_scores",
    "general_scores",
    "scaled_dot_scores",
]


def _check_query_key(fn: str, query: torch.Tensor, key: torch.Tensor) -> None:
    """query (..., L, E) and key (..., S, E): floating tensors of one dtype, batch dimensions broadcasting."""
    check_floating_tensors(fn, query=query, key=key)
    check_query_key(fn, query.shape, key.shape)


@TORCH
def dot_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Dot-product scores ``q_i^T k_j`` (Luong "dot").

    {dot_scores}

    Examples
    --------
    >>> dot_scores(torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 4.0], [1.0, 0.0]]))
    tensor([[11.,  1.]])
    """
    _check_query_key("dot_scores", query, key)
    out = upcast(query) @ upcast(key).transpose(-2, -1)  # (..., L, E) @ (..., E, S) -> (..., L, S)
    return out.to(query.dtype)


@TORCH
def scaled_dot_scores(query: torch.Tensor, key: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Scaled dot-product scores ``(q_i^T k_j) * scale``, scale defaulting to ``1/sqrt(E)``.

    The ``1/sqrt(E)`` keeps the score variance near 1 for unit-variance inputs,
    so the softmax does not saturate as E grows.

    {scaled_dot_scores}

    Examples
    --------
    >>> scaled_dot_scores(torch.tensor([[1.0, 1.0, 1.0, 1.0]]), torch.ones(1, 4))
    tensor([[2.]])
    """
    fn = "scaled_dot_scores"
    _check_query_key(fn, query, key)
    scale = scale_or_default(fn, scale, query.shape[-1])
    out = (upcast(query) @ upcast(key).transpose(-2, -1)) * scale  # (..., L, S)
    return out.to(query.dtype)


@TORCH
def general_scores(query: torch.Tensor, key: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Bilinear (Luong "general") scores ``q_i^T W k_j``.

    {general_scores}

    Examples
    --------
    >>> general_scores(torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0]]), torch.tensor([[1.0], [1.0]]))
    tensor([[3.]])
    """
    fn = "general_scores"
    check_floating_tensors(fn, query=query, key=key, weight=weight)
    check_general(fn, query.shape, key.shape, weight.shape)
    projected = upcast(query) @ upcast(weight)  # (..., L, E_q) @ (E_q, E_k) -> (..., L, E_k)
    return (projected @ upcast(key).transpose(-2, -1)).to(query.dtype)  # (..., L, S)


@TORCH
def cosine_scores(query: torch.Tensor, key: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cosine similarity between every query and every key.

    Each vector is divided by ``max(||v||, eps)``, as ``F.cosine_similarity``
    does, so a zero vector scores 0 instead of NaN.

    {cosine_scores}

    Examples
    --------
    >>> cosine_scores(torch.tensor([[1.0, 0.0]]), torch.tensor([[2.0, 0.0], [0.0, 3.0], [0.0, 0.0]]))
    tensor([[1., 0., 0.]])
    """
    _check_query_key("cosine_scores", query, key)
    query, key, dtype = upcast(query), upcast(key), query.dtype
    q = query / query.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., L, E)
    k = key / key.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., S, E)
    return (q @ k.transpose(-2, -1)).to(dtype)  # (..., L, S)


@TORCH
def additive_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    v: torch.Tensor,
) -> torch.Tensor:
    """Additive (Bahdanau) scores ``v^T tanh(W_q q_i + W_k k_j)``.

    {additive_scores}

    Examples
    --------
    >>> q, k = torch.zeros(1, 2), torch.zeros(3, 2)
    >>> additive_scores(q, k, torch.ones(4, 2), torch.ones(4, 2), torch.ones(4))
    tensor([[0., 0., 0.]])
    """
    fn = "additive_scores"
    check_floating_tensors(fn, query=query, key=key, w_query=w_query, w_key=w_key, v=v)
    check_additive(fn, query.shape, key.shape, w_query.shape, w_key.shape, v.shape)
    return _additive_scores(query, key, w_query, w_key, v)


def _additive_scores(
    query: torch.Tensor, key: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """:func:`additive_scores` without the checks, for a caller that made them (``AdditiveAttention``)."""
    dtype = query.dtype
    q = upcast(query) @ upcast(w_query).T  # (..., L, H)
    k = upcast(key) @ upcast(w_key).T  # (..., S, H)
    # every query meets every key: (..., L, 1, H) + (..., 1, S, H) -> (..., L, S, H)
    hidden = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))
    return (hidden @ upcast(v)).to(dtype)  # (..., L, S)
