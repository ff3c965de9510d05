"""Tiled attention: the online softmax over tiles, with FlashAttention-2's backward.

:func:`tiled_attention` validates its arguments once and packs them into a
:class:`_Plan` (masks, causality, scale, tile sizes); the forward loop
(:func:`_forward`), the backward loop (:func:`_backward`) and the autograd
function between them (:class:`_TiledAttention`) read everything from it.
A tile is folded by :func:`_fold_exact` (the online-softmax update of
:func:`attnlib.efficient.online_update_`, in base 2) or, once every row of a
block has seen an allowed key and the tiles are large, by
:func:`_fold_settled` (no rescaling: see :func:`_forward`).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch

from attnlib._tensors import check_floating_tensors, check_tensors, work_dtype
from attnlib._validate import (
    check_attention,
    check_flag,
    check_integer,
    check_mask,
    check_positive_int,
    scale_or_default,
)
from attnlib.efficient import online
from attnlib.masks import check_mask_tensor, expand_key_mask

__all__ = ["grouped_query_attention", "tiled_attention"]

DEFAULT_BLOCK_Q = 512
DEFAULT_BLOCK_K = 512

_LOG2E = 1.0 / math.log(2.0)  # scores times log2(e) turn exp(x) into the cheaper exp2(x)

# The fast path of tiled_attention folds a tile without rescaling when its
# exp2(s - m) sum stays below this: m may then lag behind the true running
# maximum, which is exact (acc / l does not depend on m) and safe in float32.
_SETTLED_LIMIT = 2.0**16
# ... and only on tiles of at least this many scores (256 KB in float32): the
# saving is memory traffic over tiles larger than the cache; small problems
# (the chapter's examples) run the exact update, to the last bit as printed.
_FAST_PATH_MIN_SCORES = 2**16


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
    query : torch.Tensor
        ``(..., L, E)``.
    key : torch.Tensor
        ``(..., S, E)``.
    value : torch.Tensor
        ``(..., S, Ev)``; leading dimensions broadcast against each other; float16 and bfloat16
        are computed in float32 (running maximum, sum and output, as
        FlashAttention does) and the output is cast back
    attn_mask : torch.Tensor, optional
        Broadcastable to ``(..., L, S)``: bool (True = may attend) or float (added to the scores; it receives
        no gradient)
    key_mask : torch.Tensor, optional
        bool ``(B, S)`` or ``(S,)``: a padding mask, True = a real token; ``B`` is ``query.shape[0]`` and the
        mask is broadcast over every other leading dimension (e.g. heads)
    is_causal : bool, default False
        Query ``i`` may attend key ``j`` only when ``j <= i + diagonal``;
        key blocks entirely above that diagonal are skipped, not computed
    scale : float, optional
        Default ``1 / sqrt(E)``.
    enable_gqa : bool, default False
        Grouped-query attention, as the flag of torch's SDPA: query
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
        With ``is_causal``, query ``i`` may attend key ``j <= i + diagonal``.
        ``0`` is the top-left alignment of torch's ``is_causal``; ``S - L`` is
        the lower-right alignment used when decoding with a KV cache. For
        ``L = 2``, ``S = 4`` (1 = may attend)::

            diagonal=0    diagonal=S-L=2
            1 0 0 0       1 1 1 0
            1 1 0 0       1 1 1 1
    block_q, block_k : int, default 512
        Tile sizes (any positive integers; they need not divide L or S).

    Returns
    -------
    torch.Tensor
        ``(..., L, Ev)``, the dtype of ``query``. A query row with no key it may
        attend (also when ``S = 0``) gets an all-zero output and zero gradients;
        ``L = 0`` gives an empty output; ``E = 0`` gives every key the same
        weight, as torch.

    Differentiable: the backward pass (FlashAttention-2, Dao 2023) recomputes
    every tile's probabilities from the saved per-row log-sum-exp instead of
    storing them; it supports one backward pass (no double backward).

    Examples
    --------
    >>> q, k, v = (torch.randn(2, 3, 10, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    >>> out = tiled_attention(q, k, v, is_causal=True, block_q=4, block_k=3)
    >>> reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> out.shape, bool((out - reference).abs().max() < 1e-5)
    (torch.Size([2, 3, 10, 4]), True)
    """
    gqa = check_flag("tiled_attention", "enable_gqa", enable_gqa)
    fn = "tiled_attention(enable_gqa=True)" if gqa else "tiled_attention"
    # q (n, g, L, E): the g query heads that share one of the n key/value heads
    q, k, v, mask_batch, out_batch = (_group_heads if gqa else _flat_heads)(fn, query, key, value)
    plan = _Plan.build(
        fn, q, k, mask_batch, attn_mask=attn_mask, key_mask=key_mask, is_causal=is_causal,
        diagonal=diagonal, scale=scale, block_q=block_q, block_k=block_k,
    )  # fmt: skip
    return _attend(q, k, v, plan).reshape(*out_batch, q.shape[-2], v.shape[-1])


def grouped_query_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args, **kwargs
) -> torch.Tensor:
    """Grouped-query attention (GQA); multi-query attention (MQA) when ``Hkv == 1``.

    The same as ``tiled_attention(query, key, value, ..., enable_gqa=True)``:
    the ``Hq / Hkv`` query heads of a group share one key/value head.

    Parameters
    ----------
    query : torch.Tensor
        ``(B, Hq, L, E)``.
    key : torch.Tensor
        ``(B, Hkv, S, E)``, ``Hq`` a multiple of ``Hkv``.
    value : torch.Tensor
        ``(B, Hkv, S, Ev)``.
    attn_mask, key_mask, is_causal, scale, diagonal, block_q, block_k
        As in :func:`tiled_attention`, in the same places: the signature is
        tiled_attention's without ``enable_gqa`` (derived from it, not copied).

    Returns
    -------
    torch.Tensor
        ``(B, Hq, L, Ev)``.

    Examples
    --------
    >>> q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    >>> grouped_query_attention(q, k, v).shape
    torch.Size([1, 4, 3, 8])
    """
    try:
        bound = _GQA_SIGNATURE.bind(query, key, value, *args, **kwargs)
    except TypeError as err:  # e.g. enable_gqa, which this function sets itself
        raise TypeError(f"grouped_query_attention: {err}") from None
    return tiled_attention(*bound.args, **bound.kwargs, enable_gqa=True)


# grouped_query_attention takes every parameter of tiled_attention but enable_gqa, in the
# same places: its signature is derived from tiled_attention's instead of being written out
# again, so the two cannot drift apart. help(), the API page and the binding above read it.
_TILED_SIGNATURE = inspect.signature(tiled_attention)
_GQA_SIGNATURE = _TILED_SIGNATURE.replace(
    parameters=[p for p in _TILED_SIGNATURE.parameters.values() if p.name != "enable_gqa"]
)
grouped_query_attention.__signature__ = _GQA_SIGNATURE


def _flat_heads(fn, query, key, value):
    """Every query head has its own key/value head (g = 1): leading dims broadcast and flatten.

    Returns q (n, 1, L, E), k (n, S, E), v (n, S, Ev), the masks' batch shape and the output's.
    """
    batch, L, S, E, Ev = _check_qkv(fn, query, key, value)
    n = math.prod(batch)
    q = query.expand(*batch, L, E).reshape(n, 1, L, E)
    k = key.expand(*batch, S, E).reshape(n, S, E)
    v = value.expand(*batch, S, Ev).reshape(n, S, Ev)
    return q, k, v, batch, batch


def _group_heads(fn, query, key, value):
    """``enable_gqa=True``: (B, Hq, L, E) queries over (B, Hkv, S, E) keys, Hq / Hkv per group.

    Returns q (B * Hkv, Hq / Hkv, L, E), k (B * Hkv, S, E), v (B * Hkv, S, Ev), the masks'
    batch shape (B, Hq) and the output's.
    """
    check_tensors(fn, query=query, key=key, value=value)
    for name, t in (("query", query), ("key", key), ("value", value)):
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
    _, L, S, E, Ev = _check_qkv(fn, query[:, :1], key, value)
    n, g = B * Hkv, Hq // Hkv
    return query.reshape(n, g, L, E), key.reshape(n, S, E), value.reshape(n, S, Ev), (B, Hq), (B, Hq)


def _check_qkv(fn, query, key, value):
    """Validate through attnlib._validate (the same errors as attnlib.attention)."""
    check_floating_tensors(fn, query=query, key=key, value=value)
    batch, L, S = check_attention(fn, query.shape, key.shape, value.shape)
    return tuple(batch), L, S, query.shape[-1], value.shape[-1]


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


@dataclass(frozen=True)
class _Plan:
    """Everything the forward and the backward loops share about one call, validated."""

    masks: _Masks
    is_causal: bool
    diagonal: int
    scale: float
    block_q: int
    block_k: int

    @classmethod
    def build(
        cls, fn, q, k, mask_batch, *, attn_mask, key_mask, is_causal, diagonal, scale, block_q, block_k
    ):
        """Check the options of ``fn`` (q (n, g, L, E), k (n, S, E)) and pack them.

        The masks broadcast to ``(*mask_batch, L, S)``.
        """
        L, E, S = q.shape[-2], q.shape[-1], k.shape[-2]
        masks = _prepare_masks(fn, attn_mask, key_mask, mask_batch, L, S, q)
        block_q, block_k = (
            check_positive_int(fn, "block_q", block_q),
            check_positive_int(fn, "block_k", block_k),
        )
        is_causal = check_flag(fn, "is_causal", is_causal)
        diagonal = check_integer(fn, "diagonal", diagonal)
        scale = scale_or_default(fn, scale, E)
        return cls(masks, is_causal, diagonal, scale, block_q, block_k)

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
        allowed = _tile_allowed(self, i0, i1, j0, j1, n, g, q_blk.device)
        if allowed is not None:
            s.masked_fill_(~allowed, -math.inf)
        return s_flat, s


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
            work = work_dtype(query.dtype)
            bias = mask.detach().to(work)
    if key_mask is not None:
        mask = expand_key_mask(key_mask, tuple(batch), S, fn=fn)  # (B or 1, 1, ..., 1, S): one key mask rule
        mask = mask.reshape((1,) * (len(full) - mask.dim()) + tuple(mask.shape))
        allowed.append(mask.expand(*batch, 1, S))
    return _Masks(allowed=allowed, bias=bias, batch=tuple(batch))


def _tile_allowed(plan, i0, i1, j0, j1, n, g, device):
    """Bool tile (broadcastable to (n, g, i1-i0, j1-j0)) or None when all allowed."""
    masks, is_causal, diagonal = plan.masks, plan.is_causal, plan.diagonal
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


def _attend(q, k, v, plan):
    """Dispatch: q (n, g, L, E), k (n, S, E), v (n, S, Ev) -> (n, g, L, Ev).

    Without gradients the loop runs directly and saves nothing; with them it
    runs inside :class:`_TiledAttention`, which saves q, k, v, the output and
    the per-row log-sum-exp for the backward pass.
    """
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _TiledAttention.apply(q, k, v, plan)
    out, _ = _forward(q, k, v, plan)
    return out.to(q.dtype)


# ---------------------------------------------------------------------------
# Folding one tile into the running state: the exact update and the fast one
# ---------------------------------------------------------------------------


def _fold_exact(m, l, acc, acc_flat, s, v) -> None:
    """The online-softmax update of a tile of base-2 scores ``s`` (n, g, nq, nk).

    :func:`attnlib.efficient.online_update_` with exp2 and one batched
    ``acc += p @ v`` into ``acc_flat``, the (n, g * nq, Ev) view of ``acc``
    (no temporary). Moves ``m`` to the tile's maximum.
    """
    online.online_rescale_(m, l, acc, s, torch.Tensor.exp2_)  # s becomes p = exp2(s - m_new)
    acc_flat.baddbmm_(s.view(*acc_flat.shape[:-1], s.shape[-1]), v)


def _fold_settled(l, acc_flat, s, v) -> bool:
    """The fast path: ``s`` already holds base-2 scores minus the reference ``m``.

    Every row has seen an allowed key (``l > 0``), so ``m`` need not move:
    ``acc / l`` does not depend on it. Adds ``exp2(s)`` to ``l`` and ``acc``
    and returns True; returns False, having changed only ``s``, when a row's
    tile sum exceeds ``_SETTLED_LIMIT`` (``m`` lags too far behind): the caller
    then redoes the tile with :func:`_fold_exact`.
    """
    tile_sum = s.exp2_().sum(dim=-1, keepdim=True)  # p = exp2(s - m)
    if (tile_sum > _SETTLED_LIMIT).any():
        return False
    l.add_(tile_sum)
    acc_flat.baddbmm_(s.view(*acc_flat.shape[:-1], s.shape[-1]), v)
    return True


def _forward(q, k, v, plan):
    """The forward loop. q (n, g, L, E): g query heads share each of the n
    key/value heads; k (n, S, E); v (n, S, Ev).

    Returns ``out`` (n, g, L, Ev) in the working dtype (float32 for float16 and
    bfloat16 inputs) and ``lse2`` (n, g, L, 1), the base-2 log-sum-exp of every
    score row (``+inf`` for a row with no allowed key, so that the backward's
    ``exp2(s - lse2)`` is 0 there).

    Two ways to fold a tile. The exact one, :func:`_fold_exact` (the update of
    :func:`attnlib.efficient.online_update_`; here the first tiles of a block
    of rows, until each row has seen an allowed key), takes the tile's maximum,
    subtracts it and rescales the past. The fast one, :func:`_fold_settled`
    (every later tile), lets the matmul subtract the reference maximum ``m``
    and keeps ``m``: one pass over the tile (exp2) and a row sum instead of
    four passes, which matters when a tile (8 heads x 512 x 512 x 4 bytes =
    8 MB) is larger than the cache. A tile whose scores overshoot ``m`` (a sum
    above ``_SETTLED_LIMIT``) is recomputed on the exact path. Tiles under
    ``_FAST_PATH_MIN_SCORES`` scores always take the exact path.
    """
    work = work_dtype(q.dtype)
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
            if settled:  # scores - m from the matmul; m stays unless the tile overshoots
                _, s = plan.scores(buffer, q1_blk, k1_t, i0, i1, j0, j1, n, g, prescaled=True)
                if _fold_settled(l, acc_flat, s, v[:, j0:j1]):
                    continue
            _, s = plan.scores(buffer, q_blk, k_t, i0, i1, j0, j1, n, g)
            _fold_exact(m, l, acc, acc_flat, s, v[:, j0:j1])  # moves m
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
    work = work_dtype(q.dtype)
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
