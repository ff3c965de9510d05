"""padding_mask, causal_mask, combine_masks, as_additive_mask.

Tolerances: see tests/library/helpers_numerics.py (float64 atol=rtol=1e-12).
"""

import pytest
import torch
import torch.nn.functional as F
from helpers_numerics import assert_close64, randn

from attnlib.masks import as_additive_mask, causal_mask, combine_masks, padding_mask


def test_padding_mask_values():
    expected = torch.tensor([[True, True, False], [True, True, True], [False, False, False]])
    for lengths in ([2, 3, 0], (2, 3, 0), torch.tensor([2, 3, 0])):
        out = padding_mask(lengths)
        assert out.dtype == torch.bool
        assert torch.equal(out, expected)
    out = padding_mask(torch.tensor([1, 2], dtype=torch.int32), max_len=4)
    assert torch.equal(out, torch.tensor([[True, False, False, False], [True, True, False, False]]))
    assert padding_mask([], max_len=3).shape == (0, 3)


@pytest.mark.parametrize(
    "lengths,max_len,match",
    [
        ([2, 5, 7], 4, r"\[5, 7\].*max_len=4"),
        ([2, -1], None, r"\[-1\]"),
        ([2, 2.5], None, r"\[2\.5\]"),
        (torch.tensor([1.0, 2.0]), None, r"\[1\.0, 2\.0\]"),
        ([True, 2], None, r"\[True\]"),
        (torch.tensor([[1, 2]]), None, r"\(1, 2\)"),
        ([1, 2], 2.0, r"2\.0"),
    ],
)
def test_padding_mask_errors(lengths, max_len, match):
    with pytest.raises(ValueError, match=match):
        padding_mask(lengths, max_len)


@pytest.mark.parametrize("L,S", [(4, 4), (3, 6), (6, 3), (1, 5)])
def test_causal_mask_matches_torch_is_causal(L, S):
    mask = causal_mask(L, S)
    assert mask.shape == (L, S) and mask.dtype == torch.bool
    i, j = torch.arange(L)[:, None], torch.arange(S)[None, :]
    assert torch.equal(mask, j <= i)
    q, k, v = randn(2, L, 4, seed=1), randn(2, S, 4, seed=2), randn(2, S, 3, seed=3)
    assert_close64(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


def test_causal_mask_diagonal_and_kv_cache():
    assert torch.equal(causal_mask(3), torch.ones(3, 3, dtype=torch.bool).tril())
    assert torch.equal(causal_mask(3, diagonal=-1), torch.ones(3, 3, dtype=torch.bool).tril(-1))
    # lower-right alignment: the 2 new queries are the last 2 of 5 positions
    kv = causal_mask(2, 5, diagonal=3)
    assert torch.equal(kv, torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool))
    assert torch.equal(causal_mask(5)[-2:], kv)
    assert causal_mask(0, 3).shape == (0, 3)


def test_causal_mask_errors():
    with pytest.raises(ValueError, match="-2"):
        causal_mask(-2)
    with pytest.raises(ValueError, match="2.5"):
        causal_mask(3, 2.5)
    with pytest.raises(ValueError, match="0.5"):
        causal_mask(3, diagonal=0.5)


def test_combine_masks():
    a = torch.tensor([True, False, True])  # (S,)
    b = causal_mask(2, 3)  # (L, S)
    c = torch.tensor([[[True, True, False]], [[False, True, True]]])  # (B, 1, S)
    out = combine_masks(a, None, b, c)
    assert out.shape == (2, 2, 3)
    assert torch.equal(out, a & b & c)
    assert torch.equal(combine_masks(None, a), a)
    assert combine_masks() is None and combine_masks(None, None) is None
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        combine_masks(a, torch.ones(4, dtype=torch.bool))
    with pytest.raises(TypeError, match="float"):
        combine_masks(a, torch.ones(3))


def test_as_additive_mask():
    mask = torch.tensor([[True, False], [False, False]])
    out = as_additive_mask(mask, torch.float64)
    assert out.dtype == torch.float64
    assert torch.equal(out, torch.tensor([[0.0, float("-inf")], [float("-inf")] * 2]).double())
    assert as_additive_mask(None, torch.float32) is None
    assert as_additive_mask(out, torch.float32).dtype == torch.float32
    assert as_additive_mask(mask).dtype == torch.float32
    # bool and additive masks give the same attention
    q, k, v = randn(2, 3, 4, seed=4), randn(2, 5, 4, seed=5), randn(2, 5, 2, seed=6)
    m = padding_mask([3, 5])[:, None, :]  # (B, 1, S)
    assert_close64(
        F.scaled_dot_product_attention(q, k, v, attn_mask=as_additive_mask(m, torch.float64)),
        F.scaled_dot_product_attention(q, k, v, attn_mask=m),
    )
    with pytest.raises(TypeError, match="int64"):
        as_additive_mask(torch.ones(2, dtype=torch.long))
