"""Chapter 13 exercises: a sliding-window mask with sinks, the linear-attention recurrence,
MLA's absorbed query, the cache bytes per token of MHA, MQA, GQA and MLA."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlib.checks._cases import cases, inverted
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.variants import cache_bytes_per_token, elu_feature_map, linear_attention, sink_mask

# --------------------------------------------------------------------------- ex-13-1 the window mask


def window_mask(n: int, window: int, sinks: int) -> torch.Tensor:
    """bool (n, n): key j visible to query i when 0 <= i - j < window, or j < sinks and j <= i."""
    return sink_mask(n, window, sinks)


def _offsets(n):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    return i, j, i - j


def _window_one_too_wide(n, window, sinks):
    i, j, d = _offsets(n)
    return (d >= 0) & ((d <= window) | (j < sinks))


def _band_not_causal(n, window, sinks):
    i, j, d = _offsets(n)
    return (d.abs() < window) | ((j < sinks) & (d >= 0))


def _sinks_seen_by_every_query(n, window, sinks):
    i, j, d = _offsets(n)
    return ((d >= 0) & (d < window)) | (j < sinks)


def _one_sink_too_many(n, window, sinks):
    i, j, d = _offsets(n)
    return (d >= 0) & ((d < window) | (j <= sinks))


def _no_sinks(n, window, sinks):
    i, j, d = _offsets(n)
    return (d >= 0) & (d < window)


def _sinks_inside_the_window(n, window, sinks):
    """The window counts the sinks: the last window - sinks keys plus the sinks."""
    i, j, d = _offsets(n)
    return (d >= 0) & ((d < window - sinks) | (j < sinks))


register(
    Exercise(
        id="ex-13-1",
        function="window_mask",
        reference=window_mask,
        cases=cases(
            None,
            {
                "n = 6, window 3, no sinks": (6, 3, 0),
                "n = 8, window 2, 2 sinks": (8, 2, 2),
                "a window as long as the sequence (n = 5, window 5): causal": (5, 5, 0),
                "window 1 (each query sees itself), 1 sink, n = 5": (5, 1, 1),
                "more sinks than positions (n = 3, window 1, 5 sinks): causal": (3, 1, 5),
                "hidden: n = 12, window 4, 1 sink": (12, 4, 1),
                "hidden: n = 10, window 3, 4 sinks": (10, 3, 4),
                "hidden: a window longer than the sequence (n = 4, window 9)": (4, 9, 0),
                "hidden: window 1, no sinks (only the diagonal)": (6, 1, 0),
                "hidden: more sinks than positions (n = 4, window 2, 6 sinks)": (4, 2, 6),
                "hidden: one position": (1, 3, 2),
                "hidden: n = 16, window 5, 3 sinks": (16, 5, 3),
            },
        ),
        misconceptions=[
            Misconception(
                "the mask is inverted (True marks the blocked keys)",
                inverted(window_mask),
                "in this course True means *may attend*: the keys in the window and the sinks are True.",
            ),
            Misconception(
                "the window holds window + 1 keys (i - j <= window)",
                _window_one_too_wide,
                "the window counts the query's own position: query i sees keys i - window + 1 .. i, "
                "that is 0 <= i - j < window, window keys in all.",
            ),
            Misconception(
                "a band around the diagonal (|i - j| < window): queries see later keys",
                _band_not_causal,
                "the mask is causal: query i never sees a key j > i, so only the window behind the "
                "query (and the query itself) counts.",
            ),
            Misconception(
                "the sinks are seen by every query, earlier ones included (no longer causal)",
                _sinks_seen_by_every_query,
                "the mask stays causal for the sinks too: a query i sees sink j only when j <= i.",
            ),
            Misconception(
                "one sink too many (j <= sinks)",
                _one_sink_too_many,
                "positions count from 0: the first `sinks` keys are 0 .. sinks - 1 (j < sinks).",
            ),
            Misconception(
                "the sinks are left out (a plain sliding window)",
                _no_sinks,
                "besides its window, every query also keeps the first `sinks` keys (those at or before it).",
            ),
            Misconception(
                "the sinks are taken out of the window (window - sinks recent keys)",
                _sinks_inside_the_window,
                "the window and the sinks add up: query i keeps its last `window` keys *and* the "
                "first `sinks` keys.",
            ),
        ],
        forbidden=("attnlib.variants",),
        hints=(
            "compare every query position i with every key position j: a key is visible when it lies "
            "in the window that ends at the query, or when it is one of the first keys.",
            "the window ends at the query itself and holds `window` keys; a sink is a key j < sinks. "
            "Nothing after the query is ever visible.",
            "with d = i - j (a column of queries minus a row of keys), the mask is "
            "(0 <= d < window) or (j < sinks and d >= 0), as a bool tensor (n, n).",
        ),
    )
)

# --------------------------------------------------------------------------- ex-13-2 the recurrence


def linear_attention_recurrence(query, key, value):
    """Causal linear attention with phi = elu + 1: (..., n, d), (..., n, d), (..., n, dv) -> (..., n, dv)."""
    return linear_attention(query, key, value, causal=True)


def _qkv(lead, n, d, dv, seed, scale=1.0):
    def make():
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(*lead, n, d, generator=g, dtype=torch.float64) * scale
        k = torch.randn(*lead, n, d, generator=g, dtype=torch.float64) * scale
        v = torch.randn(*lead, n, dv, generator=g, dtype=torch.float64)
        return q, k, v

    return make


def _numerator_only(query, key, value):
    pq, pk = elu_feature_map(query), elu_feature_map(key)
    return (pq @ pk.transpose(-1, -2)).tril() @ value


def _not_causal(query, key, value):
    return linear_attention(query, key, value, causal=False)


def _state_updated_after_reading(query, key, value):
    """Query i reads the state of keys 0 .. i - 1 (0 / 0 at the first position)."""
    pq, pk = elu_feature_map(query), elu_feature_map(key)
    scores = (pq @ pk.transpose(-1, -2)).tril(-1)
    return (scores @ value) / scores.sum(dim=-1, keepdim=True)


def _no_feature_map(query, key, value):
    return linear_attention(query, key, value, causal=True, feature_map=lambda x: x)


def _relu_feature_map(query, key, value):
    return linear_attention(query, key, value, causal=True, feature_map=F.relu)


def _exp_feature_map(query, key, value):
    return linear_attention(query, key, value, causal=True, feature_map=torch.exp)


register(
    Exercise(
        id="ex-13-2",
        function="linear_attention_recurrence",
        reference=linear_attention_recurrence,
        cases=cases(
            None,
            {
                "one sequence of 5 positions, d = 3, dv = 2": _qkv((), 5, 3, 2, 0),
                "a batch of 2 sequences and 3 heads, n = 6, d = 4, dv = 4": _qkv((2, 3), 6, 4, 4, 1),
                "one position (n = 1)": _qkv((2,), 1, 3, 5, 2),
                "large queries and keys (times 10)": _qkv((1,), 7, 4, 3, 3, 10.0),
                "hidden: a batch (3, 2), n = 9, d = 5, dv = 3": _qkv((3, 2), 9, 5, 3, 4),
                "hidden: one position, d = 1": _qkv((), 1, 1, 2, 5),
                "hidden: d = 1, dv = 1, n = 8": _qkv((2,), 8, 1, 1, 6),
                "hidden: a long sequence, n = 40, d = 8, dv = 8": _qkv((1, 2), 40, 8, 8, 7),
                "hidden: large queries and keys (times 20)": _qkv((2,), 6, 3, 4, 8, 20.0),
            },
        ),
        misconceptions=[
            Misconception(
                "no normaliser (the sum of phi(q_i) . phi(k_j) is left out)",
                _numerator_only,
                "the output is a weighted mean of the values: divide phi(q_i) S_i by phi(q_i) . z_i, "
                "where z_i sums the features phi(k_j) of the keys so far.",
            ),
            Misconception(
                "not causal: every query reads the state of the whole sequence",
                _not_causal,
                "query i may only read keys 0 .. i: read the state right after adding position i, "
                "not after the last position.",
            ),
            Misconception(
                "the state is read before position i is added (query i misses its own key)",
                _state_updated_after_reading,
                "add k_i's outer product to the state first, then read it with q_i: a query sees its "
                "own position (and the first query divides by 0 otherwise).",
            ),
            Misconception(
                "no feature map on the queries and keys",
                _no_feature_map,
                "phi(x) = elu(x) + 1 goes on every query and every key before they meet: the weights "
                "must be positive.",
            ),
            Misconception(
                "relu instead of elu + 1 as the feature map",
                _relu_feature_map,
                "the exercise's phi is elu(x) + 1 (strictly positive), not relu.",
            ),
            Misconception(
                "exp instead of elu + 1 as the feature map",
                _exp_feature_map,
                "the exercise's phi is elu(x) + 1, which equals x + 1 for x > 0 and exp(x) for x <= 0.",
            ),
        ],
        rtol=1e-9,
        atol=1e-12,
        forbidden=(
            "attnlib.variants.linear_attention",
            "attnlib.variants.linear_attention_recurrent",
            "attnlib.variants.LinearAttentionState",
            "attnlib.variants.retention",
            "attnlib.variants.retention_recurrent",
        ),
        hints=(
            "walk through the positions in order, carrying a state that sums what the keys and "
            "values seen so far contribute: chapter 01's recurrence, with a matrix as its state.",
            "the state has two parts: S, a (d, dv) sum of outer products phi(k_j) v_j^T, and z, the "
            "(d,) sum of phi(k_j); both grow by one term per position, before the query reads them.",
            "at position i: S = S + outer(phi(k_i), v_i), z = z + phi(k_i); then "
            "out_i = phi(q_i) S / (phi(q_i) . z), with phi(x) = elu(x) + 1.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-13-3 absorbed query


def absorbed_query(x, w_q, w_uk):
    """x (B, s, D), w_q (H, D, d_h), w_uk (H, d_c, d_h) -> (B, H, s, d_c)."""
    q = torch.einsum("bsd,hde->bhse", x, w_q)  # (B, H, s, d_h)
    return torch.einsum("bhse,hce->bhsc", q, w_uk)  # (B, H, s, d_c)


def _mla_inputs(B, s, D, H, d_h, d_c, seed, scale=1.0):
    def make():
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(B, s, D, generator=g, dtype=torch.float64) * scale
        w_q = torch.randn(H, D, d_h, generator=g, dtype=torch.float64) / math.sqrt(D)
        w_uk = torch.randn(H, d_c, d_h, generator=g, dtype=torch.float64) / math.sqrt(d_c)
        return x, w_q, w_uk

    return make


def _w_uk_not_transposed(x, w_q, w_uk):
    """q @ w_uk with w_uk read as (d_h, d_c): runs only when d_h == d_c."""
    return torch.einsum("bsd,hde->bhse", x, w_q) @ w_uk


def _query_not_absorbed(x, w_q, w_uk):
    return torch.einsum("bsd,hde->bhse", x, w_q)


def _scaled(x, w_q, w_uk):
    return absorbed_query(x, w_q, w_uk) / math.sqrt(w_q.shape[-1])


def _scaled_by_latent_width(x, w_q, w_uk):
    return absorbed_query(x, w_q, w_uk) / math.sqrt(w_uk.shape[-2])


def _heads_summed(x, w_q, w_uk):
    return absorbed_query(x, w_q, w_uk).sum(dim=1)


def _tokens_before_heads(x, w_q, w_uk):
    return absorbed_query(x, w_q, w_uk).transpose(1, 2)


def _matrix_not_query(x, w_q, w_uk):
    return w_q @ w_uk.transpose(-1, -2)  # (H, D, d_c)


register(
    Exercise(
        id="ex-13-3",
        function="absorbed_query",
        reference=absorbed_query,
        cases=cases(
            None,
            {
                "one token, B = 1, H = 2, D = 8, d_h = 4, d_c = 3": _mla_inputs(1, 1, 8, 2, 4, 3, 0),
                "a batch of 2, 3 new tokens, H = 4, D = 12, d_h = 3, d_c = 5": _mla_inputs(
                    2, 3, 12, 4, 3, 5, 1
                ),
                "d_c = d_h (a square up-projection), B = 1, s = 2, H = 3": _mla_inputs(1, 2, 6, 3, 4, 4, 2),
                "one head (H = 1), large inputs (times 100)": _mla_inputs(2, 2, 5, 1, 3, 2, 3, 100.0),
                "hidden: B = 3, s = 1, H = 8, D = 16, d_h = 4, d_c = 6": _mla_inputs(3, 1, 16, 8, 4, 6, 4),
                "hidden: d_c = d_h = 5, B = 2, s = 3, H = 2": _mla_inputs(2, 3, 7, 2, 5, 5, 5),
                "hidden: a latent of width 1": _mla_inputs(1, 4, 6, 3, 2, 1, 6),
                "hidden: one head, one token": _mla_inputs(1, 1, 4, 1, 3, 3, 7),
                "hidden: B = 2, s = 2, H = 4, d_h = 2, d_c = 8": _mla_inputs(2, 2, 6, 4, 2, 8, 8),
            },
        ),
        misconceptions=[
            Misconception(
                "W_uk not transposed (q @ W_uk)",
                _w_uk_not_transposed,
                "a head's key is c W_uk (W_uk is (d_c, d_h)), so q . k = q W_uk^T c^T: the query "
                "meets W_uk transposed, which takes it from d_h to d_c.",
            ),
            Misconception(
                "the query is returned without the absorbed up-projection",
                _query_not_absorbed,
                "the query must live in the latent's space (width d_c), so that it can be compared "
                "with the cached latents directly.",
            ),
            Misconception(
                "the query is scaled by 1/sqrt(d_h) (or 1/sqrt(d_c))",
                _scaled,
                "return the unscaled query: the scale is applied to the scores afterwards.",
                variants=(_scaled_by_latent_width,),
            ),
            Misconception(
                "the heads are summed into one query",
                _heads_summed,
                "each head keeps its own query, (B, H, s, d_c): head h uses its own W_q[h] and W_uk[h].",
            ),
            Misconception(
                "the result is (B, s, H, d_c) instead of (B, H, s, d_c)",
                _tokens_before_heads,
                "the heads come before the tokens, as everywhere in attnlib: (B, H, s, d_c).",
            ),
            Misconception(
                "the absorbed matrix W_q W_uk^T is returned instead of the query",
                _matrix_not_query,
                "the absorbed matrix (H, D, d_c) is half of the work: multiply the tokens x by it.",
            ),
        ],
        rtol=1e-9,
        atol=1e-12,
        forbidden=("attnlib.variants",),
        hints=(
            "write one head's score against one cached latent c as a product of row vectors and "
            "matrices, then regroup it so that c stands alone on the right.",
            "a head's query is x W_q[h] and its key c W_uk[h]; the score is the query times the "
            "key's transpose, and the transpose of a product reverses its factors.",
            "for each head, q_latent = (x W_q[h]) W_uk[h]^T, of width d_c; stack the heads on axis 1 "
            "to get (B, H, s, d_c). No scaling.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-13-4 cache bytes


def kv_cache_bytes(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    """Bytes of cache per token for "mha", "mqa", "gqa" or "mla" (unused arguments are None)."""
    return cache_bytes_per_token(
        kind,
        num_heads=num_heads,
        head_dim=head_dim,
        kv_heads=kv_heads,
        latent_dim=latent_dim,
        rope_dim=rope_dim,
        layers=layers,
        bytes_per_element=bytes_per_element,
    )


def _elements(kind, num_heads, kv_heads, head_dim, latent_dim, rope_dim, *, keys=2, gqa_heads=None, mla=None):
    if kind == "mha":
        return keys * num_heads * head_dim
    if kind == "mqa":
        return keys * head_dim
    if kind == "gqa":
        return keys * (gqa_heads or kv_heads) * head_dim
    return mla(num_heads, latent_dim, rope_dim)


def _wrong_bytes(
    keys=2, gqa_as_mha=False, mla=lambda h, c, r: c + r, per_layer=False, per_element=False, bits=False
):
    def wrong(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
        heads = num_heads if gqa_as_mha else None
        n = _elements(
            kind, num_heads, kv_heads, head_dim, latent_dim, rope_dim, keys=keys, gqa_heads=heads, mla=mla
        )
        return (
            n * (1 if per_layer else layers) * (1 if per_element else bytes_per_element) * (8 if bits else 1)
        )

    return wrong


def _config(kind, layers, heads, kv_heads, head_dim, latent, rope, size):
    return (kind, layers, heads, kv_heads, head_dim, latent, rope, size)


register(
    Exercise(
        id="ex-13-4",
        function="kv_cache_bytes",
        reference=kv_cache_bytes,
        cases=cases(
            _config,
            {
                "MHA: 1 layer, 8 heads of 64, 2 bytes": ("mha", 1, 8, None, 64, None, None, 2),
                "MQA: 4 layers, 8 heads of 64, 2 bytes": ("mqa", 4, 8, None, 64, None, None, 2),
                "GQA: 32 layers, 32 heads, 8 kv heads of 128, 2 bytes": (
                    "gqa",
                    32,
                    32,
                    8,
                    128,
                    None,
                    None,
                    2,
                ),
                "MLA: 2 layers, 16 heads of 128, latent 512, rope 64, 2 bytes": (
                    "mla",
                    2,
                    16,
                    None,
                    128,
                    512,
                    64,
                    2,
                ),
                "MHA in float32 (4 bytes), 12 layers, 12 heads of 64": (
                    "mha",
                    12,
                    12,
                    None,
                    64,
                    None,
                    None,
                    4,
                ),
                "hidden: GQA, 1 layer, 4 heads, 2 kv heads of 16, 1 byte": (
                    "gqa",
                    1,
                    4,
                    2,
                    16,
                    None,
                    None,
                    1,
                ),
                "hidden: GQA with one kv head (= MQA), 6 layers": ("gqa", 6, 8, 1, 32, None, None, 2),
                "hidden: GQA with as many kv heads as heads (= MHA)": ("gqa", 3, 4, 4, 8, None, None, 4),
                "hidden: MLA, 61 layers, 128 heads, latent 512, rope 64 (DeepSeek-V3)": (
                    "mla",
                    61,
                    128,
                    None,
                    128,
                    512,
                    64,
                    2,
                ),
                "hidden: MLA, 1 layer, 4 heads, latent 32, rope 8, 4 bytes": (
                    "mla",
                    1,
                    4,
                    None,
                    16,
                    32,
                    8,
                    4,
                ),
                "hidden: MQA, 1 layer, 1 byte": ("mqa", 1, 16, None, 48, None, None, 1),
                "hidden: MHA, 80 layers, 64 heads of 128, 2 bytes": ("mha", 80, 64, None, 128, None, None, 2),
            },
        ),
        misconceptions=[
            Misconception(
                "the keys are counted but not the values",
                _wrong_bytes(keys=1),
                "MHA, MQA and GQA cache a key *and* a value for every key-value head: 2 per head.",
            ),
            Misconception(
                "GQA counted with every query head (as MHA)",
                _wrong_bytes(gqa_as_mha=True),
                "GQA's heads share key-value heads: only kv_heads of them are cached.",
            ),
            Misconception(
                "MLA's rotary key is left out (only the latent)",
                _wrong_bytes(mla=lambda h, c, r: c),
                "MLA caches the latent and, beside it, the decoupled rotary key (rope_dim numbers, "
                "shared by the heads).",
            ),
            Misconception(
                "MLA's rotary key counted once per head",
                _wrong_bytes(mla=lambda h, c, r: c + h * r),
                "the decoupled rotary key is one vector per token, shared by every head.",
            ),
            Misconception(
                "MLA's latent counted twice (once for keys, once for values)",
                _wrong_bytes(mla=lambda h, c, r: 2 * (c + r)),
                "one latent per token holds both: the keys and values are rebuilt from the same "
                "latent, so it is cached once.",
            ),
            Misconception(
                "the bytes of one layer (the layers are left out)",
                _wrong_bytes(per_layer=True),
                "every layer keeps its own cache: multiply by the number of layers.",
            ),
            Misconception(
                "bits instead of bytes (times 8)",
                _wrong_bytes(bits=True),
                "the question asks for bytes: bytes_per_element already gives each number's size in "
                "bytes, with no factor 8.",
            ),
            Misconception(
                "elements instead of bytes (bytes_per_element left out)",
                _wrong_bytes(per_element=True),
                "each cached number takes bytes_per_element bytes (2 for float16 or bfloat16).",
            ),
        ],
        forbidden=("attnlib.variants",),
        hints=(
            "count the numbers one token leaves in one layer's cache, then multiply by the layers and "
            "by the bytes of one number.",
            "MHA, MQA and GQA keep a key and a value for each key-value head (H, 1 or kv_heads of "
            "them); MLA keeps one latent and one rotary key, shared by the heads.",
            "per layer: MHA 2 H d_h, MQA 2 d_h, GQA 2 G d_h, MLA d_c + d_r numbers; times layers "
            "times bytes_per_element, as an int.",
        ),
    )
)
