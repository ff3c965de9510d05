"""Every deliberate difference between attnlib and PyTorch, measured on the pinned torch.

Each test shows one entry of book/differences.md ("attnlib and PyTorch"): what torch
does, what attnlib does instead, on the same inputs. If a torch upgrade changes its
side, the test fails and the page must change with it. float64 throughout; torch's
modules in eval mode.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlib
from attnlib.modules import MultiHeadAttention

TORCH_VERSION = "2.13.0"


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def pair(E=4, h=2, seed=0):
    torch.manual_seed(seed)
    ours = MultiHeadAttention(E, h).double()
    with torch.no_grad():
        ours.out_proj.bias.normal_()
    return ours, ours.to_torch().eval()


def test_pinned_torch():
    assert torch.__version__.split("+")[0] == TORCH_VERSION


def test_fully_masked_row_softmax_is_zero_not_nan():
    row = torch.full((3,), float("-inf"), dtype=torch.float64)
    assert torch.isnan(torch.softmax(row, -1)).all()  # torch
    assert torch.equal(attnlib.softmax(row), torch.zeros(3, dtype=torch.float64))  # attnlib
    assert torch.isnan(torch.log_softmax(row, -1)).all()
    assert torch.equal(attnlib.log_softmax(row), row)  # -inf everywhere
    mask = torch.tensor([False, False, False])
    assert torch.equal(attnlib.masked_softmax(randn(3), mask), torch.zeros(3, dtype=torch.float64))


def test_fully_masked_row_in_sdpa_is_zero_in_both():
    """Not a difference on torch 2.13: F.scaled_dot_product_attention also returns zeros."""
    q, k, v = randn(1, 2, 3), randn(1, 4, 3, seed=1), randn(1, 4, 5, seed=2)
    mask = torch.ones(2, 4, dtype=torch.bool)
    mask[0] = False
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ours = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(theirs[0, 0], torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=1e-12)


def test_fully_masked_row_in_multihead_attention_is_not_nan():
    ours, theirs = pair()
    x = randn(2, 3, 4)
    key_mask = torch.ones(2, 3, dtype=torch.bool)
    key_mask[0] = False  # the first sequence is all padding
    out_t, w_t = theirs(x, x, x, key_padding_mask=~key_mask)
    out_o, w_o = ours(x, x, x, key_mask=key_mask, need_weights=True)
    assert torch.isnan(out_t[0]).all() and torch.isnan(w_t[0]).all()  # torch: NaN
    assert torch.equal(w_o[0], torch.zeros(3, 3, dtype=torch.float64))  # attnlib: zero weights,
    torch.testing.assert_close(out_o[0], ours.out_proj.bias.expand(3, 4))  # so the output is the bias
    torch.testing.assert_close(out_o[1], out_t[1], atol=1e-12, rtol=1e-12)  # other rows agree


def test_is_causal_with_attn_mask():
    q = randn(1, 3, 4)
    mask = torch.tensor([True, True, False])  # the last key is padding
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)
    ours = attnlib.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)
    folded = F.scaled_dot_product_attention(
        q, q, q, attn_mask=mask & torch.ones(3, 3, dtype=torch.bool).tril()
    )
    torch.testing.assert_close(ours, folded, atol=1e-12, rtol=1e-12)


def test_boolean_masks_mean_may_attend():
    ours, theirs = pair()
    x = randn(2, 3, 4)
    key_mask = torch.tensor([[True, True, False], [True, False, True]])  # True = real token
    allowed = torch.tensor(
        [[True, False, True], [True, True, False], [True, True, True]]
    )  # True = may attend
    out_o, _ = ours(x, x, x, key_mask=key_mask, attn_mask=allowed)
    out_t, _ = theirs(x, x, x, key_padding_mask=~key_mask, attn_mask=~allowed)  # torch: True = masked
    torch.testing.assert_close(out_o, out_t, atol=1e-12, rtol=1e-12)
    out_same, _ = theirs(x, x, x, key_padding_mask=key_mask, attn_mask=allowed)
    assert not torch.allclose(out_o, out_same, equal_nan=True)  # the same masks mean the opposite


def test_sdpa_boolean_mask_means_the_same():
    """Not a difference: F.scaled_dot_product_attention's bool mask is True = may attend too."""
    q = randn(1, 3, 4)
    mask = torch.tensor([[True, False, True]] * 3)
    torch.testing.assert_close(
        attnlib.scaled_dot_product_attention(q, q, q, attn_mask=mask),
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask),
        atol=1e-12,
        rtol=1e-12,
    )


def test_need_weights_default():
    ours, theirs = pair()
    x = randn(1, 3, 4)
    assert inspect.signature(nn.MultiheadAttention.forward).parameters["need_weights"].default is True
    assert inspect.signature(MultiHeadAttention.forward).parameters["need_weights"].default is False
    assert theirs(x, x, x)[1] is not None
    assert ours(x, x, x)[1] is None


def test_options_after_value_are_keyword_only():
    """torch's 4th positional argument is key_padding_mask (True = padding); ours take none."""
    ours, theirs = pair()
    x = randn(2, 3, 4)
    padding = torch.tensor([[False, False, True], [False, False, False]])  # torch: True = padding
    positional = theirs(x, x, x, padding)[0]  # torch reads it as key_padding_mask
    torch.testing.assert_close(positional, theirs(x, x, x, key_padding_mask=padding)[0])
    params = inspect.signature(MultiHeadAttention.forward).parameters
    assert [p.name for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD] == [
        "self",
        "query",
        "key",
        "value",
    ]
    with pytest.raises(TypeError, match="positional argument"):
        ours(x, x, x, padding)
    torch.testing.assert_close(ours(x, x, x, key_mask=~padding)[0], positional, atol=1e-12, rtol=1e-12)


def test_batch_first_always():
    assert nn.MultiheadAttention(4, 2).batch_first is False  # torch's default layout is (L, B, E)
    assert "batch_first" not in inspect.signature(MultiHeadAttention).parameters
    assert MultiHeadAttention(4, 2).to_torch().batch_first is True


def test_unbatched_input_refused():
    ours, theirs = pair()
    x = randn(3, 4)  # (L, E), no batch dimension
    assert theirs(x, x, x)[0].shape == (3, 4)  # torch accepts it
    with pytest.raises(ValueError, match=r"batch-first query \(B, L, E\)"):
        ours(x, x, x)


def test_float_key_mask_refused():
    ours, theirs = pair()
    x = randn(1, 3, 4)
    bias = torch.tensor([[0.0, -1.0, float("-inf")]], dtype=torch.float64)
    assert torch.isfinite(theirs(x, x, x, key_padding_mask=bias)[0]).all()  # torch adds it
    with pytest.raises(TypeError, match="key_mask"):
        ours(x, x, x, key_mask=bias)


def test_errors_are_value_and_type_errors():
    q, k = randn(1, 3, 4), randn(1, 3, 5)
    with pytest.raises(RuntimeError, match="Expected size"):  # torch: an internal bmm message
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(ValueError, match=r"query \(1, 3, 4\) and key \(1, 3, 5\)"):
        attnlib.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, q.float(), q)
    with pytest.raises(TypeError, match="key torch.float32"):
        attnlib.scaled_dot_product_attention(q, q.float(), q)


def test_sdpa_has_no_dropout_but_returns_weights():
    q = randn(1, 3, 4)
    F.scaled_dot_product_attention(q, q, q, dropout_p=0.0)  # torch has dropout
    with pytest.raises(TypeError, match="dropout_p"):
        attnlib.scaled_dot_product_attention(q, q, q, dropout_p=0.0)
    with pytest.raises(TypeError, match="return_weights"):  # torch's SDPA never returns the weights
        F.scaled_dot_product_attention(q, q, q, return_weights=True)
    out, weights = attnlib.scaled_dot_product_attention(q, q, q, return_weights=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 3, dtype=torch.float64))


def test_multihead_dropout_draws_as_torch_with_weights():
    """Not a difference: the layer's dropout (on the weights, in training) is torch's, draw for draw.

    torch draws the same mask with need_weights=True; with need_weights=False it goes through
    its fused kernel, which draws differently, so only the rate is compared there.
    """
    theirs = nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True).double().train()
    ours = MultiHeadAttention.from_torch(theirs).train()
    assert ours.dropout == 0.3 and ours.to_torch().dropout == 0.3
    x = randn(3, 5, 8)
    for average in (True, False):
        torch.manual_seed(9)
        out_t, w_t = theirs(x, x, x, need_weights=True, average_attn_weights=average)
        torch.manual_seed(9)
        out_o, w_o = ours(x, x, x, need_weights=True, average_attn_weights=average)
        torch.testing.assert_close(out_o, out_t, atol=1e-12, rtol=1e-12)
        torch.testing.assert_close(w_o, w_t, atol=1e-12, rtol=1e-12)
    torch.manual_seed(9)
    _, per_head = ours(x, x, x, need_weights=True, average_attn_weights=False)
    assert 0 < (per_head == 0).float().mean() < 0.6  # about 30 % of the weights dropped
    torch.manual_seed(9)
    out_no_weights, none = ours(x, x, x)  # the same draws without returning the weights
    assert none is None
    torch.testing.assert_close(out_no_weights, out_o, atol=0, rtol=0)
    ours.eval()
    torch.testing.assert_close(ours(x, x, x)[0], theirs.eval()(x, x, x)[0], atol=1e-12, rtol=1e-12)
