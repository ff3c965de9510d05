"""attnlib.chapters.seq2seq: token tasks, the no-attention GRU encoder-decoder, training and metrics."""

import pytest
import torch

from attnlib.chapters.seq2seq import (
    BOS,
    DIGIT_OFFSET,
    EOS,
    PAD,
    VOCAB_SIZE,
    Seq2SeqAdditiveAttention,
    Seq2SeqGRU,
    decode_tokens,
    digit_task_batch,
    encode_digits,
    exact_match,
    final_state_context,
    sequence_accuracy,
    shift_right,
    source_lengths,
    token_accuracy,
    train_seq2seq,
    unshuffle_batch,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_token_helpers():
    assert (PAD, BOS, EOS, DIGIT_OFFSET, VOCAB_SIZE) == (0, 1, 2, 3, 13)
    assert encode_digits([0, 9, 4]) == [3, 12, 7]
    assert decode_tokens([BOS, 3, 12, EOS, 5, PAD]) == "<s> 0 9 </s>"
    assert decode_tokens(torch.tensor([4, 5, PAD])) == "1 2"
    with pytest.raises(ValueError, match="digits 0-9"):
        encode_digits([10])


@pytest.mark.parametrize("task", ["copy", "reverse", "sort"])
def test_digit_task_batch(task):
    src, tgt = digit_task_batch(task, 16, (2, 7), gen(1))
    assert src.dtype == tgt.dtype == torch.long
    assert tgt.shape == (16, src.shape[1] + 1)
    for s, t in zip(src, tgt, strict=True):
        n = int((s != PAD).sum())
        assert 2 <= n <= 7 and (s[n:] == PAD).all() and (s[:n] >= DIGIT_OFFSET).all()
        digits = (s[:n] - DIGIT_OFFSET).tolist()
        want = {"copy": digits, "reverse": digits[::-1], "sort": sorted(digits)}[task]
        assert (t[:n] - DIGIT_OFFSET).tolist() == want
        assert t[n] == EOS and (t[n + 1 :] == PAD).all()
    # the same generator seed gives the same batch
    assert torch.equal(digit_task_batch(task, 16, (2, 7), gen(1))[0], src)
    with pytest.raises(ValueError, match="task"):
        digit_task_batch("shuffle", 2, 3, gen())


def test_unshuffle_batch():
    src, tgt = unshuffle_batch(32, (2, 9), gen(3))
    for s, t in zip(src, tgt, strict=True):
        n2 = int((s != PAD).sum())
        pairs = [tuple(s[i : i + 2].tolist()) for i in range(0, n2, 2)]
        out = [tuple(t[i : i + 2].tolist()) for i in range(0, n2, 2)]
        assert t[n2] == EOS
        assert sorted(pairs) == sorted(out) and pairs[0] == out[0]
        for (_, b), (c, _) in zip(out, out[1:], strict=False):  # each pair starts where the last ended
            assert b == c
        chain = [out[0][0]] + [p[1] for p in out]
        assert len(set(chain)) == len(chain)
    with pytest.raises(ValueError, match="at most 9"):
        unshuffle_batch(1, 10, gen())


def test_shift_right_and_lengths():
    tgt = torch.tensor([[5, 6, EOS, PAD], [7, 8, 9, EOS]])
    assert shift_right(tgt).tolist() == [[BOS, 5, 6, EOS], [BOS, 7, 8, 9]]
    assert source_lengths(torch.tensor([[4, 5, PAD], [4, 4, 4]])).tolist() == [2, 3]


def test_gru_shapes():
    torch.manual_seed(0)
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 12)
    src, tgt = digit_task_batch("copy", 5, (1, 6), gen())
    states, context = model.encode(src)
    assert states.shape == (5, src.shape[1], 12) and context.shape == (5, 12)
    assert model(src, shift_right(tgt)).shape == (5, tgt.shape[1], VOCAB_SIZE)
    assert model.greedy_decode(src, 9).shape == (5, 9)


def test_context_is_the_state_after_the_last_real_token():
    torch.manual_seed(0)
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 12)
    src = torch.tensor([[4, 5, 6, PAD, PAD], [7, 8, 9, 10, 11]])
    _, context = model.encode(src)
    for b, n in enumerate([3, 5]):  # one sequence at a time, no padding at all
        h = torch.zeros(1, 1, 12)
        for t in src[b, :n]:
            _, h = model.encoder(model.embedding(t.view(1, 1)), h)
        torch.testing.assert_close(context[b], h[0, 0])
    torch.testing.assert_close(final_state_context(model.embedding, model.encoder, src), context)


@pytest.mark.parametrize("cls", ["gru", "attention"])
def test_padding_does_not_change_the_output(cls):
    torch.manual_seed(0)
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 12) if cls == "gru" else Seq2SeqAdditiveAttention(VOCAB_SIZE, 8, 12)
    src, tgt = digit_task_batch("reverse", 4, (2, 5), gen(2))
    padded = torch.cat([src, torch.full((4, 3), PAD)], dim=1)  # three more PAD columns
    torch.testing.assert_close(model(src, shift_right(tgt)), model(padded, shift_right(tgt)))
    assert torch.equal(model.greedy_decode(src, 6), model.greedy_decode(padded, 6))


def test_gru_decoder_sees_the_source_only_through_the_final_state():
    torch.manual_seed(0)
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 12)
    src, tgt = digit_task_batch("copy", 4, 6, gen())
    states, context = model.encode(src)
    noisy = states.clone()
    noisy[:, :-1] += torch.randn_like(noisy[:, :-1])  # every state but the last
    a, _ = model.decode(states, context, shift_right(tgt))
    b, _ = model.decode(noisy, context, shift_right(tgt))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    c, _ = model.decode(states, context + 0.1, shift_right(tgt))
    assert not torch.allclose(a, c)
    # contrast: the attention model reads every encoder state
    torch.manual_seed(0)
    attn = Seq2SeqAdditiveAttention(VOCAB_SIZE, 8, 12)
    states, key_mask, s0 = attn.encode(src)
    noisy = states.clone()
    noisy[:, :-1] += torch.randn_like(noisy[:, :-1])
    a, _, _ = attn.decode(states, key_mask, s0, shift_right(tgt))
    b, _, _ = attn.decode(noisy, key_mask, s0, shift_right(tgt))
    assert not torch.allclose(a, b)


def test_attention_weights_shapes_and_mask():
    torch.manual_seed(0)
    model = Seq2SeqAdditiveAttention(VOCAB_SIZE, 8, 12)
    src = torch.tensor([[4, 5, 6, PAD], [7, 8, 9, 10]])
    tgt = torch.tensor([[6, 5, 4, EOS], [10, 9, 8, 7]])
    logits, weights = model.forward_with_attention(src, shift_right(tgt))
    assert logits.shape == (2, 4, VOCAB_SIZE) and weights.shape == (2, 4, 4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4))
    assert (weights[0, :, 3] == 0).all()
    tokens, w = model.greedy_decode_with_attention(src, 5)
    assert tokens.shape == (2, 5) and w.shape == (2, 5, 4) and (w[0, :, 3] == 0).all()


def test_bad_input_raises():
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 12)
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        model.encode(torch.tensor([4, 5, 6]))
    with pytest.raises(ValueError, match="src_lengths"):
        model.encode(torch.tensor([[4, 5, 6]]), torch.tensor([4]))


def test_exact_match_and_accuracies():
    tgt = torch.tensor([[4, 5, EOS, PAD], [6, 7, 8, EOS]])
    pred = torch.tensor([[4, 5, EOS, 9], [6, 7, 9, EOS]])  # row 0 right (junk after EOS), row 1 wrong
    assert exact_match(pred, tgt).tolist() == [True, False]

    class Fixed(torch.nn.Module):
        def greedy_decode(self, src, max_len, src_lengths=None):
            return pred[:, :max_len]

    assert sequence_accuracy(Fixed(), tgt, tgt) == 0.5
    assert token_accuracy(Fixed(), tgt, tgt) == pytest.approx(6 / 7)


def _train(seed):
    torch.manual_seed(seed)
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 16)
    losses = train_seq2seq(model, lambda g: digit_task_batch("copy", 16, (1, 4), g), 5, seed=seed)
    return model, losses


def test_training_is_deterministic_and_lowers_the_loss():
    m1, l1 = _train(0)
    m2, l2 = _train(0)
    assert l1 == l2
    for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(p, q)
    torch.manual_seed(0)
    model = Seq2SeqGRU(VOCAB_SIZE, 16, 32)
    losses = train_seq2seq(model, lambda g: digit_task_batch("copy", 32, (1, 3), g), 150, lr=1e-2)
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    src, tgt = digit_task_batch("copy", 100, 2, gen(9))
    assert sequence_accuracy(model, src, tgt) > 0.5


def test_seeded_model_depends_on_the_seed_alone():
    from attnlib.chapters.seq2seq import seeded_model

    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    a = seeded_model(3, Seq2SeqGRU, VOCAB_SIZE, 8, 16)
    assert torch.equal(torch.random.get_rng_state(), state), "the global RNG must be left as it was"
    torch.rand(5)  # move the global RNG: the same seed still gives the same weights
    b = seeded_model(3, Seq2SeqGRU, VOCAB_SIZE, 8, 16)
    c = seeded_model(4, Seq2SeqGRU, VOCAB_SIZE, 8, 16)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    assert not torch.equal(a.out.weight, c.out.weight)
    with pytest.raises(TypeError, match="seed must be an int"):
        seeded_model(1.0, Seq2SeqGRU, VOCAB_SIZE, 8, 16)
    with pytest.raises(ValueError, match="seed must be non-negative"):
        seeded_model(-1, Seq2SeqGRU, VOCAB_SIZE, 8, 16)


def test_train_reverse_model_is_reproducible_whatever_ran_before():
    from attnlib.chapters.seq2seq import train_reverse_model

    torch.manual_seed(0)
    m1, l1 = train_reverse_model(seed=1, steps=3, batch=8, lengths=(1, 4))
    torch.rand(7)
    m2, l2 = train_reverse_model(seed=1, steps=3, batch=8, lengths=(1, 4))
    assert l1 == l2 and len(l1) == 3
    for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(p, q)
    _, l3 = train_reverse_model(seed=2, steps=3, batch=8, lengths=(1, 4))
    assert l3 != l1


def test_bottleneck_metrics_shapes_and_ranges():
    from attnlib.chapters.seq2seq import (
        BOTTLENECK_POSITION_LENGTH,
        BOTTLENECK_TEST_LENGTHS,
        bottleneck_metrics,
    )

    torch.manual_seed(0)
    model = Seq2SeqGRU(VOCAB_SIZE, 8, 16)
    losses = [3.0 - i / 100 for i in range(300)]
    m = bottleneck_metrics(model, losses)
    assert m["loss_first"] == pytest.approx(sum(losses[:50]) / 50)
    assert m["loss_mid"] == pytest.approx(sum(losses[200:250]) / 50)
    assert m["loss_last"] == pytest.approx(sum(losses[-50:]) / 50)
    assert len(m["seq_acc"]) == len(m["tok_acc"]) == len(BOTTLENECK_TEST_LENGTHS)
    assert len(m["per_position"]) == BOTTLENECK_POSITION_LENGTH
    for key in ("seq_acc", "tok_acc", "per_position"):
        assert all(0.0 <= a <= 1.0 for a in m[key]), key
    assert all(s <= t for s, t in zip(m["seq_acc"], m["tok_acc"], strict=True))
    with pytest.raises(ValueError, match="at least 250 losses"):
        bottleneck_metrics(model, losses[:100])
