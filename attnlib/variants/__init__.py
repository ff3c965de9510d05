"""The attention variants of today's models (chapter 13), one module per idea.

* :mod:`~attnlib.variants.patterns`: which key a query may see, as a boolean mask
  (True means *may attend*, as everywhere in attnlib): a sliding window (Mistral,
  Gemma), Child et al.'s strided and fixed sparse patterns, global tokens
  (Longformer, BigBird), attention sinks (Xiao et al.), and the receptive field of
  several stacked masked layers;
* :mod:`~attnlib.variants.sliding`: sliding-window attention as a banded, tiled
  kernel that never forms the ``(L, S)`` matrix (memory linear in ``n``);
* :mod:`~attnlib.variants.linear`: linear attention (Katharopoulos et al. 2020) in
  its parallel and its recurrent form, and retention's decayed recurrence (Sun et
  al. 2023): chapter 01's recurrent state again;
* :mod:`~attnlib.variants.latent`: multi-head latent attention (DeepSeek-V2), its
  compressed cache, decoupled RoPE and absorbed projections, and the cache bytes of
  MHA, MQA, GQA and MLA.
"""

from attnlib.variants.latent import LatentAttention, LatentCache, cache_bytes_per_token
from attnlib.variants.linear import (
    LinearAttentionState,
    elu_feature_map,
    linear_attention,
    linear_attention_recurrent,
    retention,
    retention_recurrent,
)
from attnlib.variants.patterns import (
    fixed_mask,
    global_token_mask,
    receptive_field,
    sink_mask,
    sliding_window_mask,
    strided_mask,
)
from attnlib.variants.sliding import sliding_window_attention

__all__ = [
    "LatentAttention",
    "LatentCache",
    "LinearAttentionState",
    "cache_bytes_per_token",
    "elu_feature_map",
    "fixed_mask",
    "global_token_mask",
    "linear_attention",
    "linear_attention_recurrent",
    "receptive_field",
    "retention",
    "retention_recurrent",
    "sink_mask",
    "sliding_window_attention",
    "sliding_window_mask",
    "strided_mask",
]
