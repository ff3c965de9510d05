"""attnlib.variants (chapter 13) against its references, in float64.

* each pattern against its definition, written out as a loop over (i, j);
* the sliding-window kernel against torch's scaled_dot_product_attention with the
  pattern's mask (values and gradients), to 1e-12;
* linear attention and retention: the recurrent form against the parallel form, and
  the parallel form against the defining sums, to 1e-12;
* MLA: absorbed and unabsorbed decoding against the full forward pass, and the forward
  pass against torch's attention on the concatenated content and rotary parts.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnlib.variants import (
    LatentAttention,
    LatentCache,
    LinearAttentionState,
    cache_bytes_per_token,
    elu_feature_map,
    fixed_mask,
    global_token_mask,
    linear_attention,
    linear_attention_recurrent,
    receptive_field,
    retention,
    retention_recurrent,
    sink_mask,
    sliding_window_attention,
    sliding_window_mask,
    strided_mask,
)

TOL = 1e-12  # float64: every comparison here is one rounding order against another


def _by_definition(n, rule):
    rows = [[bool(rule(i, j)) for j in range(n)] for i in range(n)]
    return torch.tensor(rows, dtype=torch.bool).reshape(n, n)


# --------------------------------------------------------------------------- patterns


@pytest.mark.parametrize("n", [0, 1, 5, 17])
@pytest.mark.parametrize("window", [1, 2, 4, 30])
def test_sliding_window_mask_is_its_definition(n, window):
    expected = _by_definition(n, lambda i, j: 0 <= i - j < window)
    assert torch.equal(sliding_window_mask(n, window), expected)


@pytest.mark.parametrize("n", [1, 9, 16])
@pytest.mark.parametrize("stride", [1, 3, 4])
def test_strided_mask_is_the_union_of_child_et_al_heads(n, stride):
    expected = _by_definition(n, lambda i, j: j <= i and (i - j < stride or (i - j) % stride == 0))
    assert torch.equal(strided_mask(n, stride), expected)


@pytest.mark.parametrize(("block", "summary"), [(1, 1), (3, 1), (4, 2), (4, 4)])
def test_fixed_mask_is_the_union_of_child_et_al_heads(block, summary):
    n = 13
    rule = lambda i, j: j <= i and (i // block == j // block or j % block >= block - summary)  # noqa: E731
    expected = _by_definition(n, rule)
    assert torch.equal(fixed_mask(n, block, summary), expected)


def test_global_and_sink_masks_are_their_definitions():
    n, w = 12, 3
    marked = {0, 5}
    expected = _by_definition(n, lambda i, j: j <= i and (i - j < w or j in marked or i in marked))
    assert torch.equal(global_token_mask(n, w, [0, 5]), expected)
    assert torch.equal(global_token_mask(n, w, 2), global_token_mask(n, w, [0, 1]))
    sinks = _by_definition(n, lambda i, j: j <= i and (i - j < w or j < 2))
    assert torch.equal(sink_mask(n, w, sinks=2), sinks)
    assert torch.equal(sink_mask(n, w, sinks=0), sliding_window_mask(n, w))


def test_every_pattern_is_causal_and_keeps_the_diagonal():
    n = 20
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for mask in (
        sliding_window_mask(n, 4),
        strided_mask(n, 4),
        fixed_mask(n, 4),
        global_token_mask(n, 2, [3]),
        sink_mask(n, 3),
    ):
        assert not (mask & ~causal).any()
        assert mask.diagonal().all()
    assert torch.equal(sliding_window_mask(n, n), causal)


@pytest.mark.parametrize(("window", "layers"), [(1, 3), (2, 1), (3, 2), (4, 3), (5, 0)])
def test_receptive_field_of_stacked_windows_is_layers_times_w_minus_1_plus_1(window, layers):
    n = 24
    field = receptive_field(sliding_window_mask(n, window), layers)
    width = layers * (window - 1) + 1
    assert torch.equal(field, sliding_window_mask(n, width))


def test_strided_pattern_reaches_every_earlier_key_in_two_layers():
    n, stride = 25, 5  # stride = sqrt(n)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    assert not torch.equal(receptive_field(strided_mask(n, stride), 1), causal)
    assert torch.equal(receptive_field(strided_mask(n, stride), 2), causal)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: sliding_window_mask(4, 0), ValueError, "window"),
        (lambda: sliding_window_mask(-1, 2), ValueError, "n"),
        (lambda: strided_mask(4, 2.5), ValueError, "stride"),
        (lambda: fixed_mask(4, 2, summary=3), ValueError, "summary"),
        (lambda: global_token_mask(4, 1, [7]), ValueError, "global_tokens"),
        (lambda: global_token_mask(4, 1, "ab"), TypeError, "global_tokens"),
        (lambda: sink_mask(4, 2, sinks=-1), ValueError, "sinks"),
        (lambda: receptive_field(torch.ones(2, 3, dtype=torch.bool), 1), ValueError, "square"),
        (lambda: receptive_field(torch.ones(2, 2), 1), TypeError, "bool"),
    ],
)
def test_patterns_refuse_bad_arguments_by_name(call, error, words):
    with pytest.raises(error, match=words):
        call()


# --------------------------------------------------------------------------- the tiled window


# (shape, window, block), shared by the tiled and the block-at-a-time band below: one position, a
# batch, batch and heads with a length no block divides, no batch with window = length, a window
# past the length
BAND_CASES = [
    ((1, 1, 4), 1, 4),
    ((2, 7, 4), 3, 2),
    ((2, 3, 33, 8), 5, 8),
    ((64, 8), 64, 16),
    ((1, 50, 8), 100, 7),
    ((3, 21, 4), 4, 4),
]


@pytest.mark.parametrize(("shape", "window", "block"), BAND_CASES)
def test_sliding_window_attention_equals_the_masked_softmax(shape, window, block):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, dtype=torch.float64, generator=gen) for _ in range(3))
    n = shape[-2]
    mask = sliding_window_mask(n, window)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = sliding_window_attention(q, k, v, window, block_size=block)
    torch.testing.assert_close(got, expected, rtol=0, atol=TOL)


def test_sliding_window_attention_gradients_equal_the_masked_softmax():
    gen = torch.Generator().manual_seed(1)
    args = [torch.randn(2, 19, 6, dtype=torch.float64, generator=gen, requires_grad=True) for _ in range(3)]
    weight = torch.randn(2, 19, 6, dtype=torch.float64, generator=gen)
    mask = sliding_window_mask(19, 6)
    (F.scaled_dot_product_attention(*args, attn_mask=mask) * weight).sum().backward()
    expected = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    (sliding_window_attention(*args, 6, block_size=4) * weight).sum().backward()
    for a, e in zip(args, expected, strict=True):
        torch.testing.assert_close(a.grad, e, rtol=0, atol=1e-11)


def test_sliding_window_attention_broadcasts_and_keeps_float32_and_half():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, 1, 10, 4, generator=gen)
    k = torch.randn(1, 3, 10, 4, generator=gen)
    v = torch.randn(1, 1, 10, 5, generator=gen)
    got = sliding_window_attention(q, k, v, 3, block_size=4)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(10, 3))
    assert got.shape == (2, 3, 10, 5)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    half = sliding_window_attention(q.half(), k.half(), v.half(), 3)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), expected, rtol=2e-3, atol=2e-3)


# The same band one query block at a time (attnlib.variants.sliding._banded_loop), which large
# problems without gradients take: the threshold lowered to 0 sends every case through it.
@pytest.mark.parametrize(
    ("shape", "window", "block"),
    BAND_CASES
    + [
        ((2, 70, 6), 9, 4),  # window > block: full blocks away from the start, a shorter last block
        ((2, 70, 6), 3, 8),  # window < block: the two cut triangles overlap
        ((1, 1, 64, 5), 1, 1),
    ],
)
def test_the_block_at_a_time_band_equals_the_masked_softmax(monkeypatch, shape, window, block):
    from attnlib.variants import sliding

    calls = []
    real = sliding._banded_loop
    monkeypatch.setattr(sliding, "_LOOP_MIN_SCORES", 0)
    monkeypatch.setattr(sliding, "_TILE_SCORES", 2 * block * (window + block))  # 2 rows per tile
    monkeypatch.setattr(sliding, "_banded_loop", lambda *a: calls.append(a) or real(*a))
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(shape, dtype=torch.float64, generator=gen) for _ in range(3))
    mask = sliding_window_mask(shape[-2], window)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with torch.no_grad():
        got = sliding_window_attention(q, k, v, window, block_size=block)
    assert len(calls) == 1  # the loop ran
    torch.testing.assert_close(got, expected, rtol=0, atol=TOL)
    # float32 and half: the inputs' dtype back, values to float32's rounding
    q32, k32, v32 = (t.float() for t in (q, k, v))
    with torch.no_grad():
        got32 = sliding_window_attention(q32, k32, v32, window, block_size=block)
        half = sliding_window_attention(q32.half(), k32.half(), v32.half(), window, block_size=block)
    torch.testing.assert_close(got32, expected.float(), rtol=1e-5, atol=1e-5)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), expected.float(), rtol=3e-3, atol=3e-3)


def test_large_calls_without_gradients_walk_the_blocks_and_small_or_gradient_calls_do_not(monkeypatch):
    from attnlib.variants import sliding

    calls = []
    real = sliding._banded_loop
    monkeypatch.setattr(sliding, "_banded_loop", lambda *a: calls.append(a) or real(*a))
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 4, 2048, 16, generator=gen) for _ in range(3))  # 4.7M band scores
    with torch.no_grad():
        big = sliding_window_attention(q, k, v, 512, block_size=64)
    assert len(calls) == 1
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(2048, 512))
    torch.testing.assert_close(big, expected, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        sliding_window_attention(q[..., :256, :], k[..., :256, :], v[..., :256, :], 32, block_size=16)
    q.requires_grad_(True)
    sliding_window_attention(q, k, v, 512, block_size=64)  # gradients: the one-shot form
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"window": 0}, ValueError, "window"),
        ({"window": 2, "block_size": 0}, ValueError, "block_size"),
        ({"window": 2, "key": torch.zeros(1, 5, 4)}, ValueError, "key"),
        ({"window": 2, "value": torch.zeros(1, 5, 4)}, ValueError, "value"),
        ({"window": 2, "query": torch.zeros(1, 4, 4, dtype=torch.int64)}, TypeError, "query"),
    ],
)
def test_sliding_window_attention_refuses_bad_arguments_by_name(kwargs, error, words):
    base = {"query": torch.zeros(1, 4, 4), "key": torch.zeros(1, 4, 4), "value": torch.zeros(1, 4, 4)}
    base.update(kwargs)
    with pytest.raises(error, match=words):
        sliding_window_attention(**base)


# --------------------------------------------------------------------------- linear attention


def test_linear_attention_is_its_defining_sums():
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 7, 3, dtype=torch.float64, generator=gen) for _ in range(3))
    pq, pk = elu_feature_map(q), elu_feature_map(k)
    for causal in (True, False):
        expected = torch.empty_like(v)
        for b in range(2):
            for i in range(7):
                keys = range(i + 1) if causal else range(7)
                w = torch.stack([pq[b, i] @ pk[b, j] for j in keys])
                expected[b, i] = (w[:, None] * v[b, list(keys)]).sum(0) / w.sum()
        torch.testing.assert_close(linear_attention(q, k, v, causal=causal), expected, rtol=0, atol=TOL)


def test_linear_attention_recurrent_equals_parallel_and_its_state_is_constant_in_size():
    gen = torch.Generator().manual_seed(4)
    q, k = (torch.randn(2, 3, 40, 4, dtype=torch.float64, generator=gen) for _ in range(2))
    v = torch.randn(2, 3, 40, 6, dtype=torch.float64, generator=gen)
    parallel = linear_attention(q, k, v)
    torch.testing.assert_close(linear_attention_recurrent(q, k, v), parallel, rtol=0, atol=TOL)
    state = LinearAttentionState()
    sizes = set()
    for t in range(40):
        state.step(q[..., t, :], k[..., t, :], v[..., t, :])
        sizes.add((tuple(state.kv.shape), tuple(state.k_sum.shape)))
    assert sizes == {((2, 3, 4, 6), (2, 3, 4))}  # one (d, d_v) state, whatever the position
    assert state.tokens == 40


def test_linear_attention_weights_are_an_average():
    q, k = torch.randn(1, 6, 3, dtype=torch.float64), torch.randn(1, 6, 3, dtype=torch.float64)
    v = torch.full((1, 6, 2), 7.0, dtype=torch.float64)
    torch.testing.assert_close(linear_attention(q, k, v), v, rtol=0, atol=TOL)


def test_retention_recurrent_equals_parallel_per_head_decay():
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 16, 4, dtype=torch.float64, generator=gen) for _ in range(3))
    gamma = torch.tensor([0.5, 0.9, 1.0], dtype=torch.float64)[:, None].squeeze(-1)  # one per head
    parallel = retention(q, k, v, gamma)
    torch.testing.assert_close(retention_recurrent(q, k, v, gamma), parallel, rtol=0, atol=TOL)
    # the definition: o_n = sum_{m<=n} gamma^(n-m) (q_n . k_m) v_m
    n, h = 9, 1
    expected = sum(gamma[h] ** (n - m) * (q[0, h, n] @ k[0, h, m]) * v[0, h, m] for m in range(n + 1))
    torch.testing.assert_close(parallel[0, h, n], expected, rtol=0, atol=TOL)


def test_retention_without_decay_is_unnormalised_causal_linear_attention():
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(5, 3, dtype=torch.float64, generator=gen) for _ in range(3))
    torch.testing.assert_close(retention(q, k, v, 1.0), (q @ k.T).tril() @ v, rtol=0, atol=TOL)


@pytest.mark.parametrize("decay", [0.0, 1.5, -0.1])
def test_retention_refuses_a_decay_outside_0_1(decay):
    x = torch.zeros(1, 2, 2)
    with pytest.raises(ValueError, match="decay"):
        retention(x, x, x, decay)


# --------------------------------------------------------------------------- MLA


def _mla():
    torch.manual_seed(7)
    return LatentAttention(24, num_heads=3, head_dim=8, latent_dim=10, rope_dim=4).double()


def test_mla_forward_is_attention_over_the_rebuilt_keys_and_the_shared_rotary_key():
    from attnlib.positions import apply_rope

    mla = _mla()
    x = torch.randn(2, 9, 24, dtype=torch.float64)
    c = mla.w_dkv(x)
    heads = lambda t, w: t.unflatten(-1, (3, w)).transpose(1, 2)  # noqa: E731
    positions = torch.arange(9)
    q = torch.cat([heads(mla.w_q(x), 8), apply_rope(heads(mla.w_qr(x), 4), positions)], dim=-1)
    k_r = apply_rope(mla.w_kr(x), positions)[:, None].expand(2, 3, 9, 4)
    k = torch.cat([heads(mla.w_uk(c), 8), k_r], dim=-1)
    v = heads(mla.w_uv(c), 8)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(d_h + d_r)
    expected = mla.w_o(out.transpose(1, 2).flatten(-2))
    torch.testing.assert_close(mla(x), expected, rtol=0, atol=TOL)


@pytest.mark.parametrize("absorbed", [True, False])
def test_mla_decoding_with_the_latent_cache_equals_the_forward_pass(absorbed):
    mla = _mla()
    x = torch.randn(2, 11, 24, dtype=torch.float64)
    full = mla(x)
    cache = LatentCache()
    outs = [mla.decode_step(x[:, :4], cache, absorbed=absorbed)]  # a prompt of 4, then one at a time
    outs += [mla.decode_step(x[:, t : t + 1], cache, absorbed=absorbed) for t in range(4, 11)]
    torch.testing.assert_close(torch.cat(outs, dim=1), full, rtol=0, atol=TOL)
    assert cache.length == 11
    assert cache.latent.shape == (2, 11, 10) and cache.rope_key.shape == (2, 11, 4)
    assert cache.elements_per_token() == 10 + 4


def test_cache_bytes_per_token_for_each_kind():
    kw = {"num_heads": 32, "head_dim": 128, "layers": 2, "bytes_per_element": 2}
    assert cache_bytes_per_token("mha", **kw) == 2 * 32 * 128 * 2 * 2
    assert cache_bytes_per_token("mqa", **kw) == 2 * 128 * 2 * 2
    assert cache_bytes_per_token("gqa", kv_heads=8, **kw) == 2 * 8 * 128 * 2 * 2
    # DeepSeek-V2's setting: d_c = 4 d_h and d_r = d_h / 2, so 4.5 d_h per token and layer,
    # the cache of GQA with 2.25 groups (DeepSeek-V2, Table 1)
    mla = cache_bytes_per_token("mla", latent_dim=4 * 128, rope_dim=64, **kw)
    assert mla == 4.5 * 128 * 2 * 2
    assert math.isclose(mla / cache_bytes_per_token("gqa", kv_heads=1, **kw) * 1, 2.25)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"kind": "mla"}, "latent_dim"),
        ({"kind": "gqa"}, "kv_heads"),
        ({"kind": "gqa", "kv_heads": 5}, "divide"),
        ({"kind": "xyz"}, "kind"),
    ],
)
def test_cache_bytes_per_token_refuses_incomplete_settings(kwargs, words):
    with pytest.raises(ValueError, match=words):
        cache_bytes_per_token(num_heads=8, head_dim=4, **kwargs)


def test_mla_refuses_an_odd_rope_dim():
    with pytest.raises(ValueError, match="rope_dim"):
        LatentAttention(8, 2, 4, 4, 3)


def test_batch_shapes_that_do_not_broadcast_raise_valueerror_naming_the_function():
    from attnlib.variants import linear_attention_recurrent, retention_recurrent

    q, k = torch.randn(2, 5, 3, dtype=torch.float64), torch.randn(3, 5, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="sliding_window_attention: batch shapes"):
        sliding_window_attention(q, k, k, window=2)
    with pytest.raises(ValueError, match="linear_attention_recurrent: batch shapes"):
        linear_attention_recurrent(q, k, k)
    with pytest.raises(ValueError, match="retention_recurrent: batch shapes"):
        retention_recurrent(q, k, k, 0.9)
