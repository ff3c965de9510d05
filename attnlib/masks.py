"""Boolean attention masks. Convention: True means *may attend*."""

from __future__ import annotations

import torch

from attnlib._validate import as_shape, broadcast_shapes, check_length, check_lengths

__all__ = ["as_additive_mask", "causal_mask", "combine_masks", "padding_mask"]


def padding_mask(lengths, max_len: int | None = None) -> torch.Tensor:
    """Mask of the real (non-padding) tokens of a right-padded batch.

    Args:
        lengths: (B,) integer tensor, or a sequence of ints, the true lengths.
        max_len: padded length; defaults to max(lengths).

    Returns:
        bool (B, max_len), True at positions j < lengths[b]. On the device of
        `lengths` when it is a tensor.

    Raises:
        ValueError: non-integer or negative lengths, lengths > max_len, or
            lengths that are not one-dimensional.
    """
    fn = "padding_mask"
    device = None
    if isinstance(lengths, torch.Tensor):
        device = lengths.device
        if lengths.dim() != 1:
            raise ValueError(f"{fn}: lengths must be 1-D (B,), got shape {as_shape(lengths.shape)}")
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
            raise ValueError(
                f"{fn}: lengths must be integers, got dtype {lengths.dtype}: {lengths.tolist()}"
            )
        values = lengths.tolist()
    else:
        values = list(lengths)
    ints, max_len = check_lengths(fn, values, max_len)
    lens = torch.tensor(ints, dtype=torch.long, device=device)  # (B,)
    positions = torch.arange(max_len, device=device)  # (max_len,)
    return positions[None, :] < lens[:, None]  # (B, max_len)


def causal_mask(
    q_len: int, k_len: int | None = None, diagonal: int = 0, device=None
) -> torch.Tensor:
    """Causal mask: query i may attend to key j when j <= i + diagonal.

    With the default `diagonal=0` and q_len != k_len the mask is aligned at the
    top left, exactly like `is_causal=True` in
    `torch.nn.functional.scaled_dot_product_attention`. For a KV cache, where
    the queries are the *last* q_len of k_len positions, pass
    `diagonal=k_len - q_len` (lower-right alignment).

    Args:
        q_len: L, number of queries.
        k_len: S, number of keys; defaults to q_len.
        diagonal: shift of the allowed band; negative values forbid the diagonal.
        device: where to create the mask.

    Returns:
        bool (q_len, k_len).
    """
    fn = "causal_mask"
    q_len = check_length(fn, "q_len", q_len)
    k_len = q_len if k_len is None else check_length(fn, "k_len", k_len)
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise ValueError(f"{fn}: diagonal must be an integer, got {diagonal!r}")
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)  # (L, S)
    return torch.tril(ones, diagonal=diagonal)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks with broadcasting; None entries are ignored.

    Returns:
        bool tensor of the broadcast shape, or None when every mask is None.
    """
    present = [m for m in masks if m is not None]
    for m in present:
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
            got = m.dtype if isinstance(m, torch.Tensor) else type(m).__name__
            raise TypeError(f"combine_masks: masks must be bool tensors, got {got}")
    if not present:
        return None
    broadcast_shapes(*(m.shape for m in present), what="combine_masks: masks of shapes")
    out = present[0]
    for m in present[1:]:
        out = out & m  # broadcasts to the common shape
    return out


def as_additive_mask(
    mask: torch.Tensor | None, dtype: torch.dtype = torch.float32
) -> torch.Tensor | None:
    """Turn a boolean mask into a float mask to add to scores: True -> 0, False -> -inf.

    A float mask is returned cast to `dtype`; None stays None.

    Returns:
        Tensor of the shape of `mask` and dtype `dtype`.
    """
    if mask is None:
        return None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"as_additive_mask: dtype must be a floating dtype, got {dtype}")
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return zeros.masked_fill(~mask, float("-inf"))
    if mask.is_floating_point():
        return mask.to(dtype)
    raise TypeError(f"as_additive_mask: mask must be bool or floating, got dtype {mask.dtype}")
