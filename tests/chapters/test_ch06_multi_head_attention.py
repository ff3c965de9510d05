"""Chapter 06: multi-head attention against torch.nn.MultiheadAttention, and the toy task."""

import math

import pytest
import torch

import attnlib
from attnlib.chapters.first_and_previous import (
    FirstAndPrevious,
    first_and_previous_batch,
    train_first_and_previous,
)
from attnlib.checks.ch06_multi_head_attention import merge_heads, multi_head_attention, split_heads


def test_split_then_merge_is_identity_and_split_matches_slicing():
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    heads = split_heads(x, 3)  # (2, 3, 5, 4)
    assert heads.shape == (2, 3, 5, 4)
    for j in range(3):
        assert torch.equal(heads[:, j], x[..., 4 * j : 4 * (j + 1)])
    assert torch.equal(merge_heads(heads), x)


@pytest.mark.parametrize("num_heads", [1, 2, 8, 16])
def test_parameter_count_formula_and_torch(num_heads):
    d = 512
    expected = 4 * d * d + 4 * d
    assert attnlib.parameter_count(d, num_heads) == expected == 1_050_624
    assert sum(p.numel() for p in torch.nn.MultiheadAttention(d, num_heads).parameters()) == expected
    assert sum(p.numel() for p in attnlib.MultiHeadAttention(d, num_heads).parameters()) == expected


def test_exercise_forward_equals_torch_multihead_attention():
    torch.manual_seed(0)
    B, L, d_model, h = 2, 5, 12, 4
    x = torch.randn(B, L, d_model, dtype=torch.float64)
    w_q, w_k, w_v, w_o = (
        torch.randn(d_model, d_model, dtype=torch.float64) / math.sqrt(d_model) for _ in range(4)
    )
    ref = torch.nn.MultiheadAttention(d_model, h, bias=False, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], dim=0))  # (3E, E), nn.Linear layout
        ref.out_proj.weight.copy_(w_o.T)
    expected, _ = ref(x, x, x, need_weights=False)
    out = multi_head_attention(x, w_q, w_k, w_v, w_o, h)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_from_torch_matches_with_masks_and_biases_float64():
    torch.manual_seed(1)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).double().eval()
    with torch.no_grad():
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    ours = attnlib.MultiHeadAttention.from_torch(ref)
    x = torch.randn(3, 6, 16, dtype=torch.float64)
    key_valid = attnlib.padding_mask([6, 4, 2])
    causal = attnlib.causal_mask(6)
    ref_out, ref_w = ref(
        x, x, x, key_padding_mask=~key_valid, attn_mask=~causal, average_attn_weights=False
    )  # torch's masks: True = blocked
    out, w = ours(
        x, x, x, key_mask=key_valid, attn_mask=causal, need_weights=True, average_attn_weights=False
    )
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w, ref_w, rtol=1e-12, atol=1e-12)


def test_first_and_previous_batch():
    tokens, previous, first = first_and_previous_batch(4, 6, 5, torch.Generator().manual_seed(0))
    assert tokens.shape == previous.shape == first.shape == (4, 6)
    assert torch.equal(previous[:, 1:], tokens[:, :-1])
    assert torch.equal(first, tokens[:, :1].expand(4, 6))
    with pytest.raises(ValueError, match="seq_len"):
        first_and_previous_batch(4, 1, 5, torch.Generator())


@pytest.mark.slow
def test_two_heads_specialise_on_the_toy_task(one_thread):
    model, losses = train_first_and_previous(num_heads=2, steps=200, seed=0)
    assert isinstance(model, FirstAndPrevious) and losses[-1] < losses[0]
    tokens, previous, first = first_and_previous_batch(500, 8, 8, torch.Generator().manual_seed(1))
    with torch.no_grad():
        prev_logits, first_logits, w = model(tokens, need_weights=True)  # w (N, 2, T, T)
    assert (prev_logits[:, 1:].argmax(-1) == previous[:, 1:]).float().mean() > 0.95
    assert (first_logits[:, 1:].argmax(-1) == first[:, 1:]).float().mean() > 0.95
    t = torch.arange(2, 8)
    on_first = w[:, :, 2:, 0].mean(dim=(0, 2))  # (2,)
    on_previous = w[:, :, t, t - 1].mean(dim=(0, 2))  # (2,)
    assert on_first.max() > 0.9 and on_previous.max() > 0.9
    assert on_first.argmax() != on_previous.argmax()


def test_head_roles_reads_the_first_and_the_previous_token():
    """head_roles averages, over queries t >= 2, the weight on key 0 and on key t - 1."""
    from attnlib.chapters.first_and_previous import head_roles

    n = 5
    w = torch.zeros(3, 2, n, n)
    w[:, 0, :, 0] = 1.0  # head 0: the first token
    t = torch.arange(1, n)
    w[:, 1, t, t - 1] = 1.0  # head 1: the previous token
    on_first, on_previous = head_roles(w)
    assert on_first == [1.0, 0.0] and on_previous == [0.0, 1.0]
    with pytest.raises(ValueError, match=r"head_roles: weights must be \(N, h, n, n\)"):
        head_roles(torch.zeros(2, 5, 5))


def test_training_leaves_the_global_random_state_alone(one_thread):
    """The chapter's experiment draws from its own seeded streams: rerunning a cell is safe."""
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    train_first_and_previous(num_heads=1, steps=2, seed=0)
    assert torch.equal(torch.random.get_rng_state(), before)
