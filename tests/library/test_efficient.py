"""Tests of attnlib.efficient against torch's own attention (the reference)."""

import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers_numerics import TOL32, TOL64_TILED, sdpa64

import attnlib.efficient as eff
from attnlib.efficient import (
    KVCache,
    decode_step,
    grouped_query_attention,
    kv_cache_bytes,
    online_attention_row_numpy,
    online_softmax_numpy,
    online_softmax_update,
    repeat_kv,
    tile_step,
    tiled_attention,
)

F32, F64 = TOL32, TOL64_TILED  # tests/library/helpers_numerics.py states them
reference = sdpa64


def qkv(*shape_qk, S=None, Ev=None, dtype=torch.float32, seed=0):
    *lead, L, E = shape_qk
    S = L if S is None else S
    Ev = E if Ev is None else Ev
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, L, E, generator=g, dtype=dtype)
    k = torch.randn(*lead, S, E, generator=g, dtype=dtype)
    v = torch.randn(*lead, S, Ev, generator=g, dtype=dtype)
    return q, k, v


# ---------------------------------------------------------------- online softmax


@pytest.mark.parametrize("block", [1, 3, 4, 7, 100])
def test_online_softmax_numpy_equals_softmax(block):
    rng = np.random.default_rng(0)
    x = rng.normal(size=23) * 5
    w, states = online_softmax_numpy(x, block)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(w, e / e.sum(), rtol=1e-12, atol=1e-15)
    assert len(states) == math.ceil(23 / block)
    assert states[-1].seen == 23
    assert states[-1].m == x.max()
    np.testing.assert_allclose(states[-1].l, e.sum(), rtol=1e-12)
    # every intermediate state describes the prefix seen so far
    for st in states:
        prefix = x[: st.seen]
        assert st.m == prefix.max()
        np.testing.assert_allclose(st.l, np.exp(prefix - prefix.max()).sum(), rtol=1e-12)


def test_online_softmax_large_scores_and_masked():
    x = np.array([1000.0, -np.inf, 999.0, 1001.0])
    w, _ = online_softmax_numpy(x, 2)
    assert np.all(np.isfinite(w)) and w[1] == 0
    np.testing.assert_allclose(w.sum(), 1.0)
    w, states = online_softmax_numpy(np.full(5, -np.inf), 2)
    assert np.all(w == 0) and states[-1].l == 0


def test_online_softmax_update_step():
    m, l = online_softmax_update(-math.inf, 0.0, np.array([1.0, 2.0]))
    assert m == 2.0 and l == pytest.approx(math.exp(-1) + 1)
    m, l = online_softmax_update(m, l, np.array([4.0]))
    assert m == 4.0 and l == pytest.approx((math.exp(-1) + 1) * math.exp(-2) + 1)
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        online_softmax_update(0.0, 1.0, np.ones((2, 2)))


@pytest.mark.parametrize("block", [1, 5, 16, 64])
def test_online_attention_row_numpy(block):
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=8), rng.normal(size=(37, 8)), rng.normal(size=(37, 3))
    mask = rng.random(37) > 0.3
    out, states = online_attention_row_numpy(q, k, v, block, mask=mask)
    s = np.where(mask, k @ q / math.sqrt(8), -np.inf)
    w = np.exp(s - s.max())
    w /= w.sum()
    np.testing.assert_allclose(out, w @ v, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(states[-1].acc / states[-1].l, out, rtol=1e-12)
    out0, _ = online_attention_row_numpy(q, k, v, block, mask=np.zeros(37, bool))
    assert np.all(out0 == 0)


def test_tile_step_matches_full_attention():
    q, k, v = qkv(2, 3, 5, 8, S=11, dtype=torch.float64)
    m = torch.full((2, 3, 5, 1), -math.inf, dtype=torch.float64)
    l = torch.zeros(2, 3, 5, 1, dtype=torch.float64)
    acc = torch.zeros(2, 3, 5, 8, dtype=torch.float64)
    for j in range(0, 11, 4):
        m, l, acc = tile_step(m, l, acc, q, k[..., j : j + 4, :], v[..., j : j + 4, :])
    torch.testing.assert_close(acc / l, reference(q, k, v), **F64)


# ---------------------------------------------------------------- tiled attention

SHAPES = [
    # (batch dims, L, S, E, Ev, block_q, block_k)
    ((1, 8), 64, 64, 16, 16, 16, 16),
    ((2, 3), 37, 53, 8, 5, 8, 16),  # blocks divide neither L nor S
    ((2, 2), 100, 100, 32, 32, 64, 48),
    ((3,), 19, 7, 4, 4, 5, 3),  # 3-D input, S < L
    ((), 9, 13, 4, 6, 4, 5),  # 2-D input
    ((1, 2), 1, 50, 8, 8, 256, 7),  # one query
    ((1, 2), 50, 1, 8, 8, 7, 256),  # one key
    ((1, 1), 300, 300, 64, 64, 256, 512),  # default-sized blocks larger than the input
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_equals_sdpa_float32(shape, causal):
    lead, L, S, E, Ev, bq, bk = shape
    q, k, v = qkv(*lead, L, E, S=S, Ev=Ev)
    out = tiled_attention(q, k, v, is_causal=causal, block_q=bq, block_k=bk)
    assert out.shape == (*lead, L, Ev) and out.dtype == torch.float32
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal), **F32)
    torch.testing.assert_close(out, reference(q, k, v, is_causal=causal), **F32)


@pytest.mark.parametrize("shape", SHAPES[:4])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_equals_sdpa_float64(shape, causal):
    lead, L, S, E, Ev, bq, bk = shape
    q, k, v = qkv(*lead, L, E, S=S, Ev=Ev, dtype=torch.float64)
    out = tiled_attention(q, k, v, is_causal=causal, block_q=bq, block_k=bk)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, reference(q, k, v, is_causal=causal), **F64)


def test_default_blocks_and_scale():
    q, k, v = qkv(1, 2, 700, 16, S=1100)
    torch.testing.assert_close(tiled_attention(q, k, v), reference(q, k, v), **F32)
    torch.testing.assert_close(
        tiled_attention(q, k, v, scale=0.3, block_q=128, block_k=100),
        reference(q, k, v, scale=0.3),
        **F32,
    )


def test_broadcast_leading_dims():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 10, 8, generator=g)
    k = torch.randn(1, 1, 12, 8, generator=g)  # shared by every batch and head
    v = torch.randn(2, 1, 12, 8, generator=g)
    torch.testing.assert_close(tiled_attention(q, k, v, block_q=3, block_k=5), reference(q, k, v), **F32)


@pytest.mark.parametrize("L,S,diagonal", [(7, 20, 13), (20, 7, -13), (10, 10, 3), (10, 10, -4)])
def test_causal_diagonal_matches_explicit_mask(L, S, diagonal):
    q, k, v = qkv(1, 2, L, 8, S=S, dtype=torch.float64)
    allowed = torch.ones(L, S, dtype=torch.bool).tril(diagonal)
    out = tiled_attention(q, k, v, is_causal=True, diagonal=diagonal, block_q=3, block_k=4)
    torch.testing.assert_close(out, reference(q, k, v, attn_mask=allowed), **F64)


def test_causal_lower_right_alignment():
    """diagonal = S - L is torch's lower-right causal alignment (decoding)."""
    q, k, v = qkv(1, 2, 5, 8, S=12)
    out = tiled_attention(q, k, v, is_causal=True, diagonal=12 - 5, block_q=2, block_k=3)
    allowed = torch.ones(5, 12, dtype=torch.bool).tril(12 - 5)
    torch.testing.assert_close(out, reference(q, k, v, attn_mask=allowed), **F32)


def test_padding_key_mask():
    B, H, L, S = 3, 2, 9, 14
    q, k, v = qkv(B, H, L, 8, S=S)
    lengths = torch.tensor([14, 5, 1])
    key_mask = torch.arange(S)[None, :] < lengths[:, None]  # (B, S) True = real token
    out = tiled_attention(q, k, v, key_mask=key_mask, block_q=4, block_k=4)
    ref = reference(q, k, v, attn_mask=key_mask[:, None, None, :])
    torch.testing.assert_close(out, ref, **F32)
    # padded keys do not matter: change them, the output stays
    k2, v2 = k.clone(), v.clone()
    k2[~key_mask[:, None, :, None].expand_as(k2)] = 1e4
    v2[~key_mask[:, None, :, None].expand_as(v2)] = -7.0
    torch.testing.assert_close(
        tiled_attention(q, k2, v2, key_mask=key_mask, block_q=4, block_k=4), out, **F32
    )
    # padding together with causal
    out_c = tiled_attention(q, k, v, key_mask=key_mask, is_causal=True, block_q=4, block_k=3)
    both = key_mask[:, None, None, :] & torch.ones(L, S, dtype=torch.bool).tril()
    torch.testing.assert_close(out_c, reference(q, k, v, attn_mask=both), **F32)


def test_bool_and_float_attn_mask():
    q, k, v = qkv(2, 2, 11, 8, S=13, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    allowed = torch.rand(2, 1, 11, 13, generator=g) > 0.4
    out = tiled_attention(q, k, v, attn_mask=allowed, block_q=4, block_k=5)
    torch.testing.assert_close(out, reference(q, k, v, attn_mask=allowed), **F64)
    bias = torch.randn(11, 13, generator=g, dtype=torch.float64)
    out = tiled_attention(q, k, v, attn_mask=bias, block_q=4, block_k=5)
    torch.testing.assert_close(out, reference(q, k, v, attn_mask=bias), **F64)


def test_fully_masked_rows_give_zeros():
    q, k, v = qkv(2, 2, 10, 8, S=12)
    allowed = torch.ones(2, 2, 10, 12, dtype=torch.bool)
    allowed[0, 1, 3] = False  # one fully masked row
    allowed[1, :, 7:] = False  # several
    allowed[1, 0, 2, :5] = False  # masked in the first key blocks only
    out = tiled_attention(q, k, v, attn_mask=allowed, block_q=3, block_k=4)
    assert not torch.isnan(out).any()
    assert torch.all(out[0, 1, 3] == 0) and torch.all(out[1, :, 7:] == 0)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), **F32)
    # every key padded; and float -inf masks
    none = torch.zeros(2, 12, dtype=torch.bool)
    assert torch.all(tiled_attention(q, k, v, key_mask=none) == 0)
    bias = torch.zeros(10, 12)
    bias[4] = -math.inf
    out = tiled_attention(q, k, v, attn_mask=bias, block_k=5)
    assert torch.all(out[:, :, 4] == 0) and not torch.isnan(out).any()
    # causal with rows that precede every key
    out = tiled_attention(q, k, v, is_causal=True, diagonal=-3, block_q=4, block_k=4)
    assert torch.all(out[:, :, :3] == 0) and not torch.isnan(out).any()


def test_large_scores_do_not_overflow():
    q, k, v = qkv(1, 1, 20, 8, S=30)
    out = tiled_attention(q * 300, k * 300, v, block_q=8, block_k=7)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, reference(q * 300, k * 300, v), atol=1e-4, rtol=1e-4)


def test_bad_input_raises_value_error_naming_shapes():
    q, k, v = qkv(1, 2, 5, 8, S=6)
    with pytest.raises(ValueError, match=r"\(1, 2, 5, 8\).*\(1, 2, 6, 7\)"):
        tiled_attention(q, k[..., :7], v)
    with pytest.raises(ValueError, match=r"\(1, 2, 6, 8\).*\(1, 2, 4, 8\)"):
        tiled_attention(q, k, v[..., :4, :])
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        tiled_attention(q, k, v, attn_mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(2, 6\)"):
        tiled_attention(q, k, v, key_mask=torch.ones(2, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(8,\)"):
        tiled_attention(q[0, 0, 0], k, v)
    with pytest.raises(ValueError, match="do not broadcast"):
        tiled_attention(q.expand(2, 2, 5, 8), k.expand(3, 2, 6, 8), v)
    with pytest.raises(ValueError, match="block_k"):
        tiled_attention(q, k, v, block_k=0)
    with pytest.raises(TypeError, match="is_causal"):
        tiled_attention(q, k, v, is_causal="yes")
    with pytest.raises(TypeError, match="attn_mask"):
        tiled_attention(q, k, v, attn_mask=[[True] * 6] * 5)
    with pytest.raises(TypeError, match="key_mask"):
        tiled_attention(q, k, v, key_mask=torch.ones(1, 6))


def test_errors_come_from_the_shared_validation():
    """efficient validates through attnlib._validate: same type and message as attention."""
    from attnlib.attention import scaled_dot_product_attention

    q, k, v = qkv(1, 2, 5, 8, S=6)
    for args in ((q, k.double(), v), (q, k, v.int()), (q, k[..., :7], v)):
        with pytest.raises((TypeError, ValueError)) as ours:
            tiled_attention(*args)
        with pytest.raises((TypeError, ValueError)) as theirs:
            scaled_dot_product_attention(*args)
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value).replace("tiled_attention", "") == str(theirs.value).replace(
            "scaled_dot_product_attention", ""
        )


@pytest.mark.parametrize(
    "options",
    [
        {"is_causal": "yes"},
        {"is_causal": 1},
        {"scale": "a"},
        {"scale": float("nan")},
        {"scale": float("inf")},
        {"scale": -1.0},
        {"attn_mask": torch.ones(3, 3, dtype=torch.bool)},
        {"attn_mask": torch.ones(5, 6, dtype=torch.int64)},
        {"attn_mask": [[True]]},
        {"is_causal": True, "attn_mask": torch.ones(5, 6, dtype=torch.bool)},
    ],
    ids=repr,
)
def test_flag_and_mask_errors_come_from_the_shared_validation(options):
    """Flags, scale and masks too: tiled_attention accepts what attention accepts, and refuses the
    rest with the same error type and message, up to the function's name."""
    from attnlib.attention import scaled_dot_product_attention

    q, k, v = qkv(1, 2, 5, 8, S=6)
    outcomes = []
    for fn in (tiled_attention, scaled_dot_product_attention):
        try:
            out = fn(q, k, v, **options)
        except (TypeError, ValueError) as error:
            outcomes.append((type(error), str(error).replace(fn.__name__, "FN")))
        else:
            outcomes.append(out)
    ours, theirs = outcomes
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), f"attention accepts {options}, tiled_attention raised {ours}"
        torch.testing.assert_close(ours, theirs, equal_nan=True, **F32)  # a NaN scale gives NaN, as torch
    else:
        assert ours == theirs, f"expected the shared validation's {theirs}, got {ours}"


@pytest.mark.parametrize("name", ["block_q", "block_k"])
@pytest.mark.parametrize("value", [0, -3, 2.5, "8", True])
def test_bad_block_sizes_are_refused_by_name(name, value):
    q, k, v = qkv(1, 2, 5, 8, S=6)
    with pytest.raises((TypeError, ValueError), match=name):
        tiled_attention(q, k, v, **{name: value})


# ---------------------------------------------------------------- MQA / GQA


@pytest.mark.parametrize("Hq,Hkv", [(8, 8), (8, 2), (8, 1), (6, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_equals_repeated_heads(Hq, Hkv, causal):
    g = torch.Generator().manual_seed(Hq * 10 + Hkv)
    q = torch.randn(2, Hq, 13, 8, generator=g)
    k = torch.randn(2, Hkv, 17, 8, generator=g)
    v = torch.randn(2, Hkv, 17, 4, generator=g)
    out = tiled_attention(q, k, v, is_causal=causal, enable_gqa=True, block_q=5, block_k=6)
    rep = Hq // Hkv
    expected = reference(q, repeat_kv(k, rep), repeat_kv(v, rep), is_causal=causal)
    torch.testing.assert_close(out, expected, **F32)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True), **F32
    )
    # grouped_query_attention is the same function under its own name, positional masks included
    assert torch.equal(grouped_query_attention(q, k, v, None, None, causal, block_q=5, block_k=6), out)


def test_gqa_with_masks():
    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, 4, 9, 8, generator=g)
    k = torch.randn(2, 2, 11, 8, generator=g)
    v = torch.randn(2, 2, 11, 8, generator=g)
    key_mask = torch.ones(2, 11, dtype=torch.bool)
    key_mask[1, 6:] = False
    allowed = torch.rand(2, 4, 9, 11, generator=g) > 0.3
    allowed[0, 3, 2] = False
    out = grouped_query_attention(q, k, v, attn_mask=allowed, key_mask=key_mask, block_q=4, block_k=4)
    both = allowed & key_mask[:, None, None, :]
    expected = reference(q, repeat_kv(k, 2), repeat_kv(v, 2), attn_mask=both)
    torch.testing.assert_close(out, expected, **F32)
    assert torch.all(out[0, 3, 2] == 0)


def test_gqa_bad_heads():
    q, k, v = qkv(1, 6, 4, 8)
    with pytest.raises(ValueError, match=r"enable_gqa=True\): query heads Hq=6.*Hkv=4.*\(1, 6, 4, 8\)"):
        grouped_query_attention(q, k[:, :4], v[:, :4])
    with pytest.raises(ValueError, match=r"query must have shape \(B, H, seq, dim\), got \(6, 4, 8\)"):
        tiled_attention(q[0], k, v, enable_gqa=True)  # torch takes 3-D here; we want (B, H, L, E)
    with pytest.raises(TypeError, match="enable_gqa must be a bool, got int"):
        tiled_attention(q, k, v, enable_gqa=1)
    with pytest.raises(TypeError, match="grouped_query_attention: .*enable_gqa"):  # it sets the flag itself
        grouped_query_attention(q, k, v, enable_gqa=False)
    with pytest.raises(TypeError, match="grouped_query_attention: too many positional arguments"):
        grouped_query_attention(q, k, v, None, None, True, 0.5, 0)  # diagonal is keyword-only, as in tiled
    # without the flag, different head counts are a broadcasting error, as in torch
    with pytest.raises(ValueError, match=r"tiled_attention: .*\(1, 6, 4, 8\)"):
        tiled_attention(q, k[:, :3], v[:, :3])


def test_gqa_signature_is_tiled_attentions_without_the_flag():
    tiled = inspect.signature(tiled_attention).parameters
    gqa = inspect.signature(grouped_query_attention).parameters
    assert list(gqa) == [name for name in tiled if name != "enable_gqa"]
    assert all(gqa[name] == tiled[name] for name in gqa)  # kinds, defaults and annotations


# ---------------------------------------------------------------- KV cache


@pytest.mark.parametrize("Hq,Hkv", [(4, 4), (4, 2), (4, 1)])
def test_kv_cache_decoding_equals_full_causal(Hq, Hkv):
    B, T, E = 2, 15, 8
    g = torch.Generator().manual_seed(11)
    q = torch.randn(B, Hq, T, E, generator=g)
    k = torch.randn(B, Hkv, T, E, generator=g)
    v = torch.randn(B, Hkv, T, E, generator=g)
    full = reference(q, repeat_kv(k, Hq // Hkv), repeat_kv(v, Hq // Hkv), is_causal=True)

    cache = KVCache(batch=B, kv_heads=Hkv, capacity=T, head_dim=E)
    # a prompt of 4 tokens at once, then one token at a time
    outs = [decode_step(q[:, :, :4], k[:, :, :4], v[:, :, :4], cache)]
    for t in range(4, T):
        outs.append(decode_step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], cache))
    torch.testing.assert_close(torch.cat(outs, dim=2), full, **F32)
    assert len(cache) == T
    torch.testing.assert_close(cache.keys, k)


def test_kv_cache_memory_and_errors():
    cache = KVCache(batch=2, kv_heads=4, capacity=10, head_dim=8)
    assert cache.nbytes == kv_cache_bytes(1, 2, 4, 10, 8) == 2 * 2 * 4 * 10 * 8 * 4
    assert kv_cache_bytes(32, 1, 8, 4096, 128, torch.float16) == 2 * 32 * 8 * 4096 * 128 * 2
    assert kv_cache_bytes(2, 1, 1, 10, 4, dtype=1) == 160
    # GQA saving: 32 query heads sharing 8 key/value heads need 4x less cache
    assert kv_cache_bytes(1, 1, 32, 100, 64) == 4 * kv_cache_bytes(1, 1, 8, 100, 64)
    with pytest.raises(ValueError, match=r"\(2, 4, t, 8\).*\(2, 3, 1, 8\)"):
        cache.append(torch.zeros(2, 3, 1, 8), torch.zeros(2, 3, 1, 8))
    cache.append(torch.zeros(2, 4, 10, 8), torch.zeros(2, 4, 10, 8))
    with pytest.raises(ValueError, match="capacity 10"):
        cache.append(torch.zeros(2, 4, 1, 8), torch.zeros(2, 4, 1, 8))
    cache.reset()
    assert len(cache) == 0
    with pytest.raises(ValueError, match="kv_cache_bytes: kv_heads must be a non-negative integer, got -1"):
        kv_cache_bytes(1, 1, -1, 10, 4)
    with pytest.raises(ValueError, match="kv_cache_bytes: head_dim must be a non-negative integer, got True"):
        kv_cache_bytes(1, 1, 1, 10, True)
    with pytest.raises(
        ValueError, match="kv_cache_bytes: dtype must be a torch.dtype or a positive byte count"
    ):
        kv_cache_bytes(1, 1, 1, 10, 4, dtype=0)
    assert kv_cache_bytes(0, 1, 1, 10, 4) == 0  # zero is a size here: nothing cached
    with pytest.raises(ValueError, match="KVCache: batch must be a positive integer, got 0"):
        KVCache(batch=0, kv_heads=1, capacity=1, head_dim=1)
    with pytest.raises(ValueError, match="KVCache: value_dim must be a positive integer, got 2.0"):
        KVCache(batch=1, kv_heads=1, capacity=1, head_dim=1, value_dim=2.0)
    with pytest.raises(TypeError, match="KVCache: capacity must be an integer, got str"):
        KVCache(batch=1, kv_heads=1, capacity="8", head_dim=1)
    with pytest.raises(ValueError, match="tiled_attention: block_q must be a positive integer, got 0"):
        tiled_attention(*qkv(1, 1, 2, 4), block_q=0)


# ---------------------------------------------------------------- issue 13: precision, edges


def test_float16_accumulates_in_float32():
    """70,000 zero keys: the running sum 70,000 overflows no float32 (it would fp16's 65504)."""
    q = torch.zeros(1, 1, 2, 8, dtype=torch.float16)
    k = torch.zeros(1, 1, 70_000, 8, dtype=torch.float16)
    v = torch.ones(1, 1, 70_000, 4, dtype=torch.float16)
    sdpa = F.scaled_dot_product_attention(q, k, v)
    for block_k in (512, 70_000):
        out = tiled_attention(q, k, v, block_k=block_k)
        assert out.dtype == torch.float16
        assert torch.all(out == 1.0)  # the exact answer (SDPA's own rounding gives 1.001)
        torch.testing.assert_close(out, sdpa, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_low_precision_equals_sdpa(dtype, tol):
    q, k, v = qkv(2, 3, 37, 16, S=45, dtype=dtype)
    for kw in ({}, {"is_causal": True}):
        out = tiled_attention(q, k, v, block_q=8, block_k=16, **kw)
        assert out.dtype == dtype
        torch.testing.assert_close(out, reference(q, k, v, **kw), atol=tol, rtol=tol)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, **kw), atol=tol, rtol=tol)
    # scaled logits far beyond float16's largest number (65504) are fine
    big = torch.full((1, 1, 3, 8), 300.0, dtype=dtype)  # logits 8 * 300^2 / sqrt(8) > 65504
    out = tiled_attention(big, big, v[:1, :1, :3], block_k=2)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, reference(big, big, v[:1, :1, :3]), atol=tol, rtol=tol)


def test_low_precision_gqa_and_decode():
    q, k, v = qkv(1, 4, 9, 8, dtype=torch.bfloat16)
    out = grouped_query_attention(q, k[:, :2], v[:, :2], block_q=4, block_k=4)
    expected = reference(q, repeat_kv(k[:, :2], 2), repeat_kv(v[:, :2], 2))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, atol=1.6e-2, rtol=1.6e-2)
    cache = KVCache(batch=1, kv_heads=4, capacity=9, head_dim=8, dtype=torch.float16)
    h = q.half(), k.half(), v.half()
    out = decode_step(*h, cache)
    torch.testing.assert_close(out, reference(*h, is_causal=True), atol=2e-3, rtol=2e-3)


def definition(q, k, v):
    """softmax(q k^T / sqrt(E)) v written out in float64: the mathematics, no fused kernel."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    return (torch.softmax(scores, dim=-1) @ v.double()).to(q.dtype)


@pytest.mark.parametrize("where", [0, 5, 11])  # the NaN key in the first, middle, last block
def test_nan_propagates_like_torch_whatever_the_block(where):
    """A NaN poisons exactly the rows the definition says, whatever the tile size.

    Compared with the definition (softmax(q k^T / sqrt(E)) v, written out), not
    with F.scaled_dot_product_attention: where a *query* holds a NaN, torch
    2.13's fused CPU kernel gives a NaN row on its AVX2 and default paths but
    finite numbers on its AVX-512 path (it leaves the answer to the kernel), so
    a test pinned to SDPA's pattern passes on one CPU and fails on another.
    Rows without a NaN are still compared with SDPA on every path.
    """
    q, k, v = qkv(1, 2, 6, 8, S=12)
    k[0, 0, where, 3] = float("nan")  # every row of head 0 sees a NaN score
    q[0, 1, 2, 0] = float("nan")  # one query row of head 1
    expected = definition(q, k, v)
    nan_rows = torch.zeros(1, 2, 6, dtype=torch.bool)
    nan_rows[0, 0] = True
    nan_rows[0, 1, 2] = True
    assert torch.equal(torch.isnan(expected).any(-1), nan_rows)  # the definition, as stated above
    assert torch.equal(torch.isnan(expected).all(-1), nan_rows)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert torch.isnan(ref[0, 0]).all()  # every kernel agrees on head 0
    for bk in (1, 4, 12):
        out = tiled_attention(q, k, v, block_q=4, block_k=bk)
        assert torch.equal(torch.isnan(out), torch.isnan(expected)), f"block_k={bk}"
        clean = ~nan_rows[0, 1]
        torch.testing.assert_close(out[0, 1, clean], expected[0, 1, clean], **F32)
        torch.testing.assert_close(out[0, 1, clean], ref[0, 1, clean], **F32)


@pytest.mark.parametrize("where", [0, 4, 7])
def test_numpy_online_softmax_nan_whatever_the_block(where):
    x = np.arange(8.0)
    x[where] = np.nan
    for block in (1, 3, 8):
        w, states = online_softmax_numpy(x, block)
        assert np.isnan(w).all() and np.isnan(states[-1].l)
        out, _ = online_attention_row_numpy(np.ones(2), np.stack([x, x], 1), np.ones((8, 3)), block)
        assert np.isnan(out).all()
    m, l = online_softmax_update(-math.inf, 0.0, np.array([1.0, np.nan]))
    assert math.isnan(m) and math.isnan(l)


def test_empty_sequences_and_zero_embedding_like_torch():
    q, k, v = qkv(2, 3, 5, 8, S=7)
    for a, b, c in (
        (q, k[..., :0, :], v[..., :0, :]),  # S = 0: zeros, as torch
        (q[..., :0, :], k, v),  # L = 0: empty
        (q[..., :0], k[..., :0], v),
    ):  # E = 0: every key weighs the same
        expected = F.scaled_dot_product_attention(a, b, c)
        for fn in (tiled_attention, grouped_query_attention):
            out = fn(a, b, c, block_q=2, block_k=3)
            assert out.shape == expected.shape
            torch.testing.assert_close(out, expected, **F32)
    out = tiled_attention(q, k[..., :0, :], v[..., :0, :])
    assert torch.all(out == 0)


def test_decode_step_refused_call_leaves_the_cache_unchanged():
    cache = KVCache(batch=1, kv_heads=2, capacity=8, head_dim=4)
    q, k, v = qkv(1, 2, 3, 4)
    decode_step(q, k, v, cache)
    keys = cache.keys.clone()
    bad_calls = [
        ((q[:, :, :1, :3], k[:, :, :1], v[:, :, :1]), ValueError, r"decode_step: query \(1, 2, 1, 3\)"),
        ((q, k[:, :, :1], v[:, :, :1]), ValueError, r"decode_step: .* same t; got query \(1, 2, 3, 4\)"),
        ((q[:, :, :1].double(), k[:, :, :1].double(), v[:, :, :1].double()), TypeError, "share one dtype"),
        ((q[:, :1, :1].expand(1, 3, 1, 4), k[:, :, :1], v[:, :, :1]), ValueError, "Hq a multiple"),
        ((q[:, :, :1], k[:, :, :1], v[:, :, :1, :2]), ValueError, r"decode_step: .* value \(1, 2, 1, 2\)"),
        (
            (q.repeat(1, 1, 3, 1), k.repeat(1, 1, 3, 1), v.repeat(1, 1, 3, 1)),
            ValueError,
            "3 \\+ 9 .* capacity 8",
        ),
    ]
    for args, error, match in bad_calls:
        with pytest.raises(error, match=match):
            decode_step(*args, cache)
        assert len(cache) == 3 and torch.equal(cache.keys, keys)


def test_kv_cache_refuses_non_float_dtypes():
    for dtype in (torch.int64, torch.bool, "float32"):
        with pytest.raises(TypeError, match="dtype"):
            KVCache(batch=1, kv_heads=1, capacity=2, head_dim=2, dtype=dtype)
    assert KVCache(1, 1, 2, 2, dtype=torch.bfloat16).keys.dtype == torch.bfloat16


def test_repeat_kv_refuses_zero_and_non_int():
    x = torch.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match="n_rep.*0"):
        repeat_kv(x, 0)
    with pytest.raises(ValueError, match="n_rep"):
        repeat_kv(x, -1)
    with pytest.raises(ValueError, match="repeat_kv: n_rep must be a positive integer, got 2.0"):
        repeat_kv(x, 2.0)
    with pytest.raises(TypeError, match="repeat_kv: n_rep must be an integer, got str"):
        repeat_kv(x, "2")
    assert repeat_kv(x, 3).shape == (1, 6, 3, 4)


def test_the_online_softmax_update_exists_once(monkeypatch):
    """online_update_, tile_step and the tiled loop's exact fold run the very same rescaling."""
    import attnlib.efficient.online as online

    calls = []
    original = online.online_rescale_

    def counting(m, l, acc, p, exp_=torch.Tensor.exp_):
        calls.append(exp_ is torch.Tensor.exp2_)
        return original(m, l, acc, p, exp_)

    monkeypatch.setattr(online, "online_rescale_", counting)
    q, k, v = qkv(1, 1, 4, 8)
    m, l = torch.full((1, 1, 4, 1), -math.inf), torch.zeros(1, 1, 4, 1)
    eff.tile_step(m, l, torch.zeros(1, 1, 4, 8), q, k, v)
    eff.tiled_attention(q, k, v, block_k=2)
    assert calls == [False, True, True]
