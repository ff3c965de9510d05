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
