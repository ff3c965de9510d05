"""Sparse attention patterns as boolean masks (True means *may attend*), all causal.

Every pattern here is for a decoder: query ``i`` never sees a key ``j > i``. Each is
a subset of :func:`attnlib.causal_mask` that keeps the cost of a row bounded by a
constant (the window, the stride, the block) instead of ``i + 1``:

* :func:`sliding_window_mask`: the last ``window`` keys (Beltagy et al. 2020;
  Mistral 7B, Jiang et al. 2023, uses 4096);
* :func:`strided_mask` and :func:`fixed_mask`: the two factorised patterns of
  Child et al. 2019 ("Generating long sequences with sparse Transformers", Sec. 4.2),
  each the union of the pattern's two heads;
* :func:`global_token_mask`: a window plus a few global positions that see and are
  seen by every other (Longformer, Beltagy et al. 2020; BigBird, Zaheer et al. 2020);
* :func:`sink_mask`: a window plus the first tokens (StreamingLLM's attention sinks,
  Xiao et al. 2023);
* :func:`receptive_field`: which keys a query reaches through ``layers`` stacked
  layers of one pattern (a token's own residual path included).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from attnlib._validate import check_integer, check_positive_int

__all__ = [
    "fixed_mask",
    "global_token_mask",
    "receptive_field",
    "sink_mask",
    "sliding_window_mask",
    "strided_mask",
]


def _offsets(fn: str, n: object, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Query index ``i`` (n, 1), key index ``j`` (1, n) and ``i - j`` (n, n) of an ``n``-token sequence."""
    n = check_integer(fn, "n", n)
    if n < 0:
        raise ValueError(f"{fn}: n must be >= 0, got {n}")
    i = torch.arange(n, device=device)[:, None]  # (n, 1)
    j = torch.arange(n, device=device)[None, :]  # (1, n)
    return i, j, i - j


def sliding_window_mask(n: int, window: int, *, device=None) -> torch.Tensor:
    """Causal sliding window: query ``i`` may attend key ``j`` when ``0 <= i - j < window``.

    Each row holds at most ``window`` keys, the query's own included; ``window >= n``
    gives :func:`attnlib.causal_mask`.

    Parameters
    ----------
    n : int
        Sequence length (queries and keys are the same ``n`` positions).
    window : int
        Keys per row, counting the query's own position (1 or more).
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor
        bool ``(n, n)``.

    Examples
    --------
    >>> sliding_window_mask(4, 2).int()
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    fn = "sliding_window_mask"
    window = check_positive_int(fn, "window", window)
    _, _, d = _offsets(fn, n, device)
    return (d >= 0) & (d < window)


def strided_mask(n: int, stride: int, *, device=None) -> torch.Tensor:
    """Child et al.'s strided pattern: the last ``stride`` keys, and every ``stride``-th key before.

    The union of the pattern's two heads: ``0 <= i - j < stride`` (the local head) or
    ``(i - j) % stride == 0`` with ``j <= i`` (the strided head). With
    ``stride ~ sqrt(n)`` each row holds about ``2 sqrt(n)`` keys, and any key is
    reached in two layers.

    Parameters
    ----------
    n : int
        Sequence length.
    stride : int
        The stride ``l`` (1 or more).
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor
        bool ``(n, n)``.

    Examples
    --------
    >>> strided_mask(5, 2)[4].int().tolist()
    [1, 0, 1, 1, 1]
    """
    fn = "strided_mask"
    stride = check_positive_int(fn, "stride", stride)
    _, _, d = _offsets(fn, n, device)
    return (d >= 0) & ((d < stride) | (d % stride == 0))


def fixed_mask(n: int, block: int, summary: int = 1, *, device=None) -> torch.Tensor:
    """Child et al.'s fixed pattern: the query's own block, and the last ``summary`` keys of every block.

    The union of the pattern's two heads, causal: ``j // block == i // block``, or
    ``j % block >= block - summary`` (the "summary" positions that carry a block's
    content forward), with ``j <= i``.

    Parameters
    ----------
    n : int
        Sequence length.
    block : int
        Block length ``l`` (1 or more).
    summary : int, default 1
        Summary positions ``c`` at the end of each block, ``1 <= c <= block``.
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor
        bool ``(n, n)``.

    Examples
    --------
    >>> fixed_mask(6, 3)[5].int().tolist()
    [0, 0, 1, 1, 1, 1]
    """
    fn = "fixed_mask"
    block = check_positive_int(fn, "block", block)
    summary = check_positive_int(fn, "summary", summary)
    if summary > block:
        raise ValueError(f"{fn}: summary must be <= block, got summary={summary}, block={block}")
    i, j, d = _offsets(fn, n, device)
    same_block = (i // block) == (j // block)
    summaries = (j % block) >= (block - summary)
    return (d >= 0) & (same_block | summaries)


def _positions(fn: str, name: str, positions: object, n: int) -> list[int]:
    if isinstance(positions, (bool, str, bytes)) or not isinstance(positions, (int, Iterable)):
        raise TypeError(f"{fn}: {name} must be an int or a sequence of ints, got {type(positions).__name__}")
    if isinstance(positions, int):
        count = check_integer(fn, name, positions)
        if count < 0:
            raise ValueError(f"{fn}: {name} must be >= 0, got {count}")
        return list(range(min(count, n)))
    out = [check_integer(fn, name, p) for p in positions]
    bad = [p for p in out if not 0 <= p < n]
    if bad:
        raise ValueError(f"{fn}: {name} must lie in [0, {n}), got {bad}")
    return out


def global_token_mask(n: int, window: int, global_tokens, *, device=None) -> torch.Tensor:
    """A causal sliding window plus global positions that see, and are seen by, every position.

    Query ``i`` may attend key ``j <= i`` when ``i - j < window``, or ``j`` is a
    global position (every later token reads it), or ``i`` is one (it reads every
    earlier token). Longformer and BigBird use such tokens (``[CLS]``, a question)
    in encoders, where "every" includes later positions; this is the causal form.

    Parameters
    ----------
    n : int
        Sequence length.
    window : int
        Keys of the local window, the query's own included (1 or more).
    global_tokens : int or sequence of int
        The first ``global_tokens`` positions, or the global positions themselves.
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor
        bool ``(n, n)``.

    Examples
    --------
    >>> global_token_mask(5, 1, [2])[4].int().tolist()
    [0, 0, 1, 0, 1]
    """
    fn = "global_token_mask"
    window = check_positive_int(fn, "window", window)
    _, _, d = _offsets(fn, n, device)
    marked = torch.zeros(d.shape[0], dtype=torch.bool, device=d.device)  # (n,)
    marked[_positions(fn, "global_tokens", global_tokens, d.shape[0])] = True
    causal = d >= 0
    return causal & ((d < window) | marked[None, :] | marked[:, None])


def sink_mask(n: int, window: int, sinks: int = 4, *, device=None) -> torch.Tensor:
    """A causal sliding window plus the first ``sinks`` tokens (StreamingLLM's attention sinks).

    Xiao et al. 2023 observe that trained models put much attention on the first
    tokens whatever they are; a window that drops them changes every later softmax,
    and keeping the first four as "sinks" restores a streaming model's perplexity.

    Parameters
    ----------
    n : int
        Sequence length.
    window : int
        Keys of the recent window, the query's own included (1 or more).
    sinks : int, default 4
        The first positions every later query keeps (0 or more).
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor
        bool ``(n, n)``.

    Examples
    --------
    >>> sink_mask(6, 2, sinks=1)[5].int().tolist()
    [1, 0, 0, 0, 1, 1]
    """
    fn = "sink_mask"
    window = check_positive_int(fn, "window", window)
    sinks = check_integer(fn, "sinks", sinks)
    if sinks < 0:
        raise ValueError(f"{fn}: sinks must be >= 0, got {sinks}")
    _, j, d = _offsets(fn, n, device)
    return (d >= 0) & ((d < window) | (j < sinks))


def receptive_field(mask: torch.Tensor, layers: int) -> torch.Tensor:
    """Which keys each query reaches through ``layers`` stacked layers that share ``mask``.

    A layer mixes position ``i`` with the positions ``mask[i]`` allows, and the
    residual stream keeps ``i`` itself, so after ``L`` layers ``i`` has read ``j``
    when a chain ``i = p_0, p_1, ..., p_L = j`` exists with ``p_{t+1}`` in
    ``mask[p_t]`` or ``p_{t+1} = p_t``. For a sliding window of ``w`` keys the
    field is ``L (w - 1) + 1`` keys wide.

    Parameters
    ----------
    mask : torch.Tensor
        bool ``(n, n)``, True means *may attend*.
    layers : int
        Stacked layers (0 or more; 0 gives the identity).

    Returns
    -------
    torch.Tensor
        bool ``(n, n)``.

    Examples
    --------
    >>> receptive_field(sliding_window_mask(5, 2), 2)[4].int().tolist()
    [0, 0, 1, 1, 1]
    """
    fn = "receptive_field"
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = getattr(mask, "dtype", type(mask).__name__)
        raise TypeError(f"{fn}: mask must be a bool torch.Tensor, got {got}")
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        raise ValueError(f"{fn}: mask must be square (n, n), got {tuple(mask.shape)}")
    layers = check_integer(fn, "layers", layers)
    if layers < 0:
        raise ValueError(f"{fn}: layers must be >= 0, got {layers}")
    n = mask.shape[0]
    step = (mask | torch.eye(n, dtype=torch.bool, device=mask.device)).to(torch.float32)  # (n, n)
    reach = torch.eye(n, dtype=torch.float32, device=mask.device)  # (n, n)
    for _ in range(layers):
        reach = ((reach @ step) > 0).to(torch.float32)  # a path of one more hop
    return reach > 0
