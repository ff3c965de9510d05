"""Chapter 03: score-agnostic attention, Bahdanau as a Q/K/V instance, retrieval.

The worked example is tested once, in tests/library/test_seed_examples.py.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlib
from attnlib.chapters.retrieval import (
    SCORE_FUNCTIONS,
    attend,
    corrupt_queries,
    permutation_keys,
    retrieval_scores,
    retrieval_trial,
)


def test_attend_with_scaled_dot_scores_equals_torch_sdpa():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 4, generator=g, dtype=torch.float64) for n in (5, 6, 6))
    out, weights = attend(attnlib.scaled_dot_scores(q, k), v)
    assert out.shape == (2, 3, 5, 4) and weights.shape == (2, 3, 5, 6)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))


def test_attend_mask_and_errors():
    scores = torch.zeros(1, 2, 3, dtype=torch.float64)
    value = torch.arange(6, dtype=torch.float64).view(1, 3, 2)
    mask = torch.tensor([[[True, False, False], [False, False, False]]])
    out, weights = attend(scores, value, mask)
    assert torch.equal(out[0, 0], value[0, 0]) and torch.equal(out[0, 1], torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(1, 2, 3\).*\(1, 4, 2\)"):
        attend(scores, torch.zeros(1, 4, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        attend(torch.zeros(3, dtype=torch.float64), value)
    with pytest.raises(TypeError, match="scores must be a torch.Tensor"):
        attend(np.zeros((2, 3)), value)


def test_bahdanau_is_a_qkv_instance():
    """query = decoder state, keys = values = encoder states, additive scores."""
    torch.manual_seed(3)
    B, S, d_dec, d_enc, d_a = 2, 7, 5, 6, 4  # the names of book/notation.md
    module = attnlib.AdditiveAttention(d_dec, d_enc, d_a).double()
    decoder_state = torch.randn(B, d_dec, dtype=torch.float64)  # s_{i-1}
    encoder_states = torch.randn(B, S, d_enc, dtype=torch.float64)  # h_j
    key_mask = attnlib.padding_mask([7, 4], S)
    context, weights = module(decoder_state, encoder_states, key_mask=key_mask)

    query = decoder_state.unsqueeze(1)  # (B, 1, d_dec)
    v = module.v.weight.squeeze(0)
    scores = attnlib.additive_scores(query, encoder_states, module.w_query.weight, module.w_key.weight, v)
    out_qkv, w_qkv = attend(scores, encoder_states, key_mask.unsqueeze(1))
    torch.testing.assert_close(out_qkv.squeeze(1), context, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w_qkv.squeeze(1), weights, atol=1e-12, rtol=1e-12)

    # the same through scaled_dot_product_attention: zero dot scores plus the additive scores as a float mask
    additive_mask = scores.masked_fill(~key_mask.unsqueeze(1), float("-inf"))
    zeros_q = torch.zeros(B, 1, 1, dtype=torch.float64)
    zeros_k = torch.zeros(B, S, 1, dtype=torch.float64)
    out_sdpa = attnlib.scaled_dot_product_attention(zeros_q, zeros_k, encoder_states, attn_mask=additive_mask)
    torch.testing.assert_close(out_sdpa.squeeze(1), context, atol=1e-12, rtol=1e-12)
    # and a hand-written Bahdanau step, one (b, j) pair at a time: e_j = v^T tanh(W s + U h_j)
    hand = torch.stack(
        [
            torch.stack(
                [
                    v
                    @ torch.tanh(
                        module.w_query.weight @ decoder_state[b] + module.w_key.weight @ encoder_states[b, j]
                    )
                    for j in range(S)
                ]
            )
            for b in range(B)
        ]
    )  # (B, S)
    hand = hand.masked_fill(~key_mask, float("-inf")).softmax(-1)
    torch.testing.assert_close(hand, weights, atol=1e-12, rtol=1e-12)


def test_permutation_keys_and_corruption():
    rng = np.random.default_rng(0)
    keys = permutation_keys(5, 6, rng)
    assert keys.shape == (5, 6)
    assert np.array_equal(keys[0], np.arange(6.0))
    assert all(np.array_equal(np.sort(row), np.arange(6.0)) for row in keys)
    same = corrupt_queries(keys, 0.0, 0, rng)
    assert np.array_equal(same, keys)
    swapped = corrupt_queries(keys, 0.0, 1, rng)
    assert np.all((swapped != keys).sum(axis=1) == 2)  # exactly two coordinates moved per query
    assert np.array_equal(np.sort(swapped, axis=1), np.sort(keys, axis=1))
    with pytest.raises(ValueError, match=r"\(6,\)"):
        corrupt_queries(keys[0], 0.1, 0, rng)
    with pytest.raises(ValueError, match="num_pairs >= 1"):
        permutation_keys(0, 6, rng)
    with pytest.raises(ValueError, match="must be >= 0"):
        corrupt_queries(keys, -0.1, 0, rng)


def test_retrieval_scores_match_attnlib_and_clean_queries_are_found():
    rng = np.random.default_rng(1)
    keys = permutation_keys(32, 12, rng)
    q = keys[:4] + 0.1
    np.testing.assert_allclose(retrieval_scores(q, keys, "scaled_dot"), q @ keys.T / math.sqrt(12))
    with pytest.raises(ValueError, match="score must be one of"):
        retrieval_scores(q, keys, "euclid")
    for score in SCORE_FUNCTIONS:
        acc, weight = retrieval_trial(keys, 0.0, 0, score, 50, np.random.default_rng(2))
        assert acc == 1.0 and 0 < weight <= 1.0


def test_cosine_beats_dot_when_key_norms_differ():
    rng = np.random.default_rng(3)
    keys = rng.standard_normal((64, 16)) * rng.uniform(0.25, 2.0, (64, 1))
    dot_acc, _ = retrieval_trial(keys, 0.0, 0, "dot", 300, np.random.default_rng(1))
    cos_acc, _ = retrieval_trial(keys, 0.0, 0, "cosine", 300, np.random.default_rng(1))
    assert cos_acc == 1.0 and dot_acc < 0.8


def test_retrieval_experiment_rescaled_scores_keep_the_accuracy():
    """Chapter 03's sweeps: dot, scaled dot and cosine rank permutation keys alike (equal norms)."""
    from attnlib.chapters import retrieval

    m = retrieval.experiment(seed=1, num_queries=50)
    for S in retrieval.STORE_SIZES:
        accs = [m[f"acc_{s}_{S}"] for s in retrieval.SCORE_FUNCTIONS]
        assert accs[0] == accs[1] == accs[2]
        assert len(accs[0]) == len(retrieval.NOISE_LEVELS) and accs[0][0] == 1.0
    assert all(m[f"norm_cosine_{S}"][0] == 1.0 for S in retrieval.STORE_SIZES)
    assert m == retrieval.experiment(seed=1, num_queries=50)  # its own seeded generators
