"""The chapter 11 and 12 controls of text_controls and vision_nulls (quick)."""

import math

import torch

from attnlib.chapters import char_lm, text_controls, vision_nulls


def test_bigram_on_windows_matches_a_hand_count():
    # text "abab...": after a, b always; after b, a always (V = 2)
    train = torch.tensor([0, 1] * 50)
    windows = torch.tensor([[0, 1, 0], [1, 0, 1]])
    got = text_controls.bigram_on_windows(train, windows, 2)
    # add-one: a->b counted 50 times, a->a once: p = 51/52 (b->a: 50 of 51)
    want = -(math.log(51 / 52) * 2 + math.log(50 / 51) * 2) / 4
    assert abs(got["loss"] - want) < 1e-12, (got["loss"], want)
    assert got["per_window"].shape == (2,)


def test_bigram_on_all_positions_is_char_lms_bigram_loss():
    train = torch.randint(0, 5, (500,), generator=torch.Generator().manual_seed(0))
    val = torch.randint(0, 5, (65,), generator=torch.Generator().manual_seed(1))
    one_window = val[None]  # every held-out position, as bigram_loss scores them
    got = text_controls.bigram_on_windows(train, one_window, 5)["loss"]
    assert abs(got - char_lm.bigram_loss(train, val, 5)) < 1e-12


def test_random_table_gaps_centre_on_zero_and_are_fixed():
    gaps = vision_nulls.random_table_gaps(draws=300)
    assert abs(gaps.mean().item()) < 3 * gaps.std().item() / 300**0.5 + 1e-3
    assert torch.equal(gaps, vision_nulls.random_table_gaps(draws=300))
    assert 0.01 < gaps.std().item() < 0.1, gaps.std().item()
