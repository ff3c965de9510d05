"""Scaled dot-product attention, written out so every step can be read."""

from __future__ import annotations

import math

import torch

from attnlib._validate import as_shape, check_attention, check_floating
from attnlib.functional import _LOW_PRECISION, softmax
from attnlib.masks import causal_mask

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scale + mask) v, with the semantics of
    `torch.nn.functional.scaled_dot_product_attention` (no dropout).

    Args:
        query: (..., L, E).
        key: (..., S, E).
        value: (..., S, Ev). Leading dimensions of the three broadcast.
        attn_mask: None, bool broadcastable to (..., L, S) with True = may
            attend, or float broadcastable to (..., L, S) added to the scores.
        is_causal: also forbid key j > query i (top-left aligned when L != S,
            as torch does); combined with `attn_mask` when both are given.
        scale: multiplier of the scores; None means 1/sqrt(E).
        return_weights: also return the attention weights.

    Returns:
        output (..., L, Ev), and with `return_weights` the tuple
        `(output, weights)` with weights (..., L, S). A query row that may
        attend to nothing gets zero weights and a zero output.

    Raises:
        TypeError: non-floating inputs.
        ValueError: dtype mismatch, rank < 2, E or S mismatch, batch dimensions
            that do not broadcast, a mask that does not broadcast to (..., L, S).
    """
    fn = "scaled_dot_product_attention"
    tensors = {"query": query, "key": key, "value": value}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    check_floating(fn, [(n, str(t.dtype), t.is_floating_point()) for n, t in tensors.items()])
    mask_shape = None if attn_mask is None else as_shape(attn_mask.shape)
    _, L, S = check_attention(fn, query.shape, key.shape, value.shape, mask_shape)
    if attn_mask is not None and not (
        attn_mask.dtype == torch.bool or attn_mask.is_floating_point()
    ):
        raise TypeError(f"{fn}: attn_mask must be bool or floating, got dtype {attn_mask.dtype}")

    out_dtype = query.dtype
    if out_dtype in _LOW_PRECISION:
        # half precision overflows in q k^T long before softmax sees it
        query, key, value = query.float(), key.float(), value.float()
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])

    scores = (query @ key.transpose(-2, -1)) * scale  # (..., L, E) @ (..., E, S) -> (..., L, S)
    if is_causal:
        scores = scores.masked_fill(~causal_mask(L, S, device=scores.device), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            # where (not masked_fill) so a mask with more batch dims than q k^T still broadcasts
            scores = torch.where(attn_mask, scores, float("-inf"))  # (..., L, S)
        else:
            scores = scores + attn_mask.to(scores.dtype)  # broadcasts to (..., L, S)
    weights = softmax(scores, dim=-1)  # (..., L, S); fully masked rows are zeros
    output = weights @ value  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)

    output = output.to(out_dtype)
    if return_weights:
        return output, weights.to(out_dtype)
    return output
