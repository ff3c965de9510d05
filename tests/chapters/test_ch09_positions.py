"""Chapter 09: the offset task and its model (attnlib.chapters.positional_model)."""

import pytest
import torch

from attnlib.chapters import positional_model as pm


def test_offset_batch_targets_are_the_token_two_back():
    x, y = pm.offset_batch(4, 10, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 10)
    assert torch.equal(y[:, pm.OFFSET :], x[:, : -pm.OFFSET])
    assert (y[:, : pm.OFFSET] == pm.BLANK).all()


@pytest.mark.parametrize("encoding", pm.ENCODINGS)
def test_every_encoding_gives_a_causal_model(encoding):
    """Changing a later token never changes an earlier position's logits."""
    torch.manual_seed(0)
    model = pm.PositionalCausalModel(encoding).eval()
    x = torch.randint(0, 10, (2, 12), generator=torch.Generator().manual_seed(1))
    changed = x.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 10
    with torch.no_grad():
        assert torch.allclose(model(x)[:, :7], model(changed)[:, :7], atol=1e-6)


def test_without_positions_the_model_cannot_see_order_beyond_the_mask():
    """With no encoding, swapping two earlier tokens leaves a later position's output unchanged."""
    torch.manual_seed(0)
    model = pm.PositionalCausalModel("none").eval()
    x = torch.randint(0, 10, (1, 8), generator=torch.Generator().manual_seed(2))
    swapped = x.clone()
    swapped[0, [1, 4]] = x[0, [4, 1]]
    with torch.no_grad():
        assert torch.allclose(model(x)[:, -1], model(swapped)[:, -1], atol=1e-6)
    model = pm.PositionalCausalModel("rope").eval()
    with torch.no_grad():
        assert not torch.allclose(model(x)[:, -1], model(swapped)[:, -1], atol=1e-6)


def test_training_is_repeatable_and_learns_with_positions(one_thread):
    model_a, losses_a = pm.train_offset("learned", steps=60, seed=3)
    _, losses_b = pm.train_offset("learned", steps=60, seed=3)
    assert losses_a == losses_b
    assert losses_a[-1] < losses_a[0]


def test_unknown_encoding_is_refused():
    with pytest.raises(ValueError, match="encoding"):
        pm.PositionalCausalModel("relative")


def test_order_blind_ceiling_is_exact_on_small_cases():
    """n = 3 scores only position 2, whose best order-blind guess is right with E[max count of 2] / 2."""
    assert pm.order_blind_ceiling(3) == pytest.approx((0.1 * 2 + 0.9 * 1) / 2, abs=1e-15)
    # one symbol: the guess is always right
    assert pm.order_blind_ceiling(10, n_symbols=1) == pytest.approx(1.0, abs=1e-15)
    # two symbols, position 2 (draws x_0, x_1) and 3 (x_0..x_2): E[max] = 1.5 and 2.25
    assert pm.order_blind_ceiling(4, n_symbols=2) == pytest.approx((1.5 / 2 + 2.25 / 3) / 2, abs=1e-15)


def test_order_blind_ceiling_matches_a_simulated_guesser():
    """The most frequent digit among x_0 .. x_{i-1}, ties broken at random, scores the ceiling."""
    n, strings = 24, 40000
    x, y = pm.offset_batch(strings, n, torch.Generator().manual_seed(0))
    hits = []
    for i in range(pm.OFFSET, n):
        counts = torch.nn.functional.one_hot(x[:, :i], pm.N_DIGITS).sum(1)  # (strings, 10)
        modes = counts == counts.max(1, keepdim=True).values  # (strings, 10)
        hits.append(modes.gather(1, y[:, i, None])[:, 0] / modes.sum(1))  # chance the tie-break is right
    simulated = torch.stack(hits).mean().item()
    assert simulated == pytest.approx(pm.order_blind_ceiling(n), abs=0.005)


def test_order_blind_ceiling_falls_with_length_and_refuses_bad_input():
    values = [pm.order_blind_ceiling(n) for n in (3, 8, 16, 32, 64)]
    assert values == sorted(values, reverse=True)
    assert 0.1 < values[-1] < 0.3
    with pytest.raises(ValueError, match="length"):
        pm.order_blind_ceiling(2)
    with pytest.raises(TypeError, match="length"):
        pm.order_blind_ceiling(16.0)
    with pytest.raises(ValueError, match="n_symbols"):
        pm.order_blind_ceiling(16, n_symbols=0)


@pytest.mark.slow
def test_experiment_returns_one_accuracy_per_length_and_a_loss_curve(monkeypatch, one_thread):
    monkeypatch.setattr(pm, "STEPS", 40)
    metrics = pm.experiment(seed=1)
    assert metrics["test_lengths"] == list(pm.TEST_LENGTHS)
    for encoding in pm.ENCODINGS:
        accs = metrics[f"acc_{encoding}"]
        assert len(accs) == len(pm.TEST_LENGTHS) and all(0.0 <= a <= 1.0 for a in accs)
        assert len(metrics[f"loss_{encoding}"]) == 40 // pm.LOSS_WINDOW
    assert pm.experiment(seed=1) == metrics  # its own generators: the same numbers again
    with pytest.raises(ValueError, match="seed"):
        pm.experiment(seed=-1)


def test_training_leaves_the_global_random_state_alone(one_thread):
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    pm.train_offset("none", steps=2)
    assert torch.equal(torch.rand(3), before)
