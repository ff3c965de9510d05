"""Chapter 12: the text, its vocabulary and split, the char model, the schedule, top-k, generation, heads."""

import math

import pytest
import torch

from attnlib.chapters import char_lm


@pytest.fixture(scope="module")
def corpus():
    return char_lm.corpus()


def test_the_text_is_the_recorded_one_and_a_changed_copy_is_refused(tmp_path):
    text = char_lm.load_text()
    assert len(text) == 1_115_394 and len(set(text)) == 65
    changed = tmp_path / "tinyshakespeare.txt"
    changed.write_bytes(char_lm.DATA_PATH.read_bytes().replace(b"\n", b"\r\n", 1))
    with pytest.raises(ValueError, match="SHA-256"):
        char_lm.load_text(changed)


def test_vocabulary_round_trips_and_the_split_holds_out_the_end(corpus):
    vocab, train_data, val_data = corpus
    sample = "ROMEO:\nWhat, ho!"
    assert vocab.decode(vocab.encode(sample)) == sample
    assert vocab.chars == sorted(vocab.chars)
    assert len(train_data) + len(val_data) == 1_115_394
    assert len(val_data) == 1_115_394 - int(1_115_394 * 0.9)
    text = char_lm.load_text()
    assert vocab.decode(val_data[:50]) == text[len(train_data) : len(train_data) + 50]


def test_batches_are_windows_of_the_data(corpus):
    _, train_data, _ = corpus
    windows = char_lm.get_batch(train_data, 4, 16, torch.Generator().manual_seed(0))
    assert windows.shape == (4, 17)
    every_window = train_data.unfold(0, 17, 1)  # (len - 16, 17): the slice at each start
    for w in windows:
        assert (every_window == w).all(1).any(), "a window that is not a slice of the data"


def test_lr_schedule_warms_up_then_follows_half_a_cosine():
    rates = [char_lm.lr_at(s, 1.0, 4, 20, 0.1) for s in range(25)]
    assert rates[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert rates[4] == pytest.approx(1.0)  # the first step after the warm-up: the peak
    assert rates[12] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 8 / 16)))
    assert all(a >= b for a, b in zip(rates[4:20], rates[5:20], strict=False))
    assert rates[20:] == [0.1] * 5
    assert [char_lm.lr_at(s, 2.0, 0, 4, 0.0) for s in range(4)] == pytest.approx(
        [2.0 * 0.5 * (1 + math.cos(math.pi * s / 4)) for s in range(4)]
    )


def test_top_k_keeps_the_k_largest_and_ties():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0, 0.5]])
    kept = char_lm.top_k_logits(logits, 2)
    assert torch.equal(torch.isfinite(kept), torch.tensor([[False, True, True, True, False]]))
    assert torch.equal(char_lm.top_k_logits(logits, 5), logits)
    assert torch.isfinite(char_lm.top_k_logits(logits, 1)).sum() == 1


def test_tied_model_shares_one_matrix_and_counts_it_once():
    tied = char_lm.build_char_model(0, 65, 16, d_model=8, num_heads=2, d_ff=16, num_layers=1)
    untied = char_lm.build_char_model(0, 65, 16, tie=False, d_model=8, num_heads=2, d_ff=16, num_layers=1)
    assert tied.head.weight is tied.embed.weight
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(untied) - count(tied) == 65 * 8
    groups = char_lm.param_groups(tied, 0.1)
    assert sum(len(g["params"]) for g in groups) == len(list(tied.parameters()))
    assert all(p.dim() >= 2 for p in groups[0]["params"]) and all(p.dim() < 2 for p in groups[1]["params"])


@pytest.mark.parametrize("top_k", [None, 3])
def test_cached_and_uncached_sampling_draw_the_same_characters(top_k):
    model = char_lm.build_char_model(1, 65, 24, d_model=16, num_heads=2, d_ff=32, num_layers=2).double()
    prompt = torch.randint(0, 65, (2, 5), generator=torch.Generator().manual_seed(0))
    outs = [
        char_lm.generate_text(
            model,
            prompt,
            19,
            temperature=0.9,
            top_k=top_k,
            generator=torch.Generator().manual_seed(3),
            use_cache=c,
        )
        for c in (True, False)
    ]
    assert outs[0].shape == (2, 24) and torch.equal(outs[0][:, :5], prompt)
    assert torch.equal(outs[0], outs[1])


def test_induction_test_measures_the_token_after_the_earlier_occurrence():
    model = char_lm.build_char_model(2, 65, 20, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    tokens = char_lm.repeated_random(3, 10, 65, torch.Generator().manual_seed(0))
    assert torch.equal(tokens[:, :10], tokens[:, 10:])
    result = char_lm.induction_test(model, tokens)
    maps = char_lm.attention_maps(model, tokens)  # (layers, B, h, 20, 20)
    expected = torch.stack([maps[..., t, t - 9] for t in range(10, 20)], -1).mean(dim=(1, 3))
    assert torch.allclose(result["induction"], expected)
    assert result["first"] > 0 and result["second"] > 0


def test_training_lowers_the_held_out_loss(corpus, one_thread):
    vocab, train_data, val_data = corpus
    model = char_lm.build_char_model(0, len(vocab), 16, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    val = char_lm.eval_windows(val_data, 16, count=16)
    log = char_lm.train_lm(
        model, train_data, 60, context=16, batch_size=8, seed=0, train_windows=val, val_windows=val
    )
    assert len(log["loss"]) == 60 and log["eval_step"] == [0, 60]
    assert log["val_eval"][-1] < math.log(65) - 0.5


def test_the_log_starts_with_the_loss_of_the_initial_weights(corpus):
    vocab, train_data, val_data = corpus
    model = char_lm.build_char_model(3, len(vocab), 16, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    val = char_lm.eval_windows(val_data, 16, count=8)
    before = char_lm.estimate_loss(model, val)
    log = char_lm.train_lm(
        model, train_data, 2, context=16, batch_size=4, seed=0, train_windows=val, val_windows=val
    )
    assert log["eval_step"] == [0, 2] and log["val_eval"][0] == before


# Every model chapter 12 trains, as (name, seed -> initial model, context): the page's model, its
# untied twin, and the nine practice variants (issue 44: the tied head on nn.Embedding's N(0, 1)
# weights started 52.7 nats above chance, the practice model 26.6).
SANE_START_SEEDS = range(5)
CHAPTER_MODELS = [
    (
        "main",
        lambda seed, v: char_lm.build_char_model(seed, v, char_lm.CONTEXT, **char_lm.MAIN),
        char_lm.CONTEXT,
    ),
    (
        "main, untied",
        lambda seed, v: char_lm.build_char_model(seed, v, char_lm.CONTEXT, tie=False, **char_lm.MAIN),
        char_lm.CONTEXT,
    ),
] + [
    (
        f"practice: {name}",
        lambda seed, v, name=name: char_lm.practice_model(seed, name, v),
        char_lm.PRACTICE_CONTEXT,
    )
    for name in char_lm.PRACTICE_VARIANTS
]


@pytest.mark.parametrize("name, build, context", CHAPTER_MODELS, ids=[m[0] for m in CHAPTER_MODELS])
def test_every_model_of_the_chapter_starts_within_half_a_nat_of_chance(
    corpus, one_thread, name, build, context
):
    """At step 0 the held-out loss is within 0.5 nats of ln V (a uniform guess), for 5 seeds."""
    vocab, _, val_data = corpus
    chance = math.log(len(vocab))
    windows = char_lm.eval_windows(val_data, context)
    losses = [char_lm.estimate_loss(build(seed, len(vocab)), windows) for seed in SANE_START_SEEDS]
    off = [round(loss - chance, 3) for loss in losses]
    assert all(abs(d) < 0.5 for d in off), (
        f"{name}: expected an initial held-out loss within 0.5 of ln {len(vocab)} = {chance:.3f} for seeds "
        f"{list(SANE_START_SEEDS)}; the losses are {[round(x, 3) for x in losses]} ({off} from chance)"
    )


def test_the_embedding_is_drawn_at_nanogpts_scale_and_the_untied_head_has_its_own_draw():
    vocab_size = 65
    tied = char_lm.practice_model(0, "recipe", vocab_size)
    untied = char_lm.practice_model(0, "untied", vocab_size)
    assert 0.018 < tied.embed.weight.std().item() < 0.022 and char_lm.EMBED_STD == 0.02
    assert 0.018 < untied.head.weight.std().item() < 0.022
    assert not torch.equal(untied.head.weight, untied.embed.weight)  # not a copy
    corr = torch.corrcoef(torch.stack([untied.head.weight.flatten(), untied.embed.weight.flatten()]))[0, 1]
    assert abs(corr.item()) < 0.1, f"the untied head should be drawn independently; correlation {corr:.3f}"
    recipe_state, untied_state = tied.state_dict(), untied.state_dict()
    assert set(untied_state) == set(recipe_state)
    same = [k for k in untied_state if k != "head.weight" and torch.equal(untied_state[k], recipe_state[k])]
    assert len(same) == len(untied_state) - 1, (
        "the ablation changes one thing: every other weight is the recipe's"
    )


def _geometric_maps(ratio: float, length: int) -> torch.Tensor:
    pos = torch.arange(length, dtype=torch.float64)
    distance = pos[:, None] - pos[None, :]
    w = torch.where(distance >= 0, ratio**distance, torch.zeros(()))
    return w / w.sum(-1, keepdim=True)


def test_recency_baseline_matches_a_recency_head_and_not_a_previous_token_head():
    L = 16
    recency = _geometric_maps(0.6, L)
    uniform = _geometric_maps(1.0, L)
    previous = torch.zeros(L, L, dtype=torch.float64)
    previous[0, 0] = 1.0
    previous[torch.arange(1, L), torch.arange(L - 1)] = 1.0
    maps = torch.stack([recency, uniform, previous])[None].expand(3, 3, L, L)  # (B=3, h=3, L, L)
    out = char_lm.recency_baseline(maps)
    assert out["previous"].shape == (3,)
    # a head that is a recency head is its own baseline: nothing beyond its recency
    assert out["recency_previous"][0].item() == pytest.approx(out["previous"][0].item(), abs=1e-6)
    assert out["recency_previous"][1].item() == pytest.approx(out["previous"][1].item(), abs=1e-6)
    # a previous-token head: distance 1 everywhere, all its weight on t - 1; its matched
    # recency head (mean distance 1) spreads over several keys and puts far less there
    assert out["distance"][2].item() == pytest.approx(1.0)
    assert out["previous"][2].item() == pytest.approx(1.0)
    assert out["recency_previous"][2].item() < 0.6
    layered = char_lm.recency_baseline(torch.stack([maps, maps]))  # (layers, B, h, L, L)
    assert layered["previous"].shape == (2, 3)


def test_the_recorded_runs_start_near_chance_and_count_five_seeds():
    """The record the page reads was made with the sane start: every run's step 0 near ln 65."""
    from attnlib.chapters import spread

    record = spread.load("ch12")
    assert len(record.seeds) >= 5, f"chapter 12 states its verdicts over seeds; recorded {record.seeds}"
    chance = math.log(65)
    names = ["val_init"] + [f"init_{char_lm.practice_key(n)}" for n in char_lm.PRACTICE_VARIANTS]
    off = {name: [m[name] - chance for m in (r["metrics"] for r in record.runs)] for name in names}
    bad = {name: [round(d, 3) for d in ds if abs(d) >= 0.5] for name, ds in off.items()}
    assert not any(bad.values()), f"recorded initial losses 0.5 nats or more from ln 65: {bad}"
