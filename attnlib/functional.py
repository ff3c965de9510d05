"""Numerically stable softmax family (chapter 4 builds it; chapter 5 adds masks).

Every function subtracts the row maximum before ``exp``, so logits of 1e4 never
overflow, and computes float16/bfloat16 inputs in float32 (casting the result
back), because half precision cannot even hold ``exp(12)``.

Policy for a row whose entries are all ``-inf`` (a fully masked query row): its
softmax weights are all zero, never NaN; ``logsumexp`` of it is ``-inf`` and its
``log_softmax`` is ``-inf`` everywhere. Gradients stay finite in both cases.
(``torch.softmax`` returns NaN there: see the page "attnlib and PyTorch".)
Everything else follows torch: a NaN anywhere in a row makes the whole softmax
row NaN and its ``logsumexp`` NaN; a ``+inf`` entry makes the softmax row NaN and
the ``logsumexp`` ``+inf``. An empty row (size 0 along ``dim``) gives an empty
softmax and a ``logsumexp`` of ``-inf`` (the log of an empty sum).
"""

from __future__ import annotations

import torch

from attnlib._doc import TORCH
from attnlib._tensors import check_tensors, upcast
from attnlib._validate import as_shape, check_dim, check_keepdim, check_mask, kept_shape
from attnlib.masks import check_mask_tensor

__all__ = ["log_softmax", "logsumexp", "masked_softmax", "softmax"]


def _check_float(fn: str, name: str, x: object) -> None:
    check_tensors(fn, **{name: x})
    if not x.is_floating_point():
        raise TypeError(f"{fn}: {name} must be a floating point tensor, got dtype {x.dtype}")


def _check_x_dim(fn: str, x: object, dim: object) -> int:
    """``x`` must be a floating tensor and ``dim`` one of its dimensions; return ``dim`` >= 0."""
    _check_float(fn, "x", x)
    return check_dim(fn, dim, x.dim())


def _empty_along(x: torch.Tensor, dim: int) -> bool:
    """True when the slices along ``dim`` hold no entries (a 0-d tensor is one entry)."""
    return x.dim() > 0 and x.shape[dim] == 0


def _shifted_exp(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(max, exp(x - max), sum)`` along a non-empty ``dim``, all keeping ``dim``.

    The max is detached: softmax is shift invariant, so the shift carries no
    gradient. An all ``-inf`` row gets the shift 0 instead of ``-inf``, which
    would turn ``x - max`` into ``-inf - (-inf) = NaN``. A NaN or ``+inf``
    maximum is kept, so that the row becomes NaN exactly as in torch.
    """
    m = x.detach().amax(dim=dim, keepdim=True)
    m = m.masked_fill(m == float("-inf"), 0.0)
    e = torch.exp(x - m)
    return m, e, e.sum(dim=dim, keepdim=True)


def _nonzero(s: torch.Tensor) -> torch.Tensor:
    """``s`` with zeros replaced by 1 (NaN stays NaN, so it propagates)."""
    return s.masked_fill(s == 0, 1.0)


@TORCH
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of ``x`` along ``dim``.

    Parameters
    ----------
    x : torch.Tensor
        Floating tensor of any shape (float16, bfloat16, float32, float64);
        ``-inf`` entries are allowed and get weight 0.
    dim : int
        The dimension that sums to one.

    Returns
    -------
    torch.Tensor
        Shape and dtype of ``x``. Slices along ``dim`` sum to 1, except slices
        that are entirely ``-inf``, which are all zeros. A slice holding NaN or
        ``+inf`` is all NaN, as in ``torch.softmax``.

    Raises
    ------
    {x_dim_errors}

    Examples
    --------
    >>> softmax(torch.tensor([0.0, 0.0, float("-inf")]))
    tensor([0.5000, 0.5000, 0.0000])
    >>> softmax(torch.tensor([float("-inf"), float("-inf")]))  # fully masked: zeros
    tensor([0., 0.])
    """
    return _softmax(x, _check_x_dim("softmax", x, dim))


def _softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """:func:`softmax` of a floating ``x`` along a valid ``dim``, without the checks."""
    if _empty_along(x, dim):
        return x.clone()
    _, e, s = _shifted_exp(upcast(x), dim)
    # an all -inf slice has s == 0 and e == 0; dividing by 1 keeps it at zero
    out = e / _nonzero(s)
    return out.to(x.dtype)


@TORCH
def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Log of ``softmax(x, dim)``, computed without forming the softmax.

    Parameters
    ----------
    x : torch.Tensor
        Floating tensor of any shape.
    dim : int
        The dimension over which the probabilities sum to one.

    Returns
    -------
    torch.Tensor
        Shape and dtype of ``x``; an all ``-inf`` slice gives ``-inf``
        everywhere (the log of its all-zero weights) rather than NaN; a slice
        holding NaN or ``+inf`` is all NaN, as in torch.

    Raises
    ------
    {x_dim_errors}

    Examples
    --------
    >>> log_softmax(torch.tensor([0.0, 0.0]))
    tensor([-0.6931, -0.6931])
    """
    dim = _check_x_dim("log_softmax", x, dim)
    if _empty_along(x, dim):
        return x.clone()
    xf = upcast(x)
    m, _, s = _shifted_exp(xf, dim)
    out = xf - m - torch.log(_nonzero(s))
    return out.to(x.dtype)


def logsumexp(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """``log(sum(exp(x), dim))`` without overflow.

    Parameters
    ----------
    x : torch.Tensor
        Floating tensor of any shape.
    dim : int
        The dimension to reduce.
    keepdim : bool
        Keep ``dim`` with size 1.

    Returns
    -------
    torch.Tensor
        ``x`` reduced along ``dim``, dtype of ``x``: ``-inf`` for an all ``-inf``
        or empty slice, NaN for a slice holding NaN, ``+inf`` for a slice
        holding ``+inf`` (all as ``torch.logsumexp``).

    Raises
    ------
    TypeError
        ``x`` is not a floating tensor, ``dim`` is not an int or ``keepdim`` not a bool.
    ValueError
        ``dim`` is out of range.

    Examples
    --------
    >>> logsumexp(torch.tensor([100.0, 100.0]))  # exp(100) overflows float32; this does not
    tensor(100.6931)
    >>> logsumexp(torch.tensor([float("nan"), 1.0]))
    tensor(nan)
    """
    fn = "logsumexp"
    dim = _check_x_dim(fn, x, dim)
    check_keepdim(fn, keepdim)
    xf = upcast(x)
    if _empty_along(x, dim):  # the log of an empty sum
        out = torch.full(kept_shape(x.shape, dim), float("-inf"), dtype=xf.dtype, device=x.device)
    else:
        m = xf.detach().amax(dim=dim, keepdim=True)
        # torch's choice: any infinite maximum is shifted by 0, so +inf stays +inf
        m = m.masked_fill(m.isinf(), 0.0)
        s = torch.exp(xf - m).sum(dim=dim, keepdim=True)
        # log of a guarded sum keeps the gradient finite; the -inf is put back after
        out = (m + torch.log(_nonzero(s))).masked_fill(s == 0, float("-inf"))
    if not keepdim and x.dim() > 0:
        out = out.squeeze(dim)
    return out.to(x.dtype)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim``, ignoring masked-out entries.

    Parameters
    ----------
    scores : torch.Tensor
        Floating tensor, typically (..., L, S).
    mask : torch.Tensor, optional
        bool tensor broadcastable to ``scores`` (True = may attend), or a
        float tensor broadcastable to ``scores`` that is added to it.
    dim : int
        The dimension that sums to one.

    Returns
    -------
    torch.Tensor
        Weights of the shape and dtype of ``scores``. Masked entries are
        exactly 0; a slice with every entry masked is all zeros (no NaN).

    Raises
    ------
    TypeError
        ``scores`` is not a floating tensor, or ``mask`` is not a bool or
        floating tensor (e.g. a Python list).
    ValueError
        ``mask`` does not broadcast to ``scores`` or ``dim`` is out of range.

    Examples
    --------
    >>> scores = torch.tensor([[1.0, 2.0, 3.0]])
    >>> masked_softmax(scores, torch.tensor([True, True, False]))
    tensor([[0.2689, 0.7311, 0.0000]])
    """
    fn = "masked_softmax"
    _check_float(fn, "scores", scores)
    dim = check_dim(fn, dim, scores.dim())
    if mask is not None:
        check_mask_tensor(fn, "mask", mask)
        check_mask(fn, "mask", as_shape(mask.shape), as_shape(scores.shape))
    return _masked_softmax(scores, mask, dim)


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, dim: int) -> torch.Tensor:
    """:func:`masked_softmax` without the checks, for a caller that made them (a module checks
    its inputs once per call, not once per function it calls: chapter 02's decoder calls
    ``AdditiveAttention`` at every step of every training batch)."""
    if mask is None:
        return _softmax(scores, dim)
    if mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    else:
        scores = scores + mask.to(scores.dtype)
    return _softmax(scores, dim)
