"""scaled_dot_product_attention against torch.nn.functional.scaled_dot_product_attention.

Tolerances: see tests/library/helpers_numerics.py (float64 atol=rtol=1e-12, float32
atol 1e-6 vs the float64 reference, half precision atol 1e-2).
"""

import itertools

import pytest
import torch
from helpers_numerics import (
    ATOL16,
    assert_close32,
    assert_close64,
    bool_to_float_mask,
    randn,
    torch_sdpa_reference,
    weights_reference,
)

from attnlib.attention import scaled_dot_product_attention

# (B, h, L, S, E, Ev): L != S and E != Ev throughout, one square case
SHAPES = [(1, 1, 3, 5, 4, 6), (2, 3, 5, 4, 8, 3), (3, 4, 4, 4, 2, 5)]
MASK_KINDS = [None, "S", "LS", "B11S", "B1LS"]


def make_mask(kind, B, L, S, seed):
    shape = {"S": (S,), "LS": (L, S), "B11S": (B, 1, 1, S), "B1LS": (B, 1, L, S)}[kind]
    gen = torch.Generator().manual_seed(seed)
    # keep ~1/3 masked so that some rows end up fully masked in the small shapes
    return torch.rand(shape, generator=gen) > 0.35


@pytest.mark.parametrize(
    "shape,mask_kind,mask_dtype,is_causal",
    [
        (s, m, d, c)
        for s, m, d, c in itertools.product(SHAPES, MASK_KINDS, ["bool", "float"], [False, True])
        if not (m is None and d == "float")
    ],
)
def test_matches_torch_sdpa(shape, mask_kind, mask_dtype, is_causal):
    B, h, L, S, E, Ev = shape
    q, k, v = randn(B, h, L, E, seed=1), randn(B, h, S, E, seed=2), randn(B, h, S, Ev, seed=3)
    mask = None if mask_kind is None else make_mask(mask_kind, B, L, S, seed=4)
    if mask is not None and mask_dtype == "float":
        mask = bool_to_float_mask(mask) + randn(*mask.shape, seed=5)  # -inf and finite biases
    ref = torch_sdpa_reference(q, k, v, attn_mask=mask, is_causal=is_causal)
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=True)
    assert out.shape == (B, h, L, Ev) and w.shape == (B, h, L, S)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert_close64(out, ref)
    assert_close64(w, weights_reference(q, k, attn_mask=mask, is_causal=is_causal))
    # float32 inputs against the float64 reference
    mask32 = mask if mask is None or mask.dtype == torch.bool else mask.float()
    out32 = scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=mask32, is_causal=is_causal
    )
    assert_close32(out32, ref)


def test_leading_dims_broadcast():
    q = randn(2, 3, 4, 5, seed=6)  # (B, h, L, E)
    k = randn(1, 3, 6, 5, seed=7)  # shared over the batch
    v = randn(2, 1, 6, 2, seed=8)  # shared over the heads
    mask = torch.rand(6, generator=torch.Generator().manual_seed(9)) > 0.3
    mask[0] = True
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.shape == (2, 3, 4, 2)
    ref = torch_sdpa_reference(q, k.expand(2, 3, 6, 5), v.expand(2, 3, 6, 2), attn_mask=mask)
    assert_close64(out, ref)
    # an unbatched (L, E) query against a batch of keys
    out2 = scaled_dot_product_attention(q[0, 0], k, v)
    assert out2.shape == (2, 3, 4, 2)


@pytest.mark.parametrize("scale", [0.1, 2.0])
def test_scale(scale):
    q, k, v = randn(2, 3, 4, seed=10), randn(2, 5, 4, seed=11), randn(2, 5, 3, seed=12)
    assert_close64(
        scaled_dot_product_attention(q, k, v, scale=scale),
        torch_sdpa_reference(q, k, v, scale=scale),
    )


def test_fully_masked_rows_are_zero():
    q, k, v = randn(2, 3, 4, seed=13), randn(2, 5, 4, seed=14), randn(2, 5, 6, seed=15)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    mask[1] = False
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    ref = torch_sdpa_reference(q, k, v, attn_mask=mask)  # torch 2.13 also returns zeros here
    assert not torch.isnan(out).any()
    assert_close64(out, ref)
    assert torch.equal(out[0, 1], torch.zeros(6, dtype=torch.float64))
    assert torch.equal(out[1], torch.zeros(3, 6, dtype=torch.float64))
    assert torch.equal(w[0, 1], torch.zeros(5, dtype=torch.float64))
    assert_close64(w.sum(-1), (mask.any(-1)).double())
    # the same rows masked by a -inf float mask
    fout = scaled_dot_product_attention(q, k, v, attn_mask=bool_to_float_mask(mask))
    assert_close64(fout, out)
    # causal with a negative shift via the mask: row 0 of a strictly-lower mask is empty
    strict = torch.ones(3, 5, dtype=torch.bool).tril(-1)
    out3 = scaled_dot_product_attention(q, k, v, attn_mask=strict)
    assert torch.equal(out3[:, 0], torch.zeros(2, 6, dtype=torch.float64))


def test_gradients_finite_with_fully_masked_rows():
    q = randn(2, 3, 4, seed=16).requires_grad_()
    k = randn(2, 5, 4, seed=17).requires_grad_()
    v = randn(2, 5, 6, seed=18).requires_grad_()
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    scaled_dot_product_attention(q, k, v, attn_mask=mask).pow(2).sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.equal(q.grad[:, 1], torch.zeros(2, 4, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_no_overflow(dtype):
    # scores of about 64 * 30 * 30 = 57600 are near float16's limit of 65504
    q = (randn(2, 3, 64, seed=19) * 30).to(dtype)
    k = (randn(2, 5, 64, seed=20) * 30).to(dtype)
    v = randn(2, 5, 4, seed=21).to(dtype)
    out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert out.dtype == dtype and w.dtype == dtype
    assert torch.isfinite(out).all()
    ref = torch_sdpa_reference(q.double(), k.double(), v.double())
    torch.testing.assert_close(out.double(), ref, atol=ATOL16 * 5, rtol=1e-2)


def test_returns_tensor_without_weights():
    q = randn(3, 4)
    out = scaled_dot_product_attention(q, q, q)
    assert isinstance(out, torch.Tensor) and out.shape == (3, 4)


@pytest.mark.parametrize(
    "args,kwargs,exc,match",
    [
        ((randn(4), randn(5, 4), randn(5, 3)), {}, ValueError, r"query.*\(4,\)"),
        ((randn(3, 4), randn(5, 6), randn(5, 3)), {}, ValueError, r"\(3, 4\).*\(5, 6\)"),
        ((randn(3, 4), randn(5, 4), randn(6, 3)), {}, ValueError, r"\(5, 4\).*\(6, 3\)"),
        (
            (randn(2, 3, 4), randn(3, 5, 4), randn(3, 5, 2)),
            {},
            ValueError,
            r"\(2, 3, 4\).*\(3, 5, 4\)",
        ),
        (
            (randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 2)),
            {"attn_mask": torch.ones(3, 4, dtype=torch.bool)},
            ValueError,
            r"\(3, 4\).*\(2, 3, 5\)",
        ),
        (
            (randn(3, 4), randn(5, 4), randn(5, 2)),
            {"attn_mask": torch.ones(2, 3, 5, dtype=torch.bool)},
            ValueError,
            r"\(2, 3, 5\).*\(3, 5\)",
        ),
        (
            (torch.ones(3, 4, dtype=torch.long), randn(5, 4), randn(5, 2)),
            {},
            TypeError,
            "query.*int64",
        ),
        ((randn(3, 4), randn(5, 4).float(), randn(5, 2)), {}, TypeError, "float64.*float32"),
        (
            (randn(3, 4), randn(5, 4), randn(5, 2)),
            {"attn_mask": torch.ones(3, 5, dtype=torch.long)},
            TypeError,
            "int64",
        ),
    ],
)
def test_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        scaled_dot_product_attention(*args, **kwargs)
