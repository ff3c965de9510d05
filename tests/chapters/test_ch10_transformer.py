"""Chapter 10: the copy language and the tiny decoder-only model (attnlib.chapters.tiny_lm)."""

import pytest
import torch

from attnlib.chapters import tiny_lm
from attnlib.chapters.tiny_lm import TinyDecoderLM, copy_batch, generate


def test_copy_sentences_have_the_documented_form():
    tokens = copy_batch(20, torch.Generator().manual_seed(0))
    assert tokens.shape == (20, tiny_lm.SEQ_LEN)
    for row in tokens:
        text = tiny_lm.decode_copy(row)
        word, rest = text.split("|")
        assert rest == word + "."
        assert tiny_lm.MIN_WORD <= len(word) <= tiny_lm.MAX_WORD
        assert row[0] == tiny_lm.COPY_BOS


def test_loss_ignores_the_unpredictable_first_copy():
    """Changing the model's predictions for the first copy leaves the loss unchanged."""
    tokens = copy_batch(4, torch.Generator().manual_seed(1))
    predictable = tiny_lm._predictable(tokens)
    n = (tokens == tiny_lm.COPY_SEP).int().argmax(1) - 1
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


@pytest.mark.slow
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


def _sentence(word: str) -> torch.Tensor:
    """One padded sentence ``<bos> word | word <eos>`` (1, SEQ_LEN)."""
    letters = [tiny_lm.ALPHABET.index(c) for c in word]
    row = [tiny_lm.COPY_BOS, *letters, tiny_lm.COPY_SEP, *letters, tiny_lm.COPY_EOS]
    return torch.tensor([row + [tiny_lm.COPY_PAD] * (tiny_lm.SEQ_LEN - len(row))])


def test_ablation_variants_start_from_the_full_models_weights():
    """Issue 25: every variant's parameters are the full model's tensors, and the global RNG is untouched."""
    state = torch.get_rng_state()
    models = tiny_lm.ablation_models(3)
    assert torch.equal(state, torch.get_rng_state()), "ablation_models changed the global generator"
    full = models["pre-norm"].state_dict()
    sizes = {}
    for name, model in models.items():
        own = model.state_dict()
        sizes[name] = len(own)
        for key, value in own.items():
            assert torch.equal(value, full[key]), f"{name}: {key} differs from the full model's"
    assert sizes["no LayerNorm"] < sizes["pre-norm"] and sizes["no FFN"] < sizes["pre-norm"]
    again = tiny_lm.ablation_models(3)["no FFN"].state_dict()
    assert all(torch.equal(v, full[k]) for k, v in again.items())
    other = tiny_lm.ablation_models(4)["pre-norm"].state_dict()
    assert not torch.equal(other["embed.weight"], full["embed.weight"]), "the seed must matter"


def test_head_targets_point_at_the_documented_positions():
    tokens = _sentence("abca")  # <bos> a b c a | a b c a <eos>: n = 4, | at 5
    tg = tiny_lm.head_targets(tokens)
    assert tg["row"].tolist() == [5, 6, 7, 8]
    assert tg["separator"].tolist() == [5, 5, 5, 5]
    assert tg["previous"].tolist() == [4, 5, 6, 7]
    assert tg["to_copy"].tolist() == [1, 2, 3, 4]  # the letter each row must write
    assert tg["match"].tolist() == [4, 1, 2, 3]  # the letter just written (row 5: none yet)
    for key in ("to_copy", "match"):
        for r, p in zip(tg["row"].tolist()[1:], tg[key].tolist()[1:], strict=True):
            if key == "to_copy":
                assert tokens[0, p] == tokens[0, r + 1]
            else:
                assert tokens[0, p] == tokens[0, r]


def test_letter_kinds_and_ambiguity_on_hand_made_words():
    # ahhe: after a -> h (a once: 0); after h -> h (h doubled: 2); after h -> e (2)
    kinds = tiny_lm.letter_kinds(_sentence("ahhe"))[0]
    assert [k for k in kinds.tolist() if k >= 0] == [0, 2, 2]
    assert kinds[6 + 1 : 6 + 4].tolist() == [0, 2, 2]  # the 2nd..4th letters of the second copy
    # abac: a stands at 0 and 2, followed by b and c: after a it is ambiguous (1), after b not
    assert [k for k in tiny_lm.letter_kinds(_sentence("abac"))[0].tolist() if k >= 0] == [1, 0, 1]
    assert tiny_lm.induction_ambiguity(_sentence("abac")) == (2, 3)
    assert tiny_lm.induction_ambiguity(_sentence("abcd")) == (0, 3)
    assert tiny_lm.has_double([1, 2, 2]) and not tiny_lm.has_double([1, 2, 1])


class _Reader(torch.nn.Module):
    """A fake model whose next token is the one after the last occurrence of the current one."""

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, tiny_lm.COPY_VOCAB_SIZE)
        row = tokens[0].tolist()
        n = row.index(tiny_lm.COPY_SEP) - 1
        first = row[1 : n + 2]
        nxt = [first[i + 1] for i in range(n) if first[i] == row[-1]][-1]
        logits[0, -1, nxt] = 1.0
        return logits


def test_off_track_counts_a_model_that_reads_on_as_content():
    tokens = torch.cat([_sentence("abcde"), _sentence("abcc"), _sentence("abc")])
    # abcde: j = 1, 2 -> 2 prompts; abcc has a repeat and abc is too short: skipped
    assert tiny_lm.off_track(_Reader(), tokens) == (2, 0, 0)


def test_cache_only_model_refuses_to_run_a_position_twice():
    """ex-10-3's models count the positions they run: no more than the prompt and the new tokens."""
    from attnlib.chapters.handouts import CacheOnlyLM

    model = CacheOnlyLM(d_model=8, num_heads=2, d_ff=16, num_layers=1, position_budget=4).eval()
    prompt = torch.zeros(1, 3, dtype=torch.long)
    caches = [block.new_cache(1, 4) for block in model.blocks]
    with torch.no_grad():
        model.forward_cached(prompt, caches, 0)
        model.forward_cached(prompt[:, :1], caches, 3)  # the fourth position: within the budget
        assert model.positions_run == 4
        with pytest.raises(RuntimeError, match="ran more than once"):
            model.forward_cached(prompt[:, :1], [block.new_cache(1, 4) for block in model.blocks], 0)
    with pytest.raises(RuntimeError, match="use the KV cache"):
        model(prompt)
