"""attnlib: the exact, tested helper library of the attention course.

Each chapter builds a piece of attention step by step; its final version lives
here so that later chapters import it instead of copying it. PyTorch first;
``attnlib.numpy`` mirrors the functions the early chapters write in NumPy.

The book's "API reference" page (book/api.md) is generated from the docstrings,
and "attnlib and PyTorch" (book/differences.md) lists every deliberate
difference from torch. Examples in the docstrings run as doctests in
tests/library/test_docstrings.py.

>>> import torch
>>> import attnlib
>>> attnlib.softmax(torch.tensor([1.0, 1.0]))
tensor([0.5000, 0.5000])
"""

from attnlib.attention import scaled_dot_product_attention
from attnlib.efficient import (
    KVCache,
    OnlineSoftmaxState,
    decode_step,
    grouped_query_attention,
    kv_cache_bytes,
    online_attention_row_numpy,
    online_rescale_,
    online_softmax_numpy,
    online_softmax_update,
    online_update_,
    repeat_kv,
    tile_step,
    tiled_attention,
)
from attnlib.functional import log_softmax, logsumexp, masked_softmax, softmax
from attnlib.masks import as_additive_mask, causal_mask, combine_masks, padding_mask
from attnlib.modules import AdditiveAttention, MultiHeadAttention, merge_heads, parameter_count, split_heads
from attnlib.positions import (
    LearnedPositions,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_angles,
    sinusoidal_encoding,
)
from attnlib.scores import additive_scores, cosine_scores, dot_scores, general_scores, scaled_dot_scores
from attnlib.transformer import TransformerBlock
from attnlib.vision import PatchEmbedding, attention_rollout, patchify, unpatchify

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "KVCache",
    "LearnedPositions",
    "MultiHeadAttention",
    "OnlineSoftmaxState",
    "PatchEmbedding",
    "TransformerBlock",
    "additive_scores",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "as_additive_mask",
    "attention_rollout",
    "causal_mask",
    "combine_masks",
    "cosine_scores",
    "decode_step",
    "dot_scores",
    "general_scores",
    "grouped_query_attention",
    "kv_cache_bytes",
    "log_softmax",
    "logsumexp",
    "masked_softmax",
    "merge_heads",
    "online_attention_row_numpy",
    "online_rescale_",
    "online_softmax_numpy",
    "online_softmax_update",
    "online_update_",
    "padding_mask",
    "parameter_count",
    "patchify",
    "repeat_kv",
    "rope_angles",
    "scaled_dot_product_attention",
    "scaled_dot_scores",
    "sinusoidal_encoding",
    "softmax",
    "split_heads",
    "tile_step",
    "tiled_attention",
    "unpatchify",
]
