"""attnlib: the exact, tested helper library of the attention course.

Each chapter builds a piece of attention step by step; its final version lives
here so that later chapters import it instead of copying it. PyTorch first;
``attnlib.numpy`` mirrors the functions the early chapters write in NumPy.
"""

from attnlib.attention import scaled_dot_product_attention
from attnlib.functional import log_softmax, logsumexp, masked_softmax, softmax
from attnlib.masks import as_additive_mask, causal_mask, combine_masks, padding_mask
from attnlib.modules import AdditiveAttention, MultiHeadAttention, merge_heads, parameter_count, split_heads
from attnlib.scores import additive_scores, cosine_scores, dot_scores, general_scores, scaled_dot_scores

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "MultiHeadAttention",
    "additive_scores",
    "as_additive_mask",
    "causal_mask",
    "combine_masks",
    "cosine_scores",
    "dot_scores",
    "general_scores",
    "log_softmax",
    "logsumexp",
    "masked_softmax",
    "merge_heads",
    "padding_mask",
    "parameter_count",
    "scaled_dot_product_attention",
    "scaled_dot_scores",
    "softmax",
    "split_heads",
]
