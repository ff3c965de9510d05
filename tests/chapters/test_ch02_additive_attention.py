"""Chapter 02: the additive-attention encoder-decoder (chapters.seq2seq) and the exercise references."""

import numpy as np
import pytest
import torch

from attnlib.chapters.seq2seq import (
    BOS,
    EOS,
    PAD,
    VOCAB_SIZE,
    Seq2SeqAdditiveAttention,
    shift_right,
    train_seq2seq,
    unshuffle_batch,
)
from attnlib.checks.ch02_additive_attention import (
    additive_attention_forward,
    alignment_scores,
    alignment_weights,
    attention_context,
)
from attnlib.modules import AdditiveAttention

pytestmark = pytest.mark.usefixtures("one_thread")


def test_numpy_step_matches_the_formula_term_by_term():
    rng = np.random.default_rng(0)
    s, H = rng.normal(size=3), rng.normal(size=(5, 4))
    W, U, v = rng.normal(size=(6, 3)), rng.normal(size=(6, 4)), rng.normal(size=6)
    loop = np.array([v @ np.tanh(W @ s + U @ h) for h in H])
    np.testing.assert_allclose(alignment_scores(s, H, W, U, v), loop, rtol=1e-12)
    w = alignment_weights(loop[None])
    np.testing.assert_allclose(w.sum(-1), 1.0)
    np.testing.assert_allclose(attention_context(w, H)[0], sum(w[0, j] * H[j] for j in range(5)), rtol=1e-12)
    big = alignment_weights(np.array([[1000.0, 1001.0]]))
    np.testing.assert_allclose(big, [[1 / (1 + np.e), np.e / (1 + np.e)]])


def test_batched_forward_equals_numpy_per_row_in_float64():
    torch.manual_seed(0)
    module = AdditiveAttention(3, 4, 5).double()
    query, keys = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 6, 4, dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    context, weights = additive_attention_forward(module, query, keys, mask)
    W, U, v = (p.detach().numpy() for p in (module.w_query.weight, module.w_key.weight, module.v.weight[0]))
    for b, n in enumerate([6, 3]):
        e = alignment_scores(query[b].numpy(), keys[b, :n].numpy(), W, U, v)
        w = alignment_weights(e[None])[0]
        np.testing.assert_allclose(weights[b, :n].detach().numpy(), w, rtol=1e-12)
        assert (weights[b, n:] == 0).all()
        np.testing.assert_allclose(context[b].detach().numpy(), w @ keys[b, :n].numpy(), rtol=1e-12)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_teacher_forcing_equals_stepwise_decoding(bidirectional):
    torch.manual_seed(0)
    model = Seq2SeqAdditiveAttention(VOCAB_SIZE, 8, 10, attn_dim=7, bidirectional=bidirectional).eval()
    src, tgt = unshuffle_batch(3, (2, 4), torch.Generator().manual_seed(1))
    logits, weights = model.forward_with_attention(src, shift_right(tgt))
    assert logits.shape == (3, tgt.shape[1], VOCAB_SIZE) and weights.shape == (3, tgt.shape[1], src.shape[1])
    torch.testing.assert_close(model(src, shift_right(tgt)), logits, rtol=0, atol=0)
    states, mask, s = model.encode(src)
    assert torch.equal(mask, src != PAD)
    assert states.shape == (3, src.shape[1], 10 * (2 if bidirectional else 1))
    for i, token in enumerate(shift_right(tgt).T):  # one decoder step at a time
        step_logits, w, s = model.decode(states, mask, s, token[:, None])
        torch.testing.assert_close(step_logits[:, 0], logits[:, i])
        torch.testing.assert_close(w[:, 0], weights[:, i])
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, tgt.shape[1]))
    assert (weights.masked_select(~mask[:, None, :].expand_as(weights)) == 0).all()


def test_greedy_weights_are_the_teacher_forced_weights_of_its_own_output():
    torch.manual_seed(0)
    model = Seq2SeqAdditiveAttention(VOCAB_SIZE, 8, 10).eval()
    src, _ = unshuffle_batch(2, 3, torch.Generator().manual_seed(2))
    tokens, weights = model.greedy_decode_with_attention(src, 5)
    assert torch.equal(tokens, model.greedy_decode(src, 5))
    raw = tokens.clone()
    # greedy_decode writes PAD after EOS; before the first EOS the tokens are the model's own
    first_eos = [(row == EOS).nonzero()[0, 0].item() if (row == EOS).any() else 5 for row in raw]
    own_input = torch.cat([torch.full((2, 1), BOS), raw[:, :-1]], dim=1)  # (B, 5)
    tf_logits, tf_weights = model.forward_with_attention(src, own_input)
    for b, stop in enumerate(first_eos):
        torch.testing.assert_close(tf_weights[b, : stop + 1], weights[b, : stop + 1])
        assert torch.equal(tf_logits[b, : stop + 1].argmax(-1), raw[b, : stop + 1])
        assert (raw[b, stop + 1 :] == PAD).all()


@pytest.mark.slow
def test_attention_model_learns_the_unshuffle_task_a_little():
    torch.manual_seed(0)
    model = Seq2SeqAdditiveAttention(VOCAB_SIZE, 16, 32)
    losses = train_seq2seq(model, lambda g: unshuffle_batch(32, (1, 3), g), 60, lr=1e-2)
    assert np.mean(losses[-10:]) < 0.6 * np.mean(losses[:10])


def test_lookup_metrics_of_an_untrained_model():
    from attnlib.chapters.seq2seq import Seq2SeqGRU, lookup_metrics, seeded_model

    model = seeded_model(0, Seq2SeqAdditiveAttention, VOCAB_SIZE, 8, 16)
    m = lookup_metrics(model, 4, count=20)
    assert set(m) == {"on_the_digit", "top_second", "top_first", "second_right"}
    assert all(0.0 <= v <= 1.0 for v in m.values())
    # 8 source tokens: a largest weight is at least 1/8
    assert m["top_second"] >= 1 / 8 - 1e-6 and m["top_first"] >= 1 / 8 - 1e-6
    assert lookup_metrics(model, 4, count=20) == m  # its own generator
    with pytest.raises(ValueError, match="num_pairs must be in"):
        lookup_metrics(model, 10)
    with pytest.raises(TypeError, match="Seq2SeqAdditiveAttention"):
        lookup_metrics(Seq2SeqGRU(VOCAB_SIZE, 8, 16), 4)


def test_lookup_metrics_of_a_model_that_looks_at_the_right_digit():
    """A hand-made attention row: on_the_digit counts a top weight on the digit written."""
    from attnlib.chapters.seq2seq import lookup_metrics

    class Oracle(Seq2SeqAdditiveAttention):
        def forward_with_attention(self, src, tgt_in, src_lengths=None):
            B, T = tgt_in.shape
            tgt = torch.cat([tgt_in[:, 1:], torch.full((B, 1), EOS)], dim=1)
            weights = torch.zeros(B, T, src.shape[1])
            logits = torch.zeros(B, T, VOCAB_SIZE)
            for b in range(B):
                for i in range(T):
                    hits = (src[b] == tgt[b, i]).nonzero()
                    weights[b, i, hits[0, 0] if len(hits) else 0] = 1.0
                    logits[b, i, tgt[b, i]] = 1.0
            return logits, weights

    m = lookup_metrics(Oracle(VOCAB_SIZE, 8, 16), 5, count=10)
    assert m["on_the_digit"] == 1.0 and m["second_right"] == 1.0
    assert m["top_second"] == 1.0 and m["top_first"] == 1.0


def test_train_unshuffle_models_and_alignment_metrics():
    from attnlib.chapters.seq2seq import (
        ALIGNMENT_PAIR_COUNTS,
        alignment_metrics,
        train_unshuffle_models,
    )

    run = train_unshuffle_models(seed=0, steps=2, batch=4, pairs=(1, 3))
    again = train_unshuffle_models(seed=0, steps=2, batch=4, pairs=(1, 3))
    assert run[1] == again[1] and run[3] == again[3]
    m = alignment_metrics(run[0], run[1] * 25, run[2], run[3] * 25)
    n = len(ALIGNMENT_PAIR_COUNTS)
    for key in ("acc_attention", "acc_baseline", "on_the_digit", "second_right", "top_second", "top_first"):
        assert len(m[key]) == n and all(0.0 <= v <= 1.0 for v in m[key]), key
    assert m["loss_attention"] == pytest.approx(sum(run[1]) / 2)


@pytest.mark.slow
def test_the_chapters_split_of_the_run_trains_the_same_models_bit_for_bit(monkeypatch):
    """Chapter 02 trains the model without attention in a second process, the attention model
    here: the models and losses of train_unshuffle_models (the sweep's), bit for bit."""
    from attnlib.chapters import second_process
    from attnlib.chapters.seq2seq import (
        Seq2SeqGRU,
        train_unshuffle_attention,
        train_unshuffle_baseline,
        train_unshuffle_models,
    )

    monkeypatch.setattr(second_process, "spare_core_with_reason", lambda: (True, "whatever the load"))
    monkeypatch.delenv("ATTNLIB_SECOND_PROCESS", raising=False)
    kwargs = {"seed": 1, "steps": 5, "batch": 8, "pairs": (1, 3)}
    job = second_process.start(train_unshuffle_baseline, **kwargs)
    assert job.where == "a second process"
    model, losses = train_unshuffle_attention(**kwargs)
    baseline, baseline_losses = job.result()
    together = train_unshuffle_models(**kwargs)
    assert losses == together[1] and baseline_losses == together[3]
    assert isinstance(baseline, Seq2SeqGRU) and not baseline.training
    for trained, reference in ((model, together[0]), (baseline, together[2])):
        for (name, a), b in zip(reference.state_dict().items(), trained.state_dict().values(), strict=True):
            assert torch.equal(a, b), name
