"""Boolean attention masks. Convention: True means *may attend*.

The key-mask helpers :func:`expand_key_mask` and :func:`merge_key_mask` are the
one place where a per-key padding mask is checked and merged with an
``attn_mask``; :class:`attnlib.modules.MultiHeadAttention` and
``attnlib.efficient`` both use them.
"""

from __future__ import annotations

import torch

from attnlib._doc import TORCH
from attnlib._validate import as_shape, broadcast_shapes, check_causal, check_lengths, lengths_list

__all__ = [
    "as_additive_mask",
    "causal_mask",
    "check_mask_tensor",
    "combine_masks",
    "expand_key_mask",
    "merge_key_mask",
    "padding_mask",
]


def check_mask_tensor(fn: str, name: str, mask: object, allow_float: bool = True) -> None:
    """Refuse anything but a bool (or, if allowed, floating) ``torch.Tensor``.

    Parameters
    ----------
    fn : str
        Name of the calling function, put at the start of the message.
    name : str
        Name of the argument, e.g. ``"attn_mask"``.
    mask : object
        The value to check.
    allow_float : bool
        Also accept a floating point tensor (an additive mask).

    Returns
    -------
    None
        Returns quietly when ``mask`` is acceptable.

    Raises
    ------
    TypeError
        ``mask`` is not a tensor (a Python list, a NumPy array) or has another dtype.

    Examples
    --------
    >>> check_mask_tensor("f", "attn_mask", [[True]])
    Traceback (most recent call last):
    ...
    TypeError: f: attn_mask must be a torch.Tensor of dtype bool or floating, got list
    """
    kinds = "bool or floating" if allow_float else "bool"
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor of dtype {kinds}, got {type(mask).__name__}")
    if mask.dtype == torch.bool or (allow_float and mask.is_floating_point()):
        return
    raise TypeError(f"{fn}: {name} must be a torch.Tensor of dtype {kinds}, got dtype {mask.dtype}")


def padding_mask(lengths, max_len: int | None = None) -> torch.Tensor:
    """Mask of the real (non-padding) tokens of a right-padded batch.

    Parameters
    ----------
    lengths : torch.Tensor or sequence of int
        (B,) true lengths, an integer tensor or a list/tuple of ints.
    max_len : int, optional
        Padded length; defaults to ``max(lengths)`` (0 for an empty batch).

    Returns
    -------
    torch.Tensor
        bool (B, max_len), True at positions ``j < lengths[b]``; on the device
        of ``lengths`` when it is a tensor.

    Raises
    ------
    TypeError
        ``lengths`` is not a tensor or a sequence (e.g. a bare int).
    ValueError
        Non-integer or negative lengths, lengths > ``max_len``, or lengths that
        are not one-dimensional.

    Examples
    --------
    >>> padding_mask([2, 3])
    tensor([[ True,  True, False],
            [ True,  True,  True]])
    """
    fn = "padding_mask"
    values = lengths_list(fn, lengths, torch.Tensor, "tensor")
    device = None
    if isinstance(lengths, torch.Tensor):
        device = lengths.device
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
            raise ValueError(f"{fn}: lengths must be integers, got dtype {lengths.dtype}: {values}")
    ints, max_len = check_lengths(fn, values, max_len)
    lens = torch.tensor(ints, dtype=torch.long, device=device)  # (B,)
    positions = torch.arange(max_len, device=device)  # (max_len,)
    return positions[None, :] < lens[:, None]  # (B, max_len)


@TORCH
def causal_mask(q_len: int, k_len: int | None = None, diagonal: int = 0, device=None) -> torch.Tensor:
    """Causal mask: query i may attend to key j when ``j <= i + diagonal``.

    With the default ``diagonal=0`` and ``q_len != k_len`` the mask is aligned
    at the top left, exactly like ``is_causal=True`` in
    ``torch.nn.functional.scaled_dot_product_attention``. For a KV cache, where
    the queries are the *last* ``q_len`` of ``k_len`` positions, pass
    ``diagonal=k_len - q_len`` (lower-right alignment).

    Parameters
    ----------
    q_len : int
        L, number of queries (>= 0).
    k_len : int, optional
        S, number of keys (>= 0); defaults to ``q_len``.
    diagonal : int
        Shift of the allowed band; negative values forbid the diagonal.
    device : torch.device or str, optional
        Where to create the mask.

    Returns
    -------
    torch.Tensor
        bool (q_len, k_len).

    Raises
    ------
    {causal_errors}

    Examples
    --------
    >>> causal_mask(3)
    tensor([[ True, False, False],
            [ True,  True, False],
            [ True,  True,  True]])
    >>> causal_mask(2, 4, diagonal=2)  # the last 2 of 4 positions
    tensor([[ True,  True,  True, False],
            [ True,  True,  True,  True]])
    """
    q_len, k_len, diagonal = check_causal("causal_mask", q_len, k_len, diagonal)
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)  # (L, S)
    return torch.tril(ones, diagonal=diagonal)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks with broadcasting; None entries are ignored.

    Parameters
    ----------
    *masks : torch.Tensor or None
        bool tensors whose shapes broadcast together.

    Returns
    -------
    torch.Tensor or None
        bool tensor of the broadcast shape, or None when every mask is None.

    Raises
    ------
    TypeError
        A mask that is not a bool tensor.
    ValueError
        Shapes that do not broadcast.

    Examples
    --------
    >>> combine_masks(causal_mask(2), torch.tensor([True, False]))
    tensor([[ True, False],
            [ True, False]])
    """
    present = [m for m in masks if m is not None]
    for m in present:
        check_mask_tensor("combine_masks", "masks", m, allow_float=False)
    if not present:
        return None
    broadcast_shapes(*(m.shape for m in present), what="combine_masks: masks of shapes")
    out = present[0]
    for m in present[1:]:
        out = out & m  # broadcasts to the common shape
    return out


def as_additive_mask(mask: torch.Tensor | None, dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
    """Turn a boolean mask into a float mask to add to scores: True -> 0, False -> -inf.

    Parameters
    ----------
    mask : torch.Tensor or None
        bool mask (True = may attend), or a float mask, which is only cast.
    dtype : torch.dtype
        Floating dtype of the result.

    Returns
    -------
    torch.Tensor or None
        Tensor of the shape of ``mask`` and dtype ``dtype``; None for None.

    Raises
    ------
    TypeError
        ``mask`` is neither a bool nor a floating tensor, or ``dtype`` is not floating.

    Examples
    --------
    >>> as_additive_mask(torch.tensor([True, False]))
    tensor([0., -inf])
    """
    if mask is None:
        return None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"as_additive_mask: dtype must be a floating dtype, got {dtype}")
    check_mask_tensor("as_additive_mask", "mask", mask)
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return zeros.masked_fill(~mask, float("-inf"))
    return mask.to(dtype)


@TORCH
def expand_key_mask(
    key_mask: torch.Tensor, batch: tuple[int, ...], S: int, fn: str = "expand_key_mask"
) -> torch.Tensor:
    """Check a per-key mask and view it so that it broadcasts to (\\*batch, L, S).

    Parameters
    ----------
    key_mask : torch.Tensor
        bool (B, S) or (S,), True for real tokens (keys that may be attended).
        ``B`` must be ``batch[0]`` or 1.
    {key_mask_target}

    Returns
    -------
    torch.Tensor
        bool view of shape (B or 1, 1, ..., 1, 1, S) with ``len(batch) + 2``
        dimensions: the same keys are masked for every head and every query.

    Raises
    ------
    TypeError
        ``key_mask`` is not a bool tensor (a float key mask is refused, not added).
    ValueError
        ``key_mask`` has another shape.

    Examples
    --------
    >>> expand_key_mask(torch.tensor([[True, False]]), batch=(1, 4), S=2).shape
    torch.Size([1, 1, 1, 2])
    """
    check_mask_tensor(fn, "key_mask", key_mask, allow_float=False)
    batch = as_shape(batch)
    B = batch[0] if batch else 1
    shape = as_shape(key_mask.shape)
    if shape == (S,):
        lead = 1
    elif len(shape) == 2 and shape[1] == S and shape[0] in (1, B) and (batch or shape[0] == 1):
        lead = shape[0]
    else:
        raise ValueError(f"{fn}: key_mask must have shape (B, S) = {(B, S)} or (S,) = {(S,)}, got {shape}")
    rest = (1,) * max(len(batch) - 1, 0)
    if not batch:
        return key_mask.reshape(1, S)  # (1, S) broadcasts to (L, S)
    return key_mask.reshape(lead, *rest, 1, S)  # (B, 1, ..., 1, 1, S)


@TORCH
def merge_key_mask(
    attn_mask: torch.Tensor | None,
    key_mask: torch.Tensor | None,
    batch: tuple[int, ...],
    S: int,
    fn: str = "merge_key_mask",
) -> torch.Tensor | None:
    """Fold a per-key mask into an ``attn_mask``: the one place masks are merged.

    Parameters
    ----------
    attn_mask : torch.Tensor or None
        bool (True = may attend) or float (added to the scores) mask
        broadcastable to (\\*batch, L, S).
    key_mask : torch.Tensor or None
        bool (B, S) or (S,), True for real tokens; see :func:`expand_key_mask`.
    {key_mask_target}

    Returns
    -------
    torch.Tensor or None
        None when both are None; else a mask of ``attn_mask``'s kind: bool
        masks are combined with AND, a float mask gets ``-inf`` at the padded
        keys (its dtype is kept). Broadcastable to (\\*batch, L, S).

    Raises
    ------
    TypeError
        ``attn_mask`` is not a bool/float tensor, or ``key_mask`` not a bool tensor.
    ValueError
        ``key_mask`` has the wrong shape.

    Examples
    --------
    >>> merge_key_mask(torch.zeros(2, 2), torch.tensor([True, False]), batch=(), S=2)
    tensor([[0., -inf],
            [0., -inf]])
    """
    if attn_mask is not None:
        check_mask_tensor(fn, "attn_mask", attn_mask)
    if key_mask is None:
        return attn_mask
    keys = expand_key_mask(key_mask, batch, S, fn=fn)  # (B, 1, ..., 1, S)
    if attn_mask is None:
        return keys
    if attn_mask.dtype == torch.bool:
        return attn_mask & keys  # broadcasts to (B, ..., L, S)
    # where (not masked_fill): the float mask may have fewer dimensions than the key mask
    return torch.where(keys, attn_mask, torch.tensor(float("-inf"), dtype=attn_mask.dtype))
