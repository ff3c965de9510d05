"""Efficient attention (a package): the online softmax, tiled attention, a KV cache, MQA/GQA.

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

The package has three modules, one idea each:

``attnlib.efficient.online``
    online_softmax_update, online_softmax_numpy, online_attention_row_numpy:
    the online softmax in NumPy, one query row, block by block;
    online_update_: the same update on PyTorch tensors, a tile of rows at a time
    (its rescaling, online_rescale_, is shared with the tiled loop);
    tile_step: one tile of tiled attention (update of ``m``, ``l``, ``acc``)
``attnlib.efficient.tiled``
    tiled_attention:
    tiled attention with an online softmax, the drop-in for
    ``torch.nn.functional.scaled_dot_product_attention``; differentiable, with
    FlashAttention-2's backward (Dao 2023) that recomputes every tile from the
    saved per-row log-sum-exp instead of storing the scores;
    grouped_query_attention: multi-query and grouped-query attention
    (``tiled_attention(..., enable_gqa=True)``, the flag of torch's SDPA)
``attnlib.efficient.kv_cache``
    KVCache, decode_step, kv_cache_bytes: incremental decoding with a
    key/value cache, and its memory; repeat_kv: shared key/value heads as copies

Everything is imported from ``attnlib.efficient`` (and from ``attnlib``).
"""

from attnlib.efficient.kv_cache import KVCache, decode_step, kv_cache_bytes, repeat_kv
from attnlib.efficient.online import (
    OnlineSoftmaxState,
    online_attention_row_numpy,
    online_rescale_,
    online_softmax_numpy,
    online_softmax_update,
    online_update_,
    tile_step,
)
from attnlib.efficient.tiled import grouped_query_attention, tiled_attention

__all__ = [
    "KVCache",
    "OnlineSoftmaxState",
    "decode_step",
    "grouped_query_attention",
    "kv_cache_bytes",
    "online_attention_row_numpy",
    "online_softmax_numpy",
    "online_rescale_",
    "online_softmax_update",
    "online_update_",
    "repeat_kv",
    "tile_step",
    "tiled_attention",
]
