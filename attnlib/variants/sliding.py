"""Sliding-window attention as a banded, tiled kernel: only the tiles the window touches.

With a causal window of ``w`` keys, the queries of a block ``[s, s + B)`` read keys
``[s - w + 1, s + B)`` only, whatever ``n``. The kernel cuts queries and keys into
blocks of ``B``; query block ``b`` meets key blocks ``b - M, ..., b`` with
``M = ceil((w - 1) / B)``, and each of those ``M + 1`` tile products is one batched
product over all blocks at once (the key blocks are slices of the padded keys, never
copied):

    scores (..., n/B, B, (M + 1) B)   instead of   (..., n, n)

so memory grows as ``n (w + B)``, linearly in ``n``, and no tile outside the band is
ever computed (chapter 08's tiling, with the tiles of a window). The result equals
:func:`attnlib.scaled_dot_product_attention` with
:func:`attnlib.variants.sliding_window_mask` (tested to 1e-12 in float64).

Large problems without gradients (band scores over ``_LOOP_MIN_SCORES``) take the same
band one query block at a time (:func:`_banded_loop`): block ``[s, s + B)`` against its
contiguous keys ``[s - w + 1, s + B)``, the scale folded into the matmul, a mask only on
the two triangles the window cuts, the softmax and ``P V`` into one reused tile that
stays in the cache. The same scores, the same sums: equal to the masked softmax to
rounding (tested to 1e-12 in float64), and its memory is one tile plus the output. Small
problems (chapter 13's examples and its trained models) and calls that need gradients
keep the one-shot form above, so their numbers do not change.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlib._tensors import check_floating_tensors, work_dtype
from attnlib._validate import broadcast_shapes, check_positive_int, scale_or_default

__all__ = ["sliding_window_attention"]

# Above this many band scores (16 MB in float32) the forward without gradients walks the query
# blocks one at a time (_banded_loop) instead of forming every block's scores at once.
_LOOP_MIN_SCORES = 2**22
# ... over as many of the leading (batch x head) rows at once as keep a tile of scores within
# this many numbers (512 KB in float32, inside a 1 MiB L2 cache).
_TILE_SCORES = 2**17


def sliding_window_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: int,
    *,
    block_size: int = 64,
    scale: float | None = None,
) -> torch.Tensor:
    """Causal self-attention over the last ``window`` keys of each query, never forming ``(n, n)``.

    Query ``i`` attends keys ``j`` with ``0 <= i - j < window``
    (:func:`attnlib.variants.sliding_window_mask`). Differentiable (autograd runs
    through the banded products).

    Parameters
    ----------
    query : torch.Tensor
        ``(..., n, E)``.
    key : torch.Tensor
        ``(..., n, E)``: the same ``n`` positions as the queries.
    value : torch.Tensor
        ``(..., n, Ev)``.
    window : int
        Keys per query, its own included (1 or more).
    block_size : int, default 64
        Queries per block ``B``; memory is about ``n (B + window)`` scores.
    scale : float, optional
        Score scale; default ``1/sqrt(E)``.

    Returns
    -------
    torch.Tensor
        ``(..., n, Ev)`` in the inputs' dtype (float16/bfloat16 computed in float32).

    Raises
    ------
    TypeError
        Inputs that are not floating tensors of one dtype.
    ValueError
        Shapes that disagree, or a window or block size below 1.

    Examples
    --------
    >>> q = k = v = torch.eye(3)[None]
    >>> sliding_window_attention(q, k, v, window=1).squeeze(0)  # each token sees itself only
    tensor([[1., 0., 0.],
            [0., 1., 0.],
            [0., 0., 1.]])
    """
    fn = "sliding_window_attention"
    check_floating_tensors(fn, query=query, key=key, value=value)
    window = check_positive_int(fn, "window", window)
    block = check_positive_int(fn, "block_size", block_size)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            f"{fn}: query, key and value must be (..., n, E), got {tuple(query.shape)}, "
            f"{tuple(key.shape)}, {tuple(value.shape)}"
        )
    n, e = query.shape[-2], query.shape[-1]
    if key.shape[-2:] != (n, e):
        raise ValueError(f"{fn}: key must be (..., n, E) = (..., {n}, {e}), got {tuple(key.shape)}")
    if value.shape[-2] != n:
        raise ValueError(f"{fn}: value must have n = {n} positions like key, got {tuple(value.shape)}")
    # attnlib's own broadcasting: torch.broadcast_shapes imports sympy on first use (1-7 s)
    batch = broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2], what=f"{fn}: batch shapes")
    scale = scale_or_default(fn, scale, e)
    out_dtype, work = query.dtype, work_dtype(query.dtype)
    q = query.to(work).expand(*batch, n, e)
    k = key.to(work).expand(*batch, n, e)
    v = value.to(work).expand(*batch, n, value.shape[-1])
    if n == 0:
        return v.new_zeros(*batch, 0, value.shape[-1]).to(out_dtype)

    blocks = -(-n // block)  # ceil(n / B) query blocks
    padded = blocks * block
    back = -(-(window - 1) // block)  # earlier key blocks a query block reaches: M = ceil((w - 1) / B)
    flat = int(torch.Size(batch).numel())  # the leading dimensions, as one
    ev = v.shape[-1]
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if not needs_grad and blocks * flat * block * (back + 1) * block >= _LOOP_MIN_SCORES:
        out = _banded_loop(
            q.reshape(flat, n, e), k.reshape(flat, n, e), v.reshape(flat, n, ev), window, block, scale
        )
        return out.reshape(*batch, n, ev).to(out_dtype)

    def tiles(x: torch.Tensor, before: int) -> torch.Tensor:
        """``(..., n, d)`` padded and cut into blocks, block-major: ``(before/B + nb, flat, B, d)``."""
        x = F.pad(x.reshape(flat, n, x.shape[-1]), (0, 0, before, padded - n))
        return x.unflatten(1, (-1, block)).transpose(0, 1).contiguous()

    q = tiles(q * scale, 0)  # (nb, flat, B, E), scaled once here rather than every score
    k = tiles(k, back * block)  # (M + nb, flat, B, E): M blocks of zeros before position 0
    v = tiles(v, back * block)  # (M + nb, flat, B, Ev)
    # query block b meets key block b - m for m = M ... 0 (oldest first): k[M - m + b], a slice
    older_first = range(back, -1, -1)
    scores = torch.cat([q @ k[back - m : back - m + blocks].transpose(-1, -2) for m in older_first], dim=-1)
    # (nb, flat, B, (M+1)B). Only tiles that the window cuts need a mask: the diagonal tile
    # (causal), the oldest ones (beyond the window) and, in the first M blocks, the padding.
    r = torch.arange(block, device=q.device)[:, None]  # (B, 1) query row in its block
    t = torch.arange((back + 1) * block, device=q.device)[None, :]  # (1, (M+1)B) key slot
    distance = r + back * block - t  # i - j
    outside = (distance < 0) | (distance >= window)  # (B, (M+1)B)
    for m in range(back + 1):
        cut = outside[:, m * block : (m + 1) * block]
        if bool(cut.any()):
            scores[..., m * block : (m + 1) * block].masked_fill_(cut, float("-inf"))
    for b in range(min(back, blocks)):
        scores[b, ..., : (back - b) * block] = float("-inf")  # keys before position 0
    weights = scores.softmax(dim=-1)  # every row keeps its own key, so no row is empty
    out = q.new_zeros(blocks, flat, block, ev)
    for slot, m in enumerate(older_first):
        part = weights[..., slot * block : (slot + 1) * block]  # (nb, flat, B, B)
        out += part @ v[back - m : back - m + blocks]  # (nb, flat, B, Ev)
    out = out.transpose(0, 1).reshape(flat, padded, ev)[:, :n].reshape(*batch, n, ev)  # (..., n, Ev)
    return out.to(out_dtype)


def _banded_loop(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, block: int, scale: float):
    """The band one query block at a time: q, k ``(flat, n, E)``, v ``(flat, n, Ev)`` -> ``(flat, n, Ev)``.

    Query block ``[s, t)`` meets the contiguous keys ``[max(0, s - w + 1), t)``: one tile
    ``(rows, t - s, <= w + B - 1)`` of scores, written into a reused buffer by
    ``baddbmm`` (the scale as its ``alpha``). In a full block away from the start, key
    column ``c`` is at distance ``r + w - 1 - c`` from query row ``r``, the same for every
    such block: a 0 / -inf bias added to the columns the window cuts (the first ``B - 1``,
    beyond the window's start, and the last ``B - 1``, the causal triangle), computed once.
    The softmax is written over the scores in place and ``P V`` into the output. No
    gradients (the caller keeps the one-shot form for those).
    """
    flat, n, _ = q.shape
    ev = v.shape[-1]
    width = window + block - 1  # keys of a full block away from the start
    rows = max(1, min(flat, _TILE_SCORES // (block * width)))  # (batch x head) rows per tile
    buffer = q.new_empty(rows * block * width)
    out = q.new_empty(flat, n, ev)
    r = torch.arange(block, device=q.device)[:, None]
    c = torch.arange(width, device=q.device)[None, :]
    distance = r + window - 1 - c  # i - j in a full block away from the start
    bias = torch.zeros(block, width, dtype=q.dtype, device=q.device)
    bias.masked_fill_((distance < 0) | (distance >= window), float("-inf"))
    left = min(block - 1, width)  # columns [0, left): beyond the window for the first rows
    right = max(window, left)  # columns [right, width): after the diagonal
    left_bias, right_bias = bias[:, :left].contiguous(), bias[:, right:].contiguous()
    for h0 in range(0, flat, rows):
        h1 = min(h0 + rows, flat)
        for s in range(0, n, block):
            t = min(s + block, n)
            ks = max(0, s - window + 1)
            scores = buffer[: (h1 - h0) * (t - s) * (t - ks)].view(h1 - h0, t - s, t - ks)
            torch.baddbmm(
                scores, q[h0:h1, s:t], k[h0:h1, ks:t].transpose(1, 2), beta=0, alpha=scale, out=scores
            )
            if ks == s - window + 1 and t - s == block:  # a full block away from the start
                scores[..., :left].add_(left_bias)
                scores[..., right:].add_(right_bias)
            else:  # the first blocks (keys from 0) and a last, shorter block
                i = torch.arange(s, t, device=q.device)[:, None]
                j = torch.arange(ks, t, device=q.device)[None, :]
                scores.masked_fill_((i - j < 0) | (i - j >= window), float("-inf"))
            torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # every row keeps its own key
            torch.bmm(scores, v[h0:h1, ks:t], out=out[h0:h1, s:t])
    return out
