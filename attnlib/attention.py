"""Scaled dot-product attention, written out so every step can be read (chapters 3 and 5)."""

from __future__ import annotations

import torch

from attnlib._doc import TORCH
from attnlib._tensors import check_floating_tensors, upcast
from attnlib._validate import as_shape, check_attention, check_flag, scale_or_default
from attnlib.functional import softmax
from attnlib.masks import causal_mask, check_mask_tensor

__all__ = ["scaled_dot_product_attention"]


@TORCH
def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T * scale + mask) v``, as ``torch.nn.functional.scaled_dot_product_attention``.

    There is no dropout. float16 and bfloat16 inputs are computed in float32
    and the result is cast back.

    Parameters
    ----------
    {query_key}
    value : torch.Tensor
        (..., S, Ev), the dtype of ``query``. Leading dimensions of the three broadcast.
    attn_mask : torch.Tensor, optional
        bool broadcastable to (..., L, S) with True = may attend, or float
        broadcastable to (..., L, S) added to the scores.
    is_causal : bool
        Also forbid key j > query i (top-left aligned when L != S, as torch
        does); combined with ``attn_mask`` when both are given (torch refuses
        the pair).
    scale : float, optional
        Multiplier of the scores; None means ``1/sqrt(E)`` (1 when E = 0).
    return_weights : bool
        Also return the attention weights.

    Returns
    -------
    torch.Tensor or tuple of torch.Tensor
        output (..., L, Ev), and with ``return_weights`` the tuple
        ``(output, weights)`` with weights (..., L, S), in the dtype of
        ``query``. A query row that may attend to nothing gets zero weights
        and a zero output; S = 0 gives a zero output, L = 0 an empty one.

    Raises
    ------
    TypeError
        Inputs that are not floating tensors or differ in dtype; a mask that
        is not a bool/float tensor; a non-bool ``is_causal``/``return_weights``.
    ValueError
        Rank < 2, E or S mismatch, batch dimensions that do not broadcast, a
        mask that does not broadcast to (..., L, S).

    Examples
    --------
    >>> q = torch.tensor([[1.0, 0.0]])              # (L=1, E=2)
    >>> k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # (S=2, E=2)
    >>> v = torch.tensor([[1.0], [3.0]])            # (S=2, Ev=1)
    >>> out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    >>> w
    tensor([[0.6698, 0.3302]])
    >>> out
    tensor([[1.6605]])
    >>> scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor([[False, False]]))
    tensor([[0.]])
    """
    fn = "scaled_dot_product_attention"
    check_floating_tensors(fn, query=query, key=key, value=value)
    if attn_mask is not None:
        check_mask_tensor(fn, "attn_mask", attn_mask)
    is_causal = check_flag(fn, "is_causal", is_causal)
    return_weights = check_flag(fn, "return_weights", return_weights)
    scale = scale_or_default(fn, scale, query.shape[-1])
    mask_shape = None if attn_mask is None else as_shape(attn_mask.shape)
    _, L, S = check_attention(fn, query.shape, key.shape, value.shape, mask_shape)

    out_dtype = query.dtype
    # half precision overflows in q k^T long before softmax sees it: computed in float32
    query, key, value = upcast(query), upcast(key), upcast(value)

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
