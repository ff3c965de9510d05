"""Chapter 13's task and model (attnlib/chapters/variant_lm.py): the task is what its text says,
every variant is causal and starts at its chance loss."""

from __future__ import annotations

import math

import pytest
import torch

from attnlib.chapters import variant_lm as vlm


def test_recall_batch_is_the_task_its_docstring_states():
    tokens = vlm.recall_batch(256, torch.Generator().manual_seed(0))
    assert tokens.shape == (256, vlm.SEQ_LEN)
    assert (tokens[:, -2] == vlm.QUERY).all()
    body = tokens[:, :-2]
    is_key = body < vlm.KEYS
    assert (is_key.sum(dim=1) == 1).all()  # one key per sequence
    where = is_key.float().argmax(dim=1)
    assert ((where >= vlm.KEY_FIRST) & (where <= vlm.KEY_LAST)).all()
    assert torch.equal(body[torch.arange(256), where], tokens[:, -1])  # the last token is the key
    assert (vlm.SEQ_LEN - 2 - where > 2 * (vlm.WINDOW - 1) + 1).all()  # beyond two stacked windows
    # fillers: +1 or +2 (mod 8) from the filler before; across the key, +2 to +4 from the one before it
    steps = (body[:, 1:] - body[:, :-1]) % vlm.FILLERS
    fill = ~is_key[:, 1:] & ~is_key[:, :-1]
    after = torch.zeros_like(fill)
    after[torch.arange(256), where] = True  # step index `where` goes from the key to the next filler
    plain = fill & ~after
    assert set(steps[plain].unique().tolist()) == {1, 2}
    assert 0.7 < (steps[plain] == 1).float().mean().item() < 0.8  # probability 3/4
    jumps = (body[torch.arange(256), where + 1] - body[torch.arange(256), where - 1]) % vlm.FILLERS
    assert set(jumps.unique().tolist()) <= {2, 3, 4}


@pytest.mark.parametrize("kind", vlm.VARIANTS)
def test_every_variant_starts_at_its_chance_loss(kind):
    model = vlm.build_variant_model(kind, seed=0)
    numbers = vlm.measure(model, vlm.recall_batch(256, torch.Generator().manual_seed(1)))
    chance = math.log(vlm.VOCAB_SIZE)
    assert abs(numbers["filler_loss"] - chance) < 0.5, (
        f"{kind}: expected an initial filler loss within 0.5 nats of ln {vlm.VOCAB_SIZE} = {chance:.3f}, "
        f"got {numbers['filler_loss']:.3f}"
    )


@pytest.mark.parametrize("kind", vlm.VARIANTS)
def test_every_variant_is_causal(kind):
    model = vlm.build_variant_model(kind, seed=0).double()
    tokens = vlm.recall_batch(2, torch.Generator().manual_seed(2))
    changed = tokens.clone()
    changed[:, 30:] = (changed[:, 30:] + 1) % vlm.VOCAB_SIZE
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    torch.testing.assert_close(a[:, :30], b[:, :30], rtol=0, atol=1e-12)
    assert not torch.allclose(a[:, 30:], b[:, 30:])


def test_variants_share_width_heads_layers_and_nearly_their_parameters():
    counts = {kind: sum(p.numel() for p in vlm.VariantLM(kind).parameters()) for kind in vlm.VARIANTS}
    full = counts["full"]
    assert counts["window"] == counts["linear"] == full  # the same weights, another attention
    assert abs(counts["mla"] - full) / full < 0.02
    assert counts["mqa"] < full  # one key-value head: that is MQA's saving


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="kind"):
        vlm.VariantLM("sparse")
