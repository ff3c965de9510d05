"""Every model a chapter trains starts near chance (issue 44: a sane start, tested).

A model whose first loss is far from chance teaches its start, not its training: chapter
12's tied embedding once began 57 nats from ln 65, and "what 400 steps buy" was mostly
the climb down from there. So for every model of chapters 01, 02, 06, 07, 09, 10 and 11
(chapter 12's are in test_ch12_real_text.py) the loss before the first update, on the
chapter's own first batch, lies within ``TOLERANCE`` nats of chance: ln of the number of
classes the model scores (a sum of two cross-entropies: twice that). Each loss is the first
entry of the chapter's own training function run for one step: the same weights (from the
seed), the same first batch, the same loss, before any update. Chapter 03 trains nothing
(its retrieval trials draw random vectors), and chapters 04, 05 and 08 train nothing either.
"""

from __future__ import annotations

import math

import pytest
import torch

TOLERANCE = 0.5  # nats
SEEDS = (0, 1, 2, 3, 4)


def _ch01(seed):
    from attnlib.chapters import seq2seq

    _, losses = seq2seq.train_reverse_model(seed=seed, steps=1)
    return {"GRU encoder-decoder": (losses[0], math.log(seq2seq.VOCAB_SIZE))}


def _ch02(seed):
    from attnlib.chapters import seq2seq

    _, attention = seq2seq.train_unshuffle_attention(seed=seed, steps=1)
    _, baseline = seq2seq.train_unshuffle_baseline(seed=seed, steps=1)
    chance = math.log(seq2seq.VOCAB_SIZE)
    return {"additive attention": (attention[0], chance), "no attention": (baseline[0], chance)}


def _ch06(seed):
    from attnlib.chapters import first_and_previous as fp

    out = {}
    for heads in (1, 2):
        _, losses = fp.train_first_and_previous(heads, steps=1, seed=seed)
        out[f"{heads} head(s)"] = (losses[0], 2 * math.log(8))  # two cross-entropies over 8 tokens
    return out


def _ch07(seed):
    from attnlib.chapters import cross_attention as ca

    _, losses = ca.train_models(seed=seed, steps=1)
    from attnlib.chapters.vocab import digits_vocab

    chance = math.log(len(digits_vocab()))
    return {name: (loss[0], chance) for name, loss in losses.items()}


def _ch09(seed):
    from attnlib.chapters import positional_model as pm

    out = {}
    for encoding in pm.ENCODINGS:
        _, losses = pm.train_offset(encoding, steps=1, lengths=pm.TRAIN_LENGTHS, seed=seed)
        out[encoding] = (losses[0], math.log(pm.N_DIGITS + 1))  # the head scores 10 digits + 1
    return out


def _ch10(seed):
    from attnlib.chapters import tiny_lm

    chance = math.log(tiny_lm.COPY_VOCAB_SIZE)
    out = {"language model": (tiny_lm.train(tiny_lm.build_model(seed), 1, seed=seed)[0], chance)}
    with torch.enable_grad():
        for name, model in tiny_lm.ablation_models(seed).items():
            out[f"ablation {name}"] = (tiny_lm.train(model, 1, seed=seed)[0], chance)
    return out


def _ch11(seed):
    from attnlib.chapters import vit

    data = vit.digits()
    x, y = data["train"]
    out = {}
    for kind, kwargs in (("vit", {}), ("vit", {"positions": False}), ("cnn", {}), ("mlp", {})):
        model = vit.build(kind, seed, **kwargs)
        loss = vit.train(model, x, y, steps=1, lr=vit.LEARNING_RATES[kind], seed=seed)[0]
        out[kind + (" without positions" if kwargs else "")] = (loss, math.log(10))
    return out


CHAPTERS = {"01": _ch01, "02": _ch02, "06": _ch06, "07": _ch07, "09": _ch09, "10": _ch10, "11": _ch11}


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_every_chapter_model_starts_near_chance(chapter, one_thread):
    """The loss before the first update is within TOLERANCE nats of chance, for five seeds."""
    far = []
    for seed in SEEDS:
        for name, (loss, chance) in CHAPTERS[chapter](seed).items():
            assert math.isfinite(loss), f"chapter {chapter}, {name}, seed {seed}: initial loss {loss}"
            if abs(loss - chance) > TOLERANCE:
                far.append(f"{name} (seed {seed}): {loss:.3f} against chance {chance:.3f}")
    assert not far, (
        f"chapter {chapter}: models that start more than {TOLERANCE} nats from chance: " + "; ".join(far)
    )


def test_the_check_would_catch_a_confident_start():
    """A model that starts sure of one class (chapter 12's old tied start) is far from chance."""
    logits = torch.zeros(64, 65)
    logits[:, 0] = 60.0  # certain of class 0
    targets = torch.randint(1, 65, (64,), generator=torch.Generator().manual_seed(0))
    loss = torch.nn.functional.cross_entropy(logits, targets).item()
    assert abs(loss - math.log(65)) > TOLERANCE
    uniform = torch.nn.functional.cross_entropy(torch.zeros(64, 65), targets).item()
    assert abs(uniform - math.log(65)) < 1e-6
