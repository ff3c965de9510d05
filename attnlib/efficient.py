"""Efficient attention: the online softmax, tiled attention, a KV cache, MQA/GQA.

Chapter 08 ("Complexity and efficient attention") builds everything in this
module step by step. The exact, straightforward attention of the earlier
chapters materialises the ``(L, S)`` score matrix: O(L S) memory. Here the same
result is computed tile by tile with an *online softmax* (Milakov & Gimelshein
2018; Rabe & Staats 2021; Dao et al. 2022), so that only one
``(block_q, block_k)`` tile of scores exists at any time.

The online softmax keeps three running quantities for every query row:

* ``m``   the largest score seen so far,
* ``l``   the sum of ``exp(score - m)`` over the keys seen so far,
* ``acc`` the sum of ``exp(score - m) * value`` over the keys seen so far.

When a new block of scores ``s`` arrives::

    m_new = max(m, max_j s_j)
    c     = exp(m - m_new)                  # rescales what we had
    p_j   = exp(s_j - m_new)
    l     = c * l   + sum_j p_j
    acc   = c * acc + sum_j p_j v_j
    m     = m_new

and after the last block the output is ``acc / l``, exactly
``softmax(s) @ V``.

Conventions (CONTRIBUTING.md): shapes ``(batch, heads, seq, dim)``; ``query`` is
``(..., L, E)``, ``key`` ``(..., S, E)``, ``value`` ``(..., S, Ev)``; boolean
masks are ``True`` where a query *may attend*; a float mask is added to the
scores; a fully masked query row gets an all-zero output.

Public API
----------
online_softmax_update, online_softmax_numpy, online_attention_row_numpy
    the online softmax in NumPy, one query row, block by block
tile_step
    one tile of tiled attention (update of ``m``, ``l``, ``acc``)
tiled_attention
    tiled attention with an online softmax, the drop-in for
    ``torch.nn.functional.scaled_dot_product_attention``; differentiable, with
    FlashAttention-2's backward (Dao 2023) that recomputes every tile from the
    saved per-row log-sum-exp instead of storing the scores
grouped_query_attention, repeat_kv
    multi-query and grouped-query attention (``tiled_attention(...,
    enable_gqa=True)``, the flag of torch's SDPA)
KVCache, decode_step, kv_cache_bytes
    incremental decoding with a key/value cache, and its memory
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from attnlib._validate import check_attention, check_floating, check_length, check_mask, check_positive_int
from attnlib.masks import check_mask_tensor, expand_key_mask

__all__ = [
    "KVCache",
    "OnlineSoftmaxState",
    "decode_step",
    "grouped_query_attention",
    "kv_cache_bytes",
    "online_attention_row_numpy",
    "online_softmax_numpy",
    "online_softmax_update",
    "repeat_kv",
    "tile_step",
    "tiled_attention",
]

DEFAULT_BLOCK_Q = 512
DEFAULT_BLOCK_K = 512


# ---------------------------------------------------------------------------
# 1. The online softmax in NumPy: one query row, block by block
# ---------------------------------------------------------------------------


@dataclass
class OnlineSoftmaxState:
    """The running state of an online softmax after some blocks.

    ``m`` is the running maximum, ``l`` the running sum of ``exp(s - m)``,
    ``acc`` (attention only) the running sum of ``exp(s - m) * v``;
    ``seen`` is how many scores have been consumed so far.
    """

    m: float
    l: float
    seen: int
    acc: np.ndarray | None = field(default=None)


def online_softmax_update(m: float, l: float, block: np.ndarray) -> tuple[float, float]:
    """One step of the online softmax: fold a block of scores into ``(m, l)``.

    Parameters
    ----------
    m : float
        running maximum of the scores seen so far (``-inf`` before the first block)
    l : float
        running sum of ``exp(score - m)`` over the scores seen so far (``0`` at first)
    block : array of shape (k,)
        the next scores

    Returns
    -------
    (m_new, l_new) : the running maximum and the running sum, rescaled to ``m_new``.
    """
    block = np.asarray(block, dtype=float)
    if block.ndim != 1:
        raise ValueError(f"block must be 1-D with shape (k,), got shape {block.shape}")
    if block.size == 0:
        return float(m), float(l)
    m_new = float(np.maximum(m, block.max()))  # np.maximum keeps a NaN, Python's max may not
    if m_new == -math.inf:  # everything seen so far is masked
        return m_new, 0.0
    l_new = l * math.exp(m - m_new) + float(np.exp(block - m_new).sum())
    return m_new, l_new


def online_softmax_numpy(scores: np.ndarray, block_size: int) -> tuple[np.ndarray, list[OnlineSoftmaxState]]:
    """Softmax of one row of scores, computed block by block with a running max and sum.

    Parameters
    ----------
    scores : array of shape (S,)
        one row of scores (``-inf`` entries are masked keys)
    block_size : int
        how many scores are read at a time

    Returns
    -------
    weights : array of shape (S,)
        ``softmax(scores)``; all zeros when every score is ``-inf``
    states : list of OnlineSoftmaxState
        the state ``(m, l, seen)`` after each block, for display

    The scores are read once for the running statistics; the weights then
    need one more pass ``exp(s - m) / l`` with the final ``m`` and ``l``. Only
    two numbers are carried between blocks.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1:
        raise ValueError(f"scores must be 1-D with shape (S,), got shape {scores.shape}")
    block_size = check_positive_int("online_softmax_numpy", "block_size", block_size)
    m, l = -math.inf, 0.0
    states = []
    for start in range(0, scores.size, block_size):
        block = scores[start : start + block_size]
        m, l = online_softmax_update(m, l, block)
        states.append(OnlineSoftmaxState(m=m, l=l, seen=start + block.size))
    if l == 0.0:
        return np.zeros_like(scores), states
    return np.exp(scores - m) / l, states


def online_attention_row_numpy(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    block_size: int,
    scale: float | None = None,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, list[OnlineSoftmaxState]]:
    """Attention output of one query row, reading keys and values block by block.

    Parameters
    ----------
    q : array of shape (E,)
    k : array of shape (S, E)
    v : array of shape (S, Ev)
    block_size : int
    scale : float, default ``1 / sqrt(E)``
    mask : bool array of shape (S,), optional; True = may attend

    Returns
    -------
    out : array of shape (Ev,)
        ``softmax(scale * k @ q) @ v`` (zeros when every key is masked)
    states : list of OnlineSoftmaxState
        ``(m, l, acc, seen)`` after each block
    """
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.ndim != 1 or k.ndim != 2 or v.ndim != 2 or k.shape[1] != q.shape[0]:
        raise ValueError(f"expected q (E,), k (S, E), v (S, Ev); got q {q.shape}, k {k.shape}, v {v.shape}")
    if v.shape[0] != k.shape[0]:
        raise ValueError(f"k {k.shape} and v {v.shape} must have the same length S")
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (k.shape[0],):
            raise ValueError(f"mask must have shape (S,) = ({k.shape[0]},), got {mask.shape}")
    block_size = check_positive_int("online_attention_row_numpy", "block_size", block_size)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[0]) if q.shape[0] else 1.0

    m, l = -math.inf, 0.0
    acc = np.zeros(v.shape[1])
    states = []
    for start in range(0, k.shape[0], block_size):
        s = scale * (k[start : start + block_size] @ q)  # the block's scores
        if mask is not None:
            s = np.where(mask[start : start + block_size], s, -np.inf)
        m_new = float(np.maximum(m, s.max()))  # a NaN score makes the row NaN, as torch
        if not m_new == -math.inf:
            correction = math.exp(m - m_new)  # exp(-inf) = 0 on the first block
            p = np.exp(s - m_new)
            l = correction * l + p.sum()
            acc = correction * acc + p @ v[start : start + block_size]
            m = m_new
        states.append(OnlineSoftmaxState(m=m, l=l, seen=start + s.size, acc=acc.copy()))
    out = acc / l if l != 0 else np.zeros(v.shape[1])  # NaN stays NaN
    return out, states


# ---------------------------------------------------------------------------
# 2. The online-softmax update of one tile (PyTorch), shared by everything below
# ---------------------------------------------------------------------------

_LOG2E = 1.0 / math.log(2.0)  # scores times log2(e) turn exp(x) into the cheaper exp2(x)
_LOW_PRECISION = (torch.float16, torch.bfloat16)


# The fast path of tiled_attention folds a tile without rescaling when its
# exp2(s - m) sum stays below this: m may then lag behind the true running
# maximum, which is exact (acc / l does not depend on m) and safe in float32.
_SETTLED_LIMIT = 2.0**16
# ... and only on tiles of at least this many scores (256 KB in float32): the
# saving is memory traffic over tiles larger than the cache; small problems
# (the chapter's examples) run the exact update, to the last bit as printed.
_FAST_PATH_MIN_SCORES = 2**16


def _fold_tile(m, l, acc, p, v, *, base2=False, acc_flat=None, settled=False):
    """The online-softmax update, in place: fold one tile into (m, l, acc).

    m, l are (..., b_q, 1), acc (..., b_q, d_v); p holds the tile's scores
    (..., b_q, b_k) (-inf where masked) and becomes exp(scores - m_new);
    v is (..., b_k, d_v). With base2 the scores are in base-2 units
    (natural scores times log2(e)) and exp2 replaces exp: the same result
    from a cheaper instruction. acc_flat is an optional 3-D view of acc
    (n, rows, d_v) for one batched acc += p @ v without a temporary.

    m only needs to be *a* reference that l and acc are measured against
    (the largest score seen so far is the safe choice): softmax's result
    does not depend on it. settled=True is tiled_attention's fast path for
    rows that have all seen an allowed key (l > 0): p then already holds
    scores - m (subtracted inside the score matmul) and m stays where it
    is, which saves the max, the subtraction and the rescaling. It returns
    False, having changed only p, when a tile sum exceeds _SETTLED_LIMIT
    (m lags too far behind): the caller redoes the tile with settled=False.

    A NaN score makes m NaN, and torch.maximum keeps it NaN in every later
    tile, whatever their order: NaN propagates as in torch's softmax.
    """
    exp_ = torch.Tensor.exp2_ if base2 else torch.Tensor.exp_
    if settled:
        tile_sum = exp_(p).sum(dim=-1, keepdim=True)  # p = exp(s - m)
        if (tile_sum > _SETTLED_LIMIT).any():
            return False
        l.add_(tile_sum)
    else:
        m_new = torch.maximum(m, p.amax(dim=-1, keepdim=True))  # (..., b_q, 1)
        # Rows that have seen only masked keys keep m = -inf: shift them by 0
        # instead, so that exp(-inf - (-inf)) = NaN never happens.
        shift = m_new.masked_fill(m_new == -math.inf, 0.0)
        correction = exp_(m - shift)  # exp(m - m_new) <= 1 rescales the past
        exp_(p.sub_(shift))  # p = exp(s - m_new), in place
        l.mul_(correction).add_(p.sum(dim=-1, keepdim=True))
        acc.mul_(correction)
        m.copy_(m_new)
    if acc_flat is not None:  # acc += p @ v, no temporary
        acc_flat.baddbmm_(p.view(*acc_flat.shape[:-1], p.shape[-1]), v)
    else:
        acc.add_(p @ v)
    return True


def tile_step(
    m: torch.Tensor,
    l: torch.Tensor,
    acc: torch.Tensor,
    q_tile: torch.Tensor,
    k_tile: torch.Tensor,
    v_tile: torch.Tensor,
    scale: float | None = None,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tile of tiled attention: fold a block of keys/values into the running state.

    Shapes: ``m`` and ``l`` are ``(..., Bq, 1)``, ``acc`` is ``(..., Bq, Ev)``,
    ``q_tile`` ``(..., Bq, E)``, ``k_tile`` ``(..., Bk, E)``, ``v_tile``
    ``(..., Bk, Ev)``, ``allowed`` (optional, bool, True = may attend)
    broadcastable to ``(..., Bq, Bk)``. Start from ``m = -inf``, ``l = 0``,
    ``acc = 0``; after the last tile the output is ``acc / l``.

    Returns new ``(m, l, acc)``; the inputs are not modified. The update itself
    is :func:`_fold_tile`, the same function :func:`tiled_attention` runs.
    """
    if scale is None:
        scale = 1.0 / math.sqrt(q_tile.shape[-1]) if q_tile.shape[-1] else 1.0
    s = scale * q_tile @ k_tile.transpose(-2, -1)  # (..., Bq, Bk)
    if allowed is not None:
        s = s.masked_fill(~allowed, -math.inf)
    shape = torch.broadcast_shapes(m.shape, s.shape[:-1] + (1,))
    m, l = m.expand(shape).clone(), l.expand(shape).clone()
    acc = acc.expand(*shape[:-1], acc.shape[-1]).clone()
    _fold_tile(m, l, acc, s, v_tile)
    return m, l, acc


# ---------------------------------------------------------------------------
# 3. Tiled attention: forward, backward (FlashAttention-2), autograd
# ---------------------------------------------------------------------------


def tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    key_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    enable_gqa: bool = False,
    diagonal: int = 0,
    block_q: int = DEFAULT_BLOCK_Q,
    block_k: int = DEFAULT_BLOCK_K,
) -> torch.Tensor:
    """Scaled dot-product attention computed tile by tile with an online softmax.

    Equal (to rounding) to ``torch.nn.functional.scaled_dot_product_attention``
    but never holds more than one ``(block_q, block_k)`` tile of scores per
    batch-head: extra memory O(L + S) instead of O(L S), in the forward and in
    the backward pass.

    Parameters
    ----------
    query : (..., L, E)
    key : (..., S, E)
    value : (..., S, Ev)
        leading dimensions broadcast against each other; float16 and bfloat16
        are computed in float32 (running maximum, sum and output, as
        FlashAttention does) and the output is cast back
    attn_mask : optional, broadcastable to (..., L, S)
        bool (True = may attend) or float (added to the scores; it receives
        no gradient)
    key_mask : optional bool, (B, S) or (S,)
        padding mask, True = a real token; ``B`` is ``query.shape[0]`` and the
        mask is broadcast over every other leading dimension (e.g. heads)
    is_causal : bool
        query ``i`` may attend key ``j`` only when ``j <= i + diagonal``;
        key blocks entirely above that diagonal are skipped, not computed
    scale : float, default ``1 / sqrt(E)``
    enable_gqa : bool, default False
        grouped-query attention, as the flag of torch's SDPA: query
        ``(B, Hq, L, E)``, key ``(B, Hkv, S, E)``, value ``(B, Hkv, S, Ev)``
        with ``Hq`` a multiple of ``Hkv``; query heads ``r g ... (r+1) g - 1``
        (``g = Hq / Hkv``) share key/value head ``r``, as if every key/value
        head were repeated ``g`` times (:func:`repeat_kv`), but without the
        copies: the ``g`` query heads of a group are stacked and multiplied by
        their shared keys in one matmul; the gradient of a key/value head sums
        over its group. Multi-query attention when ``Hkv = 1``. Unlike torch,
        the inputs must then be 4-D (torch also takes more leading dims).
        ``attn_mask`` broadcasts to ``(B, Hq, L, S)``.
    diagonal : int, default 0
        ``0`` is the top-left alignment of torch's ``is_causal``; ``S - L`` is
        the lower-right alignment used when decoding with a KV cache
    block_q, block_k : int
        tile sizes (any positive integers; they need not divide L or S)

    Returns
    -------
    (..., L, Ev), the dtype of ``query``. A query row with no key it may attend
    (also when ``S = 0``) gets an all-zero output and zero gradients; ``L = 0``
    gives an empty output; ``E = 0`` gives every key the same weight, as torch.

    Differentiable: the backward pass (FlashAttention-2, Dao 2023) recomputes
    every tile's probabilities from the saved per-row log-sum-exp instead of
    storing them; it supports one backward pass (no double backward).
    """
    options = (attn_mask, key_mask, is_causal, diagonal, scale, block_q, block_k)
    if not isinstance(enable_gqa, bool):
        raise TypeError(f"tiled_attention: enable_gqa must be a bool, got {type(enable_gqa).__name__}")
    if enable_gqa:
        return _grouped_query_attention("tiled_attention(enable_gqa=True)", query, key, value, options)
    fn = "tiled_attention"
    batch, L, S, E, Ev = _check_qkv(fn, query, key, value)
    query, key, value = query.expand(*batch, L, E), key.expand(*batch, S, E), value.expand(*batch, S, Ev)
    n = math.prod(batch)  # g = 1: every query head has its own keys and values
    out = _attend_groups(fn, query, key, value, n, 1, batch, *options)
    return out.reshape(*batch, L, Ev)


def _grouped_query_attention(fn, query, key, value, options):
    """tiled_attention with ``enable_gqa=True``: (B, Hq, L, E) queries over (B, Hkv, S, E) keys."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{fn}: {name} must have shape (B, H, seq, dim), got {tuple(t.shape)}")
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    B, Hq, L, E = query.shape
    Bk, Hkv, S, _ = key.shape
    if Bk != B or value.shape[0] != B or value.shape[1] != Hkv:
        raise ValueError(f"{fn}: query, key and value must share B and key/value share Hkv: {shapes}")
    if Hkv == 0 or Hq % Hkv != 0:
        raise ValueError(
            f"{fn}: query heads Hq={Hq} must be a multiple of key/value heads Hkv={Hkv}: {shapes}"
        )
    batch, L, S, E, Ev = _check_qkv(fn, query[:, :1], key, value)
    out = _attend_groups(fn, query, key, value, B * Hkv, Hq // Hkv, (B, Hq), *options)  # Hq/Hkv per group
    return out.reshape(B, Hq, L, Ev)


def _attend_groups(
    fn, query, key, value, n, g, mask_batch, attn_mask, key_mask, is_causal, diagonal, scale, bq, bk
):
    """The common core of :func:`tiled_attention` (g = 1) and its ``enable_gqa=True`` path.

    query (..., L, E) holds n * g heads, key (..., S, E) and value (..., S, Ev) hold n:
    the g query heads next to each other share one key/value head. The masks broadcast
    to (*mask_batch, L, S). Returns (n, g, L, Ev).
    """
    L, E, S, Ev = query.shape[-2], query.shape[-1], key.shape[-2], value.shape[-1]
    q = query.reshape(n, g, L, E)  # the g query heads that share a key/value head stacked
    k = key.reshape(n, S, E)
    v = value.reshape(n, S, Ev)
    masks = _prepare_masks(fn, attn_mask, key_mask, mask_batch, L, S, query)
    bq, bk = check_positive_int(fn, "block_q", bq), check_positive_int(fn, "block_k", bk)
    return _attend(q, k, v, masks, is_causal, diagonal, scale, bq, bk)


@dataclass
class _Masks:
    """Masks broadcastable to (*batch, L, S), leading dims expanded (no copy)."""

    allowed: list[torch.Tensor]  # bool masks, True = may attend
    bias: torch.Tensor | None  # float mask, added to the scores
    batch: tuple[int, ...]

    def tile(self, mask: torch.Tensor, rows: slice, cols: slice, n: int, g: int) -> torch.Tensor:
        """The (n, g, rows, cols) tile of a mask; size-1 dims stay size 1."""
        r = rows if mask.shape[-2] > 1 else slice(None)
        c = cols if mask.shape[-1] > 1 else slice(None)
        t = mask[..., r, c]
        if all(size == 1 for size in t.shape[:-2]):
            return t.reshape(1, 1, *t.shape[-2:])
        return t.expand(*self.batch, *t.shape[-2:]).reshape(n, g, *t.shape[-2:])


@dataclass
class _Plan:
    """Everything the forward and the backward loops share about one call."""

    masks: _Masks
    is_causal: bool
    diagonal: int
    scale: float
    block_q: int
    block_k: int

    def key_end(self, i1: int, S: int) -> int:
        """Causal: the last key row ``i1 - 1`` may see is ``i1 - 1 + diagonal``."""
        return max(min(S, i1 + self.diagonal), 0) if self.is_causal else S

    def scores(self, buffer, q_blk, k_t, i0, i1, j0, j1, n, g, prescaled=False):
        """Base-2 scores of one tile, written into ``buffer``: (n, g * nq, nk) and a
        (n, g, nq, nk) view. ``log2(e) * (scale * Q K^T + bias)``, -inf where masked.
        ``prescaled``: q_blk is already multiplied by ``scale * log2(e)`` (the fast
        path's [q * c, -m] rows against [k, 1] columns, which yield scores - m)."""
        nq, nk = i1 - i0, j1 - j0
        s_flat = buffer[: n * g * nq * nk].view(n, g * nq, nk)
        alpha = 1.0 if prescaled else self.scale * _LOG2E
        torch.baddbmm(
            s_flat, q_blk, k_t[:, :, j0:j1], beta=0, alpha=alpha, out=s_flat
        )  # (n, g*nq, E) @ (n, E, nk) -> (n, g*nq, nk)
        s = s_flat.view(n, g, nq, nk)
        masks = self.masks
        if masks.bias is not None:
            s.add_(masks.tile(masks.bias, slice(i0, i1), slice(j0, j1), n, g), alpha=_LOG2E)
        allowed = _tile_allowed(masks, i0, i1, j0, j1, n, g, self.is_causal, self.diagonal, q_blk.device)
        if allowed is not None:
            s.masked_fill_(~allowed, -math.inf)
        return s_flat, s


def _attend(q, k, v, masks, is_causal, diagonal, scale, block_q, block_k):
    """Dispatch: q (n, g, L, E), k (n, S, E), v (n, S, Ev) -> (n, g, L, Ev).

    Without gradients the loop runs directly and saves nothing; with them it
    runs inside :class:`_TiledAttention`, which saves q, k, v, the output and
    the per-row log-sum-exp for the backward pass.
    """
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise TypeError(f"diagonal must be an int, got {type(diagonal).__name__}")
    E = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(E) if E > 0 else 1.0  # E = 0: every score is 0, as torch
    plan = _Plan(masks, is_causal, diagonal, float(scale), block_q, block_k)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _TiledAttention.apply(q, k, v, plan)
    out, _ = _forward(q, k, v, plan)
    return out.to(q.dtype)


def _forward(q, k, v, plan):
    """The forward loop. q (n, g, L, E): g query heads share each of the n
    key/value heads; k (n, S, E); v (n, S, Ev).

    Returns ``out`` (n, g, L, Ev) in the working dtype (float32 for float16 and
    bfloat16 inputs) and ``lse2`` (n, g, L, 1), the base-2 log-sum-exp of every
    score row (``+inf`` for a row with no allowed key, so that the backward's
    ``exp2(s - lse2)`` is 0 there).

    Two paths through :func:`_fold_tile`. The exact one (every tile of
    :func:`tile_step`; here the first tiles of a block of rows, until each row
    has seen an allowed key) takes the tile's maximum, subtracts it and
    rescales the past. The fast one (``settled``, every later tile) lets the
    matmul subtract the reference maximum ``m`` and keeps ``m``: one pass over
    the tile (exp2) and a row sum instead of four passes, which matters when a
    tile (8 heads x 512 x 512 x 4 bytes = 8 MB) is larger than the cache. A
    tile whose scores overshoot ``m`` (a sum above ``_SETTLED_LIMIT``) is
    recomputed on the exact path. Tiles under ``_FAST_PATH_MIN_SCORES`` scores
    always take the exact path.
    """
    work = torch.float32 if q.dtype in _LOW_PRECISION else q.dtype
    q, k, v = q.to(work), k.to(work), v.to(work)  # no copy unless upcast
    n, g, L, E = q.shape
    S, Ev = k.shape[1], v.shape[2]
    out = torch.zeros(n, g, L, Ev, dtype=work, device=q.device)
    lse2 = torch.full((n, g, L, 1), math.inf, dtype=work, device=q.device)
    if L == 0 or S == 0:
        return out, lse2
    bq, bk = min(plan.block_q, L), min(plan.block_k, S)
    k_t = k.transpose(1, 2)  # (n, E, S): the matmul reads it as K^T
    # The fast path's keys: K with a column of ones, so that a query row
    # [q * scale * log2(e), -m] gives the base-2 score minus m in the matmul itself.
    k1_t = torch.cat([k, k.new_ones(n, S, 1)], dim=-1).transpose(1, 2)  # (n, E + 1, S)
    # One score buffer for the whole call, reused by every tile.
    buffer = torch.empty(n * g * bq * bk, dtype=work, device=q.device)
    fast = buffer.numel() >= _FAST_PATH_MIN_SCORES  # tiles worth the fast path

    for i0 in range(0, L, bq):
        i1 = min(i0 + bq, L)
        nq = i1 - i0
        q_blk = q[:, :, i0:i1].reshape(n, g * nq, E)  # the g heads of a group stacked
        q1_blk = torch.cat([q_blk * (plan.scale * _LOG2E), q_blk.new_zeros(n, g * nq, 1)], dim=-1)
        m = torch.full((n, g, nq, 1), -math.inf, dtype=work, device=q.device)
        l = torch.zeros(n, g, nq, 1, dtype=work, device=q.device)
        # A contiguous accumulator: a strided slice of `out` would make baddbmm_ fall
        # back to one small matmul per batch-head.
        acc_flat = torch.zeros(n, g * nq, Ev, dtype=work, device=q.device)
        acc = acc_flat.view(n, g, nq, Ev)
        settled = False  # every row has seen an allowed key (l > 0): the fast path
        for j0 in range(0, plan.key_end(i1, S), bk):
            j1 = min(j0 + bk, S)
            fold = dict(base2=True, acc_flat=acc_flat)
            if settled:  # scores - m from the matmul; m stays unless the tile overshoots
                _, s = plan.scores(buffer, q1_blk, k1_t, i0, i1, j0, j1, n, g, prescaled=True)
                if _fold_tile(m, l, acc, s, v[:, j0:j1], settled=True, **fold):
                    continue
            _, s = plan.scores(buffer, q_blk, k_t, i0, i1, j0, j1, n, g)
            _fold_tile(m, l, acc, s, v[:, j0:j1], **fold)  # moves m
            settled = fast and bool((l > 0).all())  # False while a row has no allowed key, or NaN
            if settled:
                q1_blk[:, :, E:] = -m.view(n, g * nq, 1)  # the reference the fast path subtracts
        # Rows that never saw an allowed key have l = 0 and acc = 0: output 0.
        empty = l == 0
        acc.div_(l.masked_fill(empty, 1.0))
        lse2[:, :, i0:i1] = (m + torch.log2(l)).masked_fill_(empty, math.inf)
        out[:, :, i0:i1] = acc
    return out, lse2


def _backward(q, k, v, out, lse2, grad_out, plan):
    """FlashAttention-2's backward, tile by tile; returns (dq, dk, dv).

    For every tile the probabilities are recomputed, ``P = exp2(S2 - lse2)``,
    and with ``D = rowsum(dO * O)``::

        dV += P^T dO;  dP = dO V^T;  dS = P * (dP - D);
        dQ += dS K * scale;  dK += dS^T Q * scale

    Only two tile buffers (P and dS) exist at any time.
    """
    work = torch.float32 if q.dtype in _LOW_PRECISION else q.dtype
    q, k, v = q.to(work), k.to(work), v.to(work)
    out, grad_out = out.to(work), grad_out.to(work)
    n, g, L, E = q.shape
    S, Ev = k.shape[1], v.shape[2]
    dq = torch.zeros_like(q)
    if L == 0 or S == 0:
        return dq, torch.zeros_like(k), torch.zeros_like(v)
    bq, bk = min(plan.block_q, L), min(plan.block_k, S)
    k_t, v_t = k.transpose(1, 2), v.transpose(1, 2)  # (n, E, S), (n, Ev, S)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # D = rowsum(dO * O): (n, g, L, 1)
    p_buffer = torch.empty(n * g * bq * bk, dtype=work, device=q.device)
    ds_buffer = torch.empty_like(p_buffer)
    # dK and dV block-major, (key block, n, bk, dim): every full block is contiguous, so
    # baddbmm_ runs as one batched matmul (into a strided slice of (n, S, dim) it would
    # fall back to one small matmul per batch-head).
    n_kb = -(-S // bk)
    dk_blocks = torch.zeros(n_kb, n, bk, E, dtype=work, device=q.device)
    dv_blocks = torch.zeros(n_kb, n, bk, Ev, dtype=work, device=q.device)

    for i0 in range(0, L, bq):
        i1 = min(i0 + bq, L)
        nq = i1 - i0
        q_blk = q[:, :, i0:i1].reshape(n, g * nq, E)  # the g heads of a group stacked
        do_blk = grad_out[:, :, i0:i1].reshape(n, g * nq, Ev)
        lse_blk = lse2[:, :, i0:i1].reshape(n, g * nq, 1)
        d_blk = delta[:, :, i0:i1].reshape(n, g * nq, 1)
        dq_blk = torch.zeros(n, g * nq, E, dtype=work, device=q.device)
        for j0 in range(0, plan.key_end(i1, S), bk):
            j1 = min(j0 + bk, S)
            dk_j, dv_j = dk_blocks[j0 // bk, :, : j1 - j0], dv_blocks[j0 // bk, :, : j1 - j0]
            p, _ = plan.scores(p_buffer, q_blk, k_t, i0, i1, j0, j1, n, g)
            p.sub_(lse_blk).exp2_()  # P, (n, g*nq, nk); 0 where masked
            dv_j.baddbmm_(p.transpose(1, 2), do_blk)  # dV += P^T dO
            ds = ds_buffer[: p.numel()].view_as(p)
            torch.baddbmm(ds, do_blk, v_t[:, :, j0:j1], beta=0, out=ds)  # dP = dO V^T
            ds.sub_(d_blk).mul_(p)  # dS = P * (dP - D)
            dq_blk.baddbmm_(ds, k[:, j0:j1], alpha=plan.scale)  # dQ += dS K * scale
            dk_j.baddbmm_(ds.transpose(1, 2), q_blk, alpha=plan.scale)  # dK += dS^T Q * scale
        dq[:, :, i0:i1] = dq_blk.view(n, g, nq, E)
    dk = dk_blocks.transpose(0, 1).reshape(n, n_kb * bk, E)[:, :S]
    dv = dv_blocks.transpose(0, 1).reshape(n, n_kb * bk, Ev)[:, :S]
    return dq, dk, dv


class _TiledAttention(torch.autograd.Function):
    """Tiled attention with a memory-efficient backward (FlashAttention-2).

    Saves q, k, v, the output and the per-row log-sum-exp: O(L + S) numbers,
    never a score tile.
    """

    @staticmethod
    def forward(ctx, q, k, v, plan):
        out, lse2 = _forward(q, k, v, plan)
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse2)
        ctx.plan = plan
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "tiled_attention supports one backward pass, not double backward "
                "(create_graph=True): its backward recomputes the tiles without recording "
                "a graph. Use torch.nn.functional.scaled_dot_product_attention for "
                "higher-order gradients."
            )
        q, k, v, out, lse2 = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse2, grad_out, ctx.plan)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def _tile_allowed(masks, i0, i1, j0, j1, n, g, is_causal, diagonal, device):
    """Bool tile (broadcastable to (n, g, i1-i0, j1-j0)) or None when all allowed."""
    allowed = None
    for mask in masks.allowed:
        t = masks.tile(mask, slice(i0, i1), slice(j0, j1), n, g)
        allowed = t if allowed is None else allowed & t
    # Causal: the tile needs a mask only if its last key lies beyond its first
    # query's diagonal, i.e. the tile straddles the diagonal.
    if is_causal and j1 - 1 > i0 + diagonal:
        rows = torch.arange(i0, i1, device=device)[:, None]
        cols = torch.arange(j0, j1, device=device)[None, :]
        causal = cols <= rows + diagonal
        allowed = causal if allowed is None else allowed & causal
    return allowed


def _prepare_masks(fn, attn_mask, key_mask, batch, L, S, query) -> _Masks:
    allowed, bias = [], None
    full = (*batch, L, S)
    if attn_mask is not None:
        check_mask_tensor(fn, "attn_mask", attn_mask)  # bool or float tensor: attention's rule
        check_mask(fn, "attn_mask", attn_mask.shape, full)
        mask = attn_mask.reshape((1,) * (len(full) - attn_mask.dim()) + tuple(attn_mask.shape))
        mask = mask.expand(*batch, *mask.shape[-2:])
        if mask.dtype == torch.bool:
            allowed.append(mask)
        else:  # a float mask, added to the scores
            work = torch.float32 if query.dtype in _LOW_PRECISION else query.dtype
            bias = mask.detach().to(work)
    if key_mask is not None:
        mask = expand_key_mask(key_mask, tuple(batch), S, fn=fn)  # (B or 1, 1, ..., 1, S): one key mask rule
        mask = mask.reshape((1,) * (len(full) - mask.dim()) + tuple(mask.shape))
        allowed.append(mask.expand(*batch, 1, S))
    return _Masks(allowed=allowed, bias=bias, batch=tuple(batch))


def _check_qkv(fn, query, key, value):
    """Validate through attnlib._validate (the same errors as attnlib.attention)."""
    tensors = {"query": query, "key": key, "value": value}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    check_floating(fn, [(name, str(t.dtype), t.is_floating_point()) for name, t in tensors.items()])
    batch, L, S = check_attention(fn, query.shape, key.shape, value.shape)
    return tuple(batch), L, S, query.shape[-1], value.shape[-1]


# ---------------------------------------------------------------------------
# 4. Multi-query and grouped-query attention
# ---------------------------------------------------------------------------


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat key/value heads: (B, Hkv, S, d) -> (B, Hkv * n_rep, S, d).

    Head ``h`` of the result is head ``h // n_rep`` of the input (the grouping
    of ``torch.nn.functional.scaled_dot_product_attention(enable_gqa=True)``).
    This copies; :func:`grouped_query_attention` does not need it.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"repeat_kv: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"repeat_kv: expected x of shape (B, Hkv, S, d), got {tuple(x.shape)}")
    if isinstance(n_rep, bool) or not isinstance(n_rep, int):
        raise TypeError(f"repeat_kv: n_rep must be an int, got {type(n_rep).__name__}")
    if n_rep < 1:
        raise ValueError(f"repeat_kv: n_rep must be a positive int (copies of each head), got {n_rep}")
    return x.repeat_interleave(n_rep, dim=1)


def grouped_query_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args, **kwargs
) -> torch.Tensor:
    """Grouped-query attention (GQA); multi-query attention (MQA) when ``Hkv == 1``.

    The same as ``tiled_attention(query, key, value, ..., enable_gqa=True)``
    (see ``enable_gqa`` there): query ``(B, Hq, L, E)``, key ``(B, Hkv, S, E)``,
    value ``(B, Hkv, S, Ev)`` -> ``(B, Hq, L, Ev)``; every other argument as
    in :func:`tiled_attention`.
    """
    return tiled_attention(query, key, value, *args, enable_gqa=True, **kwargs)


# ---------------------------------------------------------------------------
# 5. KV cache for incremental decoding
# ---------------------------------------------------------------------------


def kv_cache_bytes(
    layers: int,
    batch: int,
    kv_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: torch.dtype | int = torch.float32,
) -> int:
    """Bytes held by a KV cache: ``2 * layers * batch * kv_heads * seq_len * head_dim * b``.

    The 2 counts keys and values; ``b`` is the size of one element (from
    ``dtype``, or pass the number of bytes directly).
    """
    sizes = {"layers": layers, "batch": batch, "kv_heads": kv_heads, "seq_len": seq_len, "head_dim": head_dim}
    layers, batch, kv_heads, seq_len, head_dim = (
        check_length("kv_cache_bytes", n, x) for n, x in sizes.items()
    )
    if isinstance(dtype, torch.dtype):
        nbytes = torch.empty((), dtype=dtype).element_size()
    elif isinstance(dtype, int) and not isinstance(dtype, bool) and dtype > 0:
        nbytes = dtype
    else:
        raise ValueError(
            f"kv_cache_bytes: dtype must be a torch.dtype or a positive byte count, got {dtype!r}"
        )
    return 2 * layers * batch * kv_heads * seq_len * head_dim * nbytes


class KVCache:
    """Keys and values of the tokens decoded so far, for one attention layer.

    Storage is allocated once, ``(batch, kv_heads, capacity, head_dim)`` for
    keys and ``(..., value_dim)`` for values; :meth:`append` writes new
    positions in place, so decoding ``T`` tokens costs no reallocation.

    >>> cache = KVCache(batch=1, kv_heads=2, capacity=16, head_dim=4)
    >>> k, v = cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    >>> k.shape, len(cache)
    (torch.Size([1, 2, 3, 4]), 3)
    """

    def __init__(
        self,
        batch: int,
        kv_heads: int,
        capacity: int,
        head_dim: int,
        value_dim: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        value_dim = head_dim if value_dim is None else value_dim
        sizes = {
            "batch": batch,
            "kv_heads": kv_heads,
            "capacity": capacity,
            "head_dim": head_dim,
            "value_dim": value_dim,
        }
        batch, kv_heads, capacity, head_dim, value_dim = (
            check_positive_int("KVCache", n, x) for n, x in sizes.items()
        )
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"KVCache: dtype must be a floating point torch.dtype, got {dtype!r}")
        self._k = torch.zeros(batch, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self._v = torch.zeros(batch, kv_heads, capacity, value_dim, dtype=dtype, device=device)
        self.length = 0

    @property
    def capacity(self) -> int:
        return self._k.shape[2]

    def __len__(self) -> int:
        return self.length

    @property
    def keys(self) -> torch.Tensor:
        """The cached keys, (batch, kv_heads, len, head_dim) (a view)."""
        return self._k[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor:
        """The cached values, (batch, kv_heads, len, value_dim) (a view)."""
        return self._v[:, :, : self.length]

    @property
    def nbytes(self) -> int:
        """Bytes allocated for keys and values (at full capacity)."""
        return self._k.nbytes + self._v.nbytes

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``t`` new positions; key (B, Hkv, t, d), value (B, Hkv, t, dv).

        Returns the views ``(keys, values)`` of everything cached so far.
        """
        self._check_append(key, value)
        t = key.shape[2]
        self._k[:, :, self.length : self.length + t] = key
        self._v[:, :, self.length : self.length + t] = value
        self.length += t
        return self.keys, self.values

    def _check_append(self, key, value) -> None:
        """Raise (and change nothing) unless ``append(key, value)`` would succeed."""
        B, H, _, d = self._k.shape
        dv = self._v.shape[-1]
        if (
            not isinstance(key, torch.Tensor)
            or not isinstance(value, torch.Tensor)
            or key.dim() != 4
            or value.dim() != 4
            or key.shape[:2] != (B, H)
            or key.shape[3] != d
            or value.shape[:3] != key.shape[:3]
            or value.shape[3] != dv
        ):
            got = [tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__ for x in (key, value)]
            raise ValueError(
                f"KVCache.append: expected key ({B}, {H}, t, {d}) and value ({B}, {H}, t, {dv}); "
                f"got key {got[0]}, value {got[1]}"
            )
        t = key.shape[2]
        if self.length + t > self.capacity:
            raise ValueError(
                f"KVCache.append: full, {self.length} + {t} positions exceed capacity {self.capacity}"
            )
        if not key.is_floating_point() or not value.is_floating_point():
            raise TypeError(f"KVCache: key and value must be floating point, got {key.dtype}, {value.dtype}")

    def reset(self) -> None:
        """Forget every position (the storage is kept)."""
        self.length = 0

    def __repr__(self) -> str:
        B, H, cap, d = self._k.shape
        return (
            f"KVCache(batch={B}, kv_heads={H}, len={self.length}/{cap}, head_dim={d}, "
            f"dtype={self._k.dtype}, nbytes={self.nbytes})"
        )


def decode_step(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cache: KVCache,
    scale: float | None = None,
) -> torch.Tensor:
    """One step of incremental decoding: cache the new keys/values, then attend.

    Parameters
    ----------
    query : (B, Hq, t, E) the new position(s), usually ``t = 1``
    key : (B, Hkv, t, E), value : (B, Hkv, t, Ev) their keys and values
    cache : KVCache holding the ``P`` earlier positions
    scale : float, default ``1 / sqrt(E)``

    Returns
    -------
    (B, Hq, t, Ev): new query ``i`` (absolute position ``P + i``) attends the
    cached keys ``0 .. P + i``: causal attention aligned to the lower right
    (``diagonal = P``). ``Hq`` may be a multiple of ``Hkv`` (MQA/GQA).
    """
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    if (
        not isinstance(query, torch.Tensor)
        or query.dim() != 4
        or not isinstance(key, torch.Tensor)
        or key.dim() != 4
        or query.shape[2] != key.shape[2]
    ):
        raise ValueError(
            "decode_step: expected query (B, Hq, t, E) and key (B, Hkv, t, E) with the same t; got "
            f"query {tuple(getattr(query, 'shape', ()))}, key {tuple(getattr(key, 'shape', ()))}"
        )
    B, Hkv, _, E = cache._k.shape
    Hq = query.shape[1]
    if query.shape[0] != B or query.shape[3] != E or Hq == 0 or Hq % Hkv != 0:
        raise ValueError(
            f"decode_step: query {tuple(query.shape)} must be (B, Hq, t, E) = ({B}, Hq, t, {E}) "
            f"with Hq a multiple of the cache's Hkv = {Hkv}"
        )
    dtypes = (query.dtype, key.dtype, getattr(value, "dtype", type(value)), cache._k.dtype)
    if len(set(dtypes)) != 1:
        raise TypeError(
            "decode_step: query, key, value and the cache must share one dtype, "
            f"got {', '.join(map(str, dtypes))}"
        )
    if not query.is_floating_point():
        raise TypeError(f"decode_step: query must be floating point, got {query.dtype}")
    # Validate the cache's part (shapes, capacity) before anything is written, so that
    # a refused call leaves the cache as it was.
    cache._check_append(key, value)
    past = len(cache)
    keys, values = cache.append(key, value)
    return tiled_attention(query, keys, values, is_causal=True, scale=scale, enable_gqa=True, diagonal=past)
