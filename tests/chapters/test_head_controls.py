"""attnlib.chapters.head_controls: chapter 10's baselines, checked against direct computations."""

import math

import torch

from attnlib.chapters import head_controls as hc
from attnlib.chapters import tiny_lm


def _tokens(size=32, seed=5):
    return tiny_lm.copy_batch(size, torch.Generator().manual_seed(seed))


def test_first_copy_rows_are_the_words_letters_after_the_first():
    tokens = _tokens()
    sentence, row = hc.first_copy_rows(tokens)
    n = tiny_lm.word_lengths(tokens)
    assert len(row) == int((n - 1).sum())
    for b, t in zip(sentence.tolist(), row.tolist(), strict=True):
        assert 2 <= t <= int(n[b])
        assert tokens[b, t] < len(tiny_lm.ALPHABET) and tokens[b, t - 1] < len(tiny_lm.ALPHABET)


def test_even_spread_is_the_mean_of_one_over_the_keys_seen():
    assert hc.even_spread(torch.tensor([0, 1, 3])) == (1 + 1 / 2 + 1 / 4) / 3


def test_a_head_that_spreads_evenly_measures_the_even_spread():
    """With every attention score equal (zero query projections), each causal row is even."""
    tokens = _tokens()
    model = tiny_lm.build_model(0, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.q_proj.weight.zero_()
            block.attn.q_proj.bias.zero_()
    measured = hc.previous_at_first_copy(model, tokens)
    assert measured.shape == (2, 2)
    expected = hc.even_spread(hc.first_copy_rows(tokens)[1])
    torch.testing.assert_close(measured, torch.full((2, 2), expected), rtol=1e-5, atol=1e-6)


def test_previous_at_first_copy_reads_the_maps_at_those_rows():
    tokens = _tokens(8)
    model = tiny_lm.build_model(1, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    maps = tiny_lm.attention_maps(model, tokens)  # (layers, B, h, L, L)
    rows = []
    for b, n in enumerate(tiny_lm.word_lengths(tokens).tolist()):
        rows += [maps[:, b, :, t, t - 1] for t in range(2, n + 1)]
    torch.testing.assert_close(hc.previous_at_first_copy(model, tokens), torch.stack(rows).mean(0))


def test_target_entropy_matches_the_scored_tokens_frequencies():
    """The exact entropy, and the empirical one of many sentences' scored tokens."""
    tokens = tiny_lm.copy_batch(20000, torch.Generator().manual_seed(0))
    scored = tokens[tiny_lm._predictable(tokens)]
    p = torch.bincount(scored, minlength=tiny_lm.COPY_VOCAB_SIZE).double() / len(scored)
    empirical = -(p[p > 0] * p[p > 0].log()).sum().item()
    assert abs(hc.target_entropy() - empirical) < 0.005
    # words of 3 letters from a 1-letter alphabet: 3 letters and <eos> scored, 1/4 each <eos>
    assert math.isclose(hc.target_entropy((3, 3), 1), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))


def test_unpadded_similarity_is_over_the_sentences_own_positions():
    """Each sentence alone, cut before its padding: the same pairs, the same mean."""
    tokens = _tokens(16)
    model = tiny_lm.build_model(0, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    total, count = 0.0, 0
    for b, n in enumerate(tiny_lm.word_lengths(tokens).tolist()):
        own = tokens[b : b + 1, : 2 * n + 3]  # <bos> w <sep> w <eos>
        m = own.shape[1]
        total += tiny_lm.position_similarity(model, own) * m * (m - 1)
        count += m * (m - 1)
    unpadded = hc.position_similarity_unpadded(model, tokens)
    assert abs(unpadded - total / count) < 1e-5
    assert abs(unpadded - tiny_lm.position_similarity(model, tokens)) > 1e-4
