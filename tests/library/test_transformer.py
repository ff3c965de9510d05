"""attnlib.transformer.TransformerBlock against torch.nn.TransformerEncoderLayer (float64, 1e-12)."""

import itertools

import pytest
import torch
from torch import nn

from attnlib.transformer import TransformerBlock


@pytest.mark.parametrize(
    "norm_first, activation, causal", list(itertools.product([True, False], ["relu", "gelu"], [False, True]))
)
def test_from_torch_computes_the_same_function(norm_first, activation, causal):
    torch.manual_seed(0)
    layer = (
        nn.TransformerEncoderLayer(
            16, 4, 40, dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first
        )
        .double()
        .eval()
    )
    block = TransformerBlock.from_torch(layer).eval()
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    if causal:
        mask = nn.Transformer.generate_square_subsequent_mask(7, dtype=torch.float64)
        expected, got = layer(x, src_mask=mask, is_causal=True), block(x, is_causal=True)
    else:
        expected, got = layer(x), block(x)
    assert torch.allclose(got, expected, atol=1e-12, rtol=1e-12)


def test_padding_mask_polarity_is_attnlib_s():
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double().eval()
    block = TransformerBlock.from_torch(layer).eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    real = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    expected = layer(x, src_key_padding_mask=~real)
    got = block(x, key_mask=real)
    assert torch.allclose(got[real], expected[real], atol=1e-12)  # padded rows: torch's fast path may differ


def test_residual_only_block_is_the_identity_plus_sublayers():
    block = TransformerBlock(8, 2, 16, layer_norm=False).double().eval()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    attn = block.self_attention(x)
    y = x + attn
    assert torch.allclose(block(x), y + block.feed_forward(y), atol=1e-12)


def test_ablation_switches_change_the_function():
    torch.manual_seed(2)
    x = torch.randn(2, 4, 8)
    full = TransformerBlock(8, 2, 16)
    for kwargs in ({"residual": False}, {"layer_norm": False}, {"feed_forward": False}):
        other = TransformerBlock(8, 2, 16, **kwargs)
        other.load_state_dict(full.state_dict(), strict=False)
        assert not torch.allclose(other(x), full(x))
    assert TransformerBlock(8, 2, 16, feed_forward=False).linear1 is None


def test_cached_decoding_equals_the_causal_forward():
    torch.manual_seed(3)
    for norm_first in (True, False):
        block = TransformerBlock(16, 4, 32, norm_first=norm_first).double().eval()
        x = torch.randn(2, 9, 16, dtype=torch.float64)
        full = block(x, is_causal=True)
        cache = block.new_cache(batch=2, capacity=9)
        steps = [block.forward_cached(x[:, :4], cache)]
        steps += [block.forward_cached(x[:, t : t + 1], cache) for t in range(4, 9)]
        assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-12)
        assert len(cache) == 9


def test_dropout_on_weights_only_in_training():
    torch.manual_seed(4)
    block = TransformerBlock(8, 2, 16, dropout=0.5)
    assert block.attn.dropout == 0.5  # the attention weights' dropout is the layer's own
    x = torch.randn(2, 6, 8)
    block.eval()
    assert torch.equal(block(x), block(x))
    block.train()
    assert not torch.equal(block(x), block(x))
    # the self-attention sublayer in training: its weights dropped out, as MultiHeadAttention's
    torch.manual_seed(5)
    out = block.self_attention(x, is_causal=True)
    torch.manual_seed(5)
    _, weights = block.attn(x, x, x, is_causal=True, need_weights=True, average_attn_weights=False)
    allowed = torch.ones(6, 6, dtype=torch.bool).tril().expand_as(weights)
    assert 0.3 < (weights[allowed] == 0).float().mean() < 0.7  # about half of the allowed weights
    assert torch.all(weights[~allowed] == 0)
    v = block.attn.v_proj(x).unflatten(-1, (2, 4)).transpose(1, 2)  # (B, h, L, d)
    expected = block.attn.out_proj((weights @ v).transpose(1, 2).flatten(-2))
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-6)


def test_gradients_flow_to_every_parameter():
    block = TransformerBlock(8, 2, 16, dropout=0.1)
    block(torch.randn(2, 5, 8), is_causal=True).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in block.parameters())


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: TransformerBlock(10, 3, 8), ValueError, "divisible"),
        (lambda: TransformerBlock(8, 2, 0), ValueError, "d_ff"),
        (lambda: TransformerBlock(8, 2, 16, activation="tanh"), ValueError, "activation"),
        (lambda: TransformerBlock(8, 2, 16, dropout="0.1"), TypeError, "TransformerBlock: dropout"),
        (lambda: TransformerBlock(8, 2, 16, dropout=-0.1), ValueError, r"TransformerBlock: dropout .*-0.1"),
        (
            lambda: TransformerBlock(8, 2, 16).self_attention(torch.randn(1, 2, 8), mask=None),
            TypeError,
            "mask",
        ),
        (lambda: TransformerBlock(8, 2, 16)(torch.randn(2, 3, 9)), ValueError, r"\(B, L, 8\)"),
        (lambda: TransformerBlock.from_torch(nn.Linear(2, 2)), TypeError, "TransformerEncoderLayer"),
        (lambda: TransformerBlock.from_torch(nn.TransformerEncoderLayer(8, 2)), ValueError, "batch_first"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
