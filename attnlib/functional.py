"""Numerically stable softmax family.

Every function subtracts the row maximum before `exp`, so logits of 1e4 never
overflow, and computes float16/bfloat16 inputs in float32 (casting the result
back), because half precision cannot even hold `exp(11)`.

Policy for a row whose entries are all `-inf` (a fully masked query row): its
softmax weights are all zero, never NaN; `logsumexp` of it is `-inf` and its
`log_softmax` is `-inf` everywhere. Gradients stay finite in both cases.
"""

from __future__ import annotations

import torch

from attnlib._validate import as_shape, check_mask

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _check_float(fn: str, x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: expected a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{fn}: x must be a floating point tensor, got dtype {x.dtype}")


def _upcast(x: torch.Tensor) -> torch.Tensor:
    """Half and bfloat16 are computed in float32; other floats as they are."""
    return x.float() if x.dtype in _LOW_PRECISION else x


def _shifted_exp(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return `(max, exp(x - max), sum)` along `dim`, all keeping `dim`.

    The max is detached: softmax is shift invariant, so the shift carries no
    gradient, and an all `-inf` row gets the shift 0 instead of `-inf`, which
    would turn `x - max` into `-inf - (-inf) = NaN`.
    """
    m = x.detach().amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    return m, e, e.sum(dim=dim, keepdim=True)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of `x` along `dim`.

    Args:
        x: floating tensor of any shape; `-inf` entries are allowed.
        dim: the dimension that sums to one.

    Returns:
        Tensor of the shape and dtype of `x`. Slices along `dim` sum to 1, except
        slices that are entirely `-inf`, which are all zeros.
    """
    _check_float("softmax", x)
    xf = _upcast(x)
    _, e, s = _shifted_exp(xf, dim)
    # an all -inf slice has s == 0 and e == 0; dividing by 1 keeps it at zero
    out = e / torch.where(s > 0, s, torch.ones_like(s))
    return out.to(x.dtype)


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Log of `softmax(x, dim)`, computed without forming the softmax.

    Returns:
        Tensor of the shape and dtype of `x`; an all `-inf` slice gives `-inf`
        everywhere (the log of its all-zero weights) rather than NaN.
    """
    _check_float("log_softmax", x)
    xf = _upcast(x)
    m, _, s = _shifted_exp(xf, dim)
    out = xf - m - torch.log(torch.where(s > 0, s, torch.ones_like(s)))
    return out.to(x.dtype)


def logsumexp(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """`log(sum(exp(x), dim))` without overflow.

    Returns:
        `x` reduced along `dim` (kept with size 1 if `keepdim`), dtype of `x`;
        `-inf` for an all `-inf` slice.
    """
    _check_float("logsumexp", x)
    xf = _upcast(x)
    m, _, s = _shifted_exp(xf, dim)
    positive = s > 0
    # log of a guarded sum keeps the gradient finite; the -inf is put back after
    out = m + torch.log(torch.where(positive, s, torch.ones_like(s)))
    out = out.masked_fill(~positive, float("-inf"))
    if not keepdim:
        out = out.squeeze(dim)
    return out.to(x.dtype)


def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """Softmax of `scores` along `dim`, ignoring masked-out entries.

    Args:
        scores: floating tensor, typically (..., L, S).
        mask: None, a bool tensor broadcastable to `scores` (True = may attend),
            or a float tensor broadcastable to `scores` that is added to it.
        dim: the dimension that sums to one.

    Returns:
        Weights of the shape and dtype of `scores`. Masked entries are exactly
        0; a slice with every entry masked is all zeros (no NaN).
    """
    _check_float("masked_softmax", scores)
    if mask is None:
        return softmax(scores, dim)
    check_mask("masked_softmax", "mask", as_shape(mask.shape), as_shape(scores.shape))
    if mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask.is_floating_point():
        scores = scores + mask.to(scores.dtype)
    else:
        raise TypeError(f"masked_softmax: mask must be bool or floating, got dtype {mask.dtype}")
    return softmax(scores, dim)
