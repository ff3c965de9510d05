"""The call table of attnlib's public functions with scalar arguments (issue 28).

``CALLS``: name -> a function returning (callable, positional args, keyword args).
Used by tests/library/test_numpy_scalars.py (NumPy scalars accepted wherever Python
ones are) and tests/library/test_devices.py (every public call on each device).
"""

from __future__ import annotations

import numpy as np
import torch

import attnlib
import attnlib.numpy as anp


def t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def a(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def _state():
    m, l = torch.full((1, 2, 1), -torch.inf), torch.zeros(1, 2, 1)
    return m, l, torch.zeros(1, 2, 3)


def _block():
    return attnlib.TransformerBlock(8, 2, 16)


# name -> a function returning (callable, positional args, keyword args); every
# scalar the callable takes is passed as a keyword, a Python bool, int or float.
CALLS = {
    # attnlib core
    "AdditiveAttention": lambda: (attnlib.AdditiveAttention, (), dict(query_dim=3, key_dim=4, hidden_dim=5)),
    "KVCache": lambda: (attnlib.KVCache, (), dict(batch=1, kv_heads=2, capacity=4, head_dim=3, value_dim=5)),
    "LearnedPositions": lambda: (attnlib.LearnedPositions, (), dict(max_len=6, d_model=4)),
    "MultiHeadAttention": lambda: (
        attnlib.MultiHeadAttention,
        (),
        dict(embed_dim=8, num_heads=2, dropout=0.25, bias=True, kdim=6, vdim=5),
    ),
    "PatchEmbedding": lambda: (attnlib.PatchEmbedding, (), dict(in_channels=2, patch_size=2, d_model=4)),
    "OnlineSoftmaxState": lambda: (attnlib.OnlineSoftmaxState, (), dict(m=0.5, l=2.0, seen=3)),
    "TransformerBlock": lambda: (
        attnlib.TransformerBlock,
        (),
        dict(
            d_model=8,
            num_heads=2,
            d_ff=16,
            dropout=0.25,
            norm_first=False,
            layer_norm_eps=2.0**-16,
            residual=True,
            layer_norm=True,
            feed_forward=False,
        ),
    ),
    "additive_scores": lambda: (attnlib.additive_scores, (t(2, 3), t(4, 5), t(6, 3), t(6, 5), t(6)), {}),
    "alibi_bias": lambda: (attnlib.alibi_bias, (), dict(num_heads=2, L=3, S=5, causal=False, query_offset=1)),
    "alibi_slopes": lambda: (attnlib.alibi_slopes, (), dict(num_heads=4)),
    "apply_rope": lambda: (attnlib.apply_rope, (t(3, 4),), dict(base=4096.0)),
    "attention_rollout": lambda: (
        attnlib.attention_rollout,
        (t(2, 1, 2, 3, 3).softmax(-1),),
        dict(residual=False),
    ),
    "as_additive_mask": lambda: (attnlib.as_additive_mask, (torch.tensor([True, False]),), {}),
    "causal_mask": lambda: (attnlib.causal_mask, (), dict(q_len=3, k_len=4, diagonal=-1)),
    "combine_masks": lambda: (attnlib.combine_masks, (torch.tensor([True, False]), None), {}),
    "cosine_scores": lambda: (attnlib.cosine_scores, (t(2, 3), t(4, 3)), dict(eps=2.0**-20)),
    "decode_step": lambda: (
        attnlib.decode_step,
        (t(1, 2, 1, 4), t(1, 2, 1, 4, seed=1), t(1, 2, 1, 4, seed=2), attnlib.KVCache(1, 2, 3, 4)),
        dict(scale=0.5),
    ),
    "dot_scores": lambda: (attnlib.dot_scores, (t(2, 3), t(4, 3)), {}),
    "general_scores": lambda: (attnlib.general_scores, (t(2, 3), t(4, 5), t(3, 5)), {}),
    "grouped_query_attention": lambda: (
        attnlib.grouped_query_attention,
        (t(1, 4, 3, 8), t(1, 2, 5, 8, seed=1), t(1, 2, 5, 8, seed=2)),
        dict(is_causal=True, scale=0.5, diagonal=2, block_q=2, block_k=3),
    ),
    "kv_cache_bytes": lambda: (
        attnlib.kv_cache_bytes,
        (),
        dict(layers=2, batch=1, kv_heads=4, seq_len=16, head_dim=8, dtype=2),
    ),
    "log_softmax": lambda: (attnlib.log_softmax, (t(2, 3),), dict(dim=0)),
    "logsumexp": lambda: (attnlib.logsumexp, (t(2, 3),), dict(dim=1, keepdim=True)),
    "masked_softmax": lambda: (
        attnlib.masked_softmax,
        (t(2, 3), torch.tensor([True, False, True])),
        dict(dim=-1),
    ),
    "merge_heads": lambda: (attnlib.merge_heads, (t(1, 2, 3, 4),), {}),
    "online_attention_row_numpy": lambda: (
        attnlib.online_attention_row_numpy,
        (a(4), a(6, 4, seed=1), a(6, 2, seed=2)),
        dict(block_size=4, scale=0.5),
    ),
    "online_rescale_": lambda: (attnlib.online_rescale_, (*_state(), t(1, 2, 4)), {}),
    "online_softmax_numpy": lambda: (attnlib.online_softmax_numpy, (a(7),), dict(block_size=3)),
    "online_softmax_update": lambda: (attnlib.online_softmax_update, (), dict(m=0.5, l=2.0, block=a(3))),
    "online_update_": lambda: (attnlib.online_update_, (*_state(), t(1, 2, 4), t(1, 4, 3)), {}),
    "padding_mask": lambda: (attnlib.padding_mask, ([1, 3],), dict(max_len=4)),
    "parameter_count": lambda: (
        attnlib.parameter_count,
        (),
        dict(embed_dim=8, num_heads=2, bias=False, kdim=6, vdim=5),
    ),
    "patchify": lambda: (attnlib.patchify, (t(2, 1, 4, 6),), dict(patch_size=2)),
    "repeat_kv": lambda: (attnlib.repeat_kv, (t(1, 2, 3, 4),), dict(n_rep=3)),
    "rope_angles": lambda: (attnlib.rope_angles, (torch.arange(3),), dict(dim=4, base=4096.0)),
    "scaled_dot_product_attention": lambda: (
        attnlib.scaled_dot_product_attention,
        (t(2, 3, 4), t(2, 5, 4, seed=1), t(2, 5, 6, seed=2)),
        dict(is_causal=True, scale=0.5, return_weights=True),
    ),
    "scaled_dot_scores": lambda: (attnlib.scaled_dot_scores, (t(2, 3), t(4, 3)), dict(scale=0.5)),
    "sinusoidal_encoding": lambda: (
        attnlib.sinusoidal_encoding,
        (),
        dict(n_positions=5, d_model=6, base=4096.0),
    ),
    "softmax": lambda: (attnlib.softmax, (t(2, 3),), dict(dim=0)),
    "split_heads": lambda: (attnlib.split_heads, (t(1, 3, 8),), dict(num_heads=2)),
    "tile_step": lambda: (
        attnlib.tile_step,
        (*_state(), t(1, 2, 4), t(1, 3, 4, seed=1), t(1, 3, 3)),
        dict(scale=0.5),
    ),
    "tiled_attention": lambda: (
        attnlib.tiled_attention,
        (t(2, 3, 4), t(2, 5, 4, seed=1), t(2, 5, 6, seed=2)),
        dict(is_causal=True, scale=0.5, enable_gqa=False, diagonal=1, block_q=2, block_k=3),
    ),
    "unpatchify": lambda: (attnlib.unpatchify, (t(2, 6, 4),), dict(patch_size=2, height=4, width=6)),
    # the NumPy mirrors
    "numpy.additive_scores": lambda: (anp.additive_scores, (a(2, 3), a(4, 5), a(6, 3), a(6, 5), a(6)), {}),
    "numpy.causal_mask": lambda: (anp.causal_mask, (), dict(q_len=3, k_len=4, diagonal=-1)),
    "numpy.cosine_scores": lambda: (anp.cosine_scores, (a(2, 3), a(4, 3)), dict(eps=2.0**-20)),
    "numpy.dot_scores": lambda: (anp.dot_scores, (a(2, 3), a(4, 3)), {}),
    "numpy.general_scores": lambda: (anp.general_scores, (a(2, 3), a(4, 5), a(3, 5)), {}),
    "numpy.log_softmax": lambda: (anp.log_softmax, (a(2, 3),), dict(dim=0)),
    "numpy.logsumexp": lambda: (anp.logsumexp, (a(2, 3),), dict(dim=1, keepdim=True)),
    "numpy.padding_mask": lambda: (anp.padding_mask, ([1, 3],), dict(max_len=4)),
    "numpy.scaled_dot_product_attention": lambda: (
        anp.scaled_dot_product_attention,
        (a(2, 3, 4), a(2, 5, 4, seed=1), a(2, 5, 6, seed=2)),
        dict(is_causal=True, scale=0.5, return_weights=True),
    ),
    "numpy.scaled_dot_scores": lambda: (anp.scaled_dot_scores, (a(2, 3), a(4, 3)), dict(scale=0.5)),
    "numpy.softmax": lambda: (anp.softmax, (a(2, 3),), dict(dim=0)),
    # methods with scalar options
    "MultiHeadAttention.forward": lambda: (
        attnlib.MultiHeadAttention(8, 2).eval(),
        (t(2, 3, 8), t(2, 4, 8, seed=1), t(2, 4, 8, seed=2)),
        dict(is_causal=True, need_weights=True, average_attn_weights=False),
    ),
    "TransformerBlock.forward": lambda: (_block().eval(), (t(2, 3, 8),), dict(is_causal=True)),
    "TransformerBlock.new_cache": lambda: (_block().new_cache, (), dict(batch=2, capacity=5)),
    "LearnedPositions.forward": lambda: (attnlib.LearnedPositions(6, 4), (t(2, 3, 4),), dict(offset=2)),
    "PatchEmbedding.forward": lambda: (attnlib.PatchEmbedding(2, 2, 4), (t(2, 2, 4, 6),), {}),
}
