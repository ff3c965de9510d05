"""Chapter 10: the copy language and the tiny decoder-only model (attnlib.chapters.tiny_lm)."""

import pytest
import torch

from attnlib.chapters import tiny_lm
from attnlib.chapters.tiny_lm import TinyDecoderLM, copy_batch, generate


def test_copy_sentences_have_the_documented_form():
    tokens = copy_batch(20, torch.Generator().manual_seed(0))
    assert tokens.shape == (20, tiny_lm.SEQ_LEN)
    for row in tokens:
        text = tiny_lm.decode_tokens(row)
        word, rest = text.split("|")
        assert rest == word + "."
        assert tiny_lm.MIN_WORD <= len(word) <= tiny_lm.MAX_WORD
        assert row[0] == tiny_lm.BOS


def test_loss_ignores_the_unpredictable_first_copy():
    """Changing the model's predictions for the first copy leaves the loss unchanged."""
    tokens = copy_batch(4, torch.Generator().manual_seed(1))
    predictable = tiny_lm._predictable(tokens)
    n = (tokens == tiny_lm.SEP).int().argmax(1) - 1
    for b in range(4):
        k = int(n[b])
        expected = [False] * (k + 2) + [True] * (k + 1) + [False] * (tiny_lm.SEQ_LEN - 2 * k - 3)
        assert predictable[b].tolist() == expected


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_and_uncached_generation_are_identical(temperature):
    torch.manual_seed(0)
    model = TinyDecoderLM(d_model=16, num_heads=2, d_ff=32, num_layers=2).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # sharper logits: more distinct tokens
    prompt = copy_batch(3, torch.Generator().manual_seed(2))[:, :5]
    outs = [
        generate(
            model,
            prompt,
            10,
            use_cache=flag,
            temperature=temperature,
            generator=torch.Generator().manual_seed(7),
        )
        for flag in (True, False)
    ]
    assert outs[0].shape == (3, 15)
    assert torch.equal(outs[0][:, :5], prompt)
    assert torch.equal(outs[0], outs[1])


def test_forward_cached_equals_forward():
    torch.manual_seed(1)
    model = TinyDecoderLM(d_model=16, num_heads=2, d_ff=32, num_layers=2).double().eval()
    tokens = copy_batch(2, torch.Generator().manual_seed(3))[:, :12]
    full = model(tokens)
    caches = [block.new_cache(2, 12) for block in model.blocks]
    steps = [model.forward_cached(tokens[:, :5], caches, 0)]
    steps += [model.forward_cached(tokens[:, t : t + 1], caches, t) for t in range(5, 12)]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-12)


def test_a_small_model_learns_the_copy_language(one_thread):
    torch.manual_seed(0)
    model = TinyDecoderLM(d_model=32, num_heads=2, d_ff=64, num_layers=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(0)
    test = copy_batch(128, torch.Generator().manual_seed(9))
    before = tiny_lm.copy_accuracy(model.eval(), test)
    model.train()
    for _ in range(150):
        loss = tiny_lm.lm_loss(model, copy_batch(32, data))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = tiny_lm.copy_accuracy(model.eval(), test)
    assert after > before + 0.3
