"""Property tests (hypothesis) of attention: invariances every correct attention obeys.

Tolerances: see tests/library/helpers_numerics.py; all properties run in float64 and
are checked to atol=rtol=1e-12. Examples are drawn as small shapes plus a seed
(the tensors come from a seeded torch generator), which keeps each example
cheap; max_examples=50 per property.
"""

import numpy as np
import torch
from helpers_numerics import ATOL64, RTOL64, assert_close64
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib.numpy as anp
from attnlib.attention import scaled_dot_product_attention
from attnlib.masks import padding_mask
from attnlib.modules import MultiHeadAttention

SETTINGS = settings(max_examples=50, deadline=None)

dims = st.integers(1, 5)
seeds = st.integers(0, 2**31 - 1)
magnitudes = st.sampled_from([0.1, 1.0, 10.0, 1e3])


def tensors(seed, *shapes, magnitude=1.0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, dtype=torch.float64, generator=gen) * magnitude for s in shapes]


def random_mask(seed, shape, p_keep=0.6):
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.rand(shape, generator=gen) < p_keep


@SETTINGS
@given(B=st.integers(1, 3), L=dims, S=dims, E=dims, seed=seeds, mag=magnitudes, is_causal=st.booleans())
def test_weight_rows_sum_to_one_or_zero(B, L, S, E, seed, mag, is_causal):
    q, k, v = tensors(seed, (B, L, E), (B, S, E), (B, S, 2), magnitude=mag)
    mask = random_mask(seed, (B, L, S))
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=True)
    allowed = mask & torch.ones(L, S, dtype=torch.bool).tril() if is_causal else mask
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w >= 0).all()
    assert torch.all(w[~allowed] == 0)
    assert_close64(w.sum(-1), allowed.any(-1).double())


@SETTINGS
@given(B=st.integers(1, 3), L=dims, S=dims, E=dims, seed=seeds, data=st.data())
def test_permutation_equivariance(B, L, S, E, seed, data):
    q, k, v = tensors(seed, (B, L, E), (B, S, E), (B, S, 3))
    mask = random_mask(seed, (B, L, S))
    p_q = torch.tensor(data.draw(st.permutations(range(L))))
    p_k = torch.tensor(data.draw(st.permutations(range(S))))
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    # permuting queries (and the mask's rows) permutes the outputs
    out_q = scaled_dot_product_attention(q[:, p_q], k, v, attn_mask=mask[:, p_q])
    assert_close64(out_q, out[:, p_q])
    # permuting keys and values together (and the mask's columns) changes nothing
    out_k = scaled_dot_product_attention(q, k[:, p_k], v[:, p_k], attn_mask=mask[..., p_k])
    torch.testing.assert_close(out_k, out, atol=ATOL64, rtol=RTOL64)


@SETTINGS
@given(B=st.integers(1, 3), L=dims, S=dims, E=dims, seed=seeds, data=st.data())
def test_padded_keys_are_ignored(B, L, S, E, seed, data):
    lengths = data.draw(st.lists(st.integers(0, S), min_size=B, max_size=B))
    key_mask = padding_mask(lengths, max_len=S)  # (B, S)
    q, k, v, k_noise, v_noise = tensors(seed, (B, L, E), (B, S, E), (B, S, 3), (B, S, E), (B, S, 3))
    pad = ~key_mask[..., None]
    k2 = torch.where(pad, k_noise * 1e3, k)
    v2 = torch.where(pad, v_noise * 1e3, v)
    mask = key_mask[:, None, :]  # (B, 1, S)
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close64(scaled_dot_product_attention(q, k2, v2, attn_mask=mask), out)
    # and through the multi-head module's key_mask
    torch.manual_seed(seed % 1000)
    mha = MultiHeadAttention(4, 2, kdim=E, vdim=3).double()
    x = tensors(seed + 2, (B, L, 4))[0]
    out_m, _ = mha(x, k, v, key_mask=key_mask)
    out_m2, _ = mha(x, k2, v2, key_mask=key_mask)
    assert_close64(out_m2, out_m)


@SETTINGS
@given(B=st.integers(1, 2), T=st.integers(2, 6), E=dims, seed=seeds, data=st.data())
def test_no_future_leakage_under_causal_mask(B, T, E, seed, data):
    t = data.draw(st.integers(0, T - 2))
    q, k, v, noise_q, noise_k, noise_v = tensors(
        seed, (B, T, E), (B, T, E), (B, T, 3), (B, T, E), (B, T, E), (B, T, 3)
    )
    future = torch.arange(T)[None, :, None] > t  # positions after t

    def perturb(x, noise):
        return torch.where(future, x + noise, x)

    q2, k2, v2 = perturb(q, noise_q), perturb(k, noise_k), perturb(v, noise_v)
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    out2 = scaled_dot_product_attention(q2, k2, v2, is_causal=True)
    assert_close64(out2[:, : t + 1], out[:, : t + 1])
    torch.manual_seed(seed % 1000)
    mha = MultiHeadAttention(E * 2, 2, kdim=E, vdim=3).double()
    x, x_noise = tensors(seed + 3, (B, T, E * 2), (B, T, E * 2))
    x2 = perturb(x, x_noise)
    y, _ = mha(x, k, v, is_causal=True)
    y2, _ = mha(x2, k2, v2, is_causal=True)
    assert_close64(y2[:, : t + 1], y[:, : t + 1])


@SETTINGS
@given(
    B=st.integers(1, 3),
    L=dims,
    S=dims,
    E=dims,
    seed=seeds,
    mag=magnitudes,
    is_causal=st.booleans(),
    float_mask=st.booleans(),
)
def test_numpy_backend_equals_torch_backend(B, L, S, E, seed, mag, is_causal, float_mask):
    q, k, v = tensors(seed, (B, L, E), (B, S, E), (B, S, 2), magnitude=mag)
    mask = random_mask(seed, (B, 1, S))
    if float_mask:
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=True)
    out_np, w_np = anp.scaled_dot_product_attention(
        q.numpy(),
        k.numpy(),
        v.numpy(),
        attn_mask=mask.numpy(),
        is_causal=is_causal,
        return_weights=True,
    )
    # scores of order 1e3 * 1e3 carry absolute rounding of ~1e-10; compare relatively there
    atol = ATOL64 * max(1.0, mag * mag)
    np.testing.assert_allclose(out_np, out.numpy(), atol=atol, rtol=RTOL64)
    np.testing.assert_allclose(w_np, w.numpy(), atol=atol, rtol=RTOL64)
