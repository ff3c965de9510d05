"""Chapter 01 exercises: the encoder's context vector, and exact-sequence accuracy."""

import torch
from torch import nn

from attnlib.chapters.seq2seq import (
    BOS,
    EOS,
    PAD,
    Seq2SeqGRU,
    exact_match,
    final_state_context,
)
from attnlib.checks._cases import cases, optimiser_step
from attnlib.checks.core import Exercise, Misconception, register, reset_parameters
from attnlib.checks.exercise import register_written


def _after_eos_to_pad(tokens: torch.Tensor) -> torch.Tensor:
    """PAD in every position after a row's first EOS: (B, T) -> (B, T)."""
    is_eos = (tokens == EOS).long()
    return tokens.masked_fill(is_eos.cumsum(dim=1) - is_eos > 0, PAD)


def context_vector(embedding: nn.Embedding, gru: nn.GRU, src: torch.Tensor, lengths: torch.Tensor):
    """The top layer's GRU state after each sequence's last real token: (B, S) -> (B, H)."""
    return final_state_context(embedding, gru, src, lengths)


def _encoder_inputs(rows, hidden=5, layers=1, seed=0):
    g = torch.Generator().manual_seed(seed)  # private: never torch's global generator
    embedding = reset_parameters(nn.Embedding(13, 4, padding_idx=PAD), g)
    gru = reset_parameters(nn.GRU(4, hidden, num_layers=layers, batch_first=True), g)
    width = max(len(r) for r in rows)
    src = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    lengths = torch.tensor([len(r) for r in rows])
    return embedding, gru, src, lengths


def _run_all(embedding, gru, src):
    return gru(embedding(src))  # outputs (B, S, H), h_n (L, B, H)


def _state_one_past_the_end(embedding, gru, src, lengths):
    outputs = _run_all(embedding, gru, src)[0]  # (B, S, H)
    return outputs[torch.arange(src.shape[0]), lengths]  # position lengths[b]: one too far


def _bottom_layer_state(embedding, gru, src, lengths):
    x = embedding(src)  # (B, S, E)
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    return gru(packed)[1][0]  # h_n[0]: the first layer


register(
    Exercise(
        id="ex-01-1",
        function="context_vector",
        reference=context_vector,
        cases=cases(
            None,
            {
                "two sequences of length 4, no padding": lambda: _encoder_inputs(
                    [[4, 5, 6, 7], [12, 3, 8, 8]]
                ),
                "three sequences of lengths 5, 2, 3 (padded)": lambda: _encoder_inputs(
                    [[4, 5, 6, 7, 8], [9, 10], [3, 3, 11]], seed=1
                ),
                "two layers, lengths 3 and 6": lambda: _encoder_inputs(
                    [[5, 6, 7], [8, 9, 10, 11, 12, 3]], hidden=3, layers=2, seed=2
                ),
                "hidden: four sequences of lengths 1, 6, 4, 2": lambda: _encoder_inputs(
                    [[7], [3, 4, 5, 6, 7, 8], [12, 11, 10, 9], [6, 6]], hidden=6, layers=2, seed=3
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "the state after the last column, padding included",
                lambda e, g, s, n: _run_all(e, g, s)[1][-1],
                "the GRU keeps updating its state on PAD tokens: take the state at position "
                "lengths[b] - 1 (gather it from the outputs, or pack the sequence).",
            ),
            Misconception(
                "the state after the first token",
                lambda e, g, s, n: _run_all(e, g, s)[0][:, 0],
                "the context is the state after the encoder has read the whole source, not the first token.",
            ),
            Misconception(
                "the average of the encoder states",
                lambda e, g, s, n: _run_all(e, g, s)[0].mean(dim=1),
                "the context vector is one state, the last one; averaging the states is a different "
                "(attention-like) summary.",
            ),
            Misconception(
                "the bottom layer's final state",
                _bottom_layer_state,
                "h_n has one row per layer, the bottom layer first: the context is h_n[-1].",
            ),
            Misconception(
                "off by one: the state at position lengths[b], one past the last real token",
                _state_one_past_the_end,
                "positions count from 0: the last real token of a sequence of length n sits at n - 1.",
            ),
        ],
        forbidden=("attnlib.chapters.seq2seq.final_state_context",),
        hints=(
            "the context is the encoder's state after it has read the last *real* token of each "
            "sequence; padding comes after it and must not change it.",
            "either pack the padded batch (nn.utils.rnn.pack_padded_sequence) so the GRU stops at "
            "each length, or pick each row's output at its own last position.",
            "with packing, the top layer's row of h_n is the answer, shape (B, H); without, "
            "outputs[b, lengths[b] - 1].",
        ),
    )
)


def exact_sequence_accuracy(pred: torch.Tensor, tgt: torch.Tensor):
    """Share of rows where pred equals tgt at every position where tgt is not PAD."""
    return exact_match(torch.as_tensor(pred), torch.as_tensor(tgt)).double().mean()


def _acc_inputs(pred, tgt):
    return torch.tensor(pred), torch.tensor(tgt)


E = EOS
_TGT = [[4, 5, 6, E, 0, 0], [7, 8, E, 0, 0, 0], [9, 9, 9, 9, 9, E], [3, E, 0, 0, 0, 0]]

register(
    Exercise(
        id="ex-01-2",
        function="exact_sequence_accuracy",
        reference=exact_sequence_accuracy,
        cases=cases(
            _acc_inputs,
            {
                "4 sequences, 2 right, one with a wrong token": (
                    [[4, 5, 6, E, 0, 0], [7, 8, E, 0, 0, 0], [9, 9, 9, 9, 3, E], [4, E, 0, 0, 0, 0]],
                    _TGT,
                ),
                "the model writes junk after its EOS": (
                    [[4, 5, 6, E, 7, 7], [7, 8, E, 3, 0, 0], [9, 9, 9, 9, 9, E], [3, E, 0, 0, 0, 0]],
                    _TGT,
                ),
                "a missing EOS and one wrong token": (
                    [[4, 5, 6, 6, 0, 0], [7, 8, E, 0, 0, 0], [9, 9, 9, 9, 9, E], [5, E, 8, 8, 8, 8]],
                    _TGT,
                ),
                "hidden: the model stops early (PAD before the target's EOS)": (
                    [[4, 5, 0, 0, 0, 0], [7, 8, E, 0, 0, 0], [9, 9, 9, 9, 9, E], [3, E, 0, 0, 0, 0]],
                    _TGT,
                ),
                "hidden: 3 sequences of different lengths": (
                    [[3, 4, E, 9, 9], [5, 6, 7, 8, E], [12, E, 0, 0, 0]],
                    [[3, 4, E, 0, 0], [5, 6, 7, 8, E], [11, E, 0, 0, 0]],
                ),
                "hidden: the model runs past the target's end (a token where EOS belongs)": (
                    [[3, 4, 9, 9, 0], [5, 6, E, 0, 0], [7, E, 0, 0, 0]],
                    [[3, 4, E, 0, 0], [5, 6, E, 0, 0], [7, E, 0, 0, 0]],
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "token accuracy over every position, PAD included",
                lambda p, t: (p == t).double().mean(),
                "one wrong token makes the whole sequence wrong: compare whole sequences, not tokens.",
            ),
            Misconception(
                "token accuracy over the real (non-PAD) tokens",
                lambda p, t: ((p == t) & (t != PAD)).sum().double() / (t != PAD).sum(),
                "that is token accuracy; exact-sequence accuracy counts a sequence as right only when "
                "every one of its tokens is right.",
            ),
            Misconception(
                "whole rows compared, PAD positions included",
                lambda p, t: (p == t).all(dim=1).double().mean(),
                "ignore the positions where the target is PAD: what a model writes after its EOS "
                "does not count against it.",
            ),
            Misconception(
                "the number of right rows instead of their share",
                lambda p, t: ((p == t) | (t == PAD)).all(dim=1).sum(),
                "divide the count of right rows by the number of rows: the accuracy is a share in [0, 1].",
            ),
            Misconception(
                "the prediction's PAD positions ignored instead of the target's",
                lambda p, t: ((p == t) | (p == PAD)).all(dim=1).double().mean(),
                "a model that stops early writes PAD where the target still has tokens: only the "
                "target's PAD positions are free.",
            ),
            Misconception(
                "the target's EOS is not compared (a sequence that misses its EOS counts as right)",
                lambda p, t: ((p == t) | (t == PAD) | (t == EOS)).all(dim=1).double().mean(),
                "the EOS is a token of the target like the others: a model that does not stop where "
                "the target stops is wrong. Only the target's PAD positions are free.",
            ),
        ],
        rtol=1e-9,
        atol=1e-9,
        forbidden=("attnlib.chapters.seq2seq.exact_match",),
        hints=(
            "one wrong token makes the whole sequence wrong; the accuracy is the share of sequences "
            "that are entirely right.",
            "only the positions where the *target* is not PAD count: what comes after the target's "
            "end does not.",
            "a row is right when, at every one of its positions, the prediction equals the target or "
            "the target is PAD; the accuracy is the share of right rows, a float in [0, 1].",
        ),
    )
)


# --------------------------------------------------------------------------- ex-01-3: greedy decoding


def greedy_decode_loop(model, src: torch.Tensor, max_len: int):
    """Greedy decoding of a one-layer Seq2SeqGRU, step by step: (B, S) -> (B, max_len), PAD after EOS."""
    return model.greedy_decode(src, max_len)


def _decode_inputs(seed, batch, length, max_len, eos_bias):
    model = reset_parameters(Seq2SeqGRU(13, 6, 8), torch.Generator().manual_seed(seed)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # larger weights: livelier outputs from an untrained model
        model.out.bias[EOS] += eos_bias  # makes an early EOS likely, so that the PAD rule matters
    src = torch.randint(3, 13, (batch, length), generator=torch.Generator().manual_seed(seed))
    return model, src, max_len


def _bos_every_step(model, src, max_len):
    _, context = model.encode(src)
    hidden, bos, out = context[None], torch.full((src.shape[0], 1), BOS), []
    for _ in range(max_len):
        logits, hidden = model.decode(None, context, bos, hidden=hidden)
        out.append(logits.argmax(-1))
    return _after_eos_to_pad(torch.cat(out, dim=1))


def _no_pad_after_eos(model, src, max_len):
    _, context = model.encode(src)
    hidden, token, out = context[None], torch.full((src.shape[0], 1), BOS), []
    for _ in range(max_len):
        logits, hidden = model.decode(None, context, token, hidden=hidden)
        token = logits.argmax(-1)
        out.append(token)
    return torch.cat(out, dim=1)


def _eos_replaced_too(model, src, max_len):
    tokens = greedy_decode_loop(model, src, max_len)
    return tokens.masked_fill(tokens == EOS, PAD)


def _fresh_state_every_step(model, src, max_len):
    _, context = model.encode(src)
    token, out = torch.full((src.shape[0], 1), BOS), []
    for _ in range(max_len):
        logits, _ = model.decode(None, context, token, hidden=context[None])
        token = logits.argmax(-1)
        out.append(token)
    return _after_eos_to_pad(torch.cat(out, dim=1))


register(
    Exercise(
        id="ex-01-3",
        function="greedy_decode_loop",
        reference=greedy_decode_loop,
        cases=cases(
            _decode_inputs,
            {
                "batch of 4, source length 3, 8 steps": (1, 4, 3, 8, 3.0),
                "one source of length 7, 4 steps": (2, 1, 7, 4, 2.0),
                "batch of 5, source length 4, 7 steps": (3, 5, 4, 7, 1.0),
                "hidden: batch of 4, source length 3, 8 steps, another model": (1, 4, 3, 8, 2.0),
            },
        ),
        misconceptions=[
            Misconception(
                "BOS fed at every step",
                _bos_every_step,
                "feed each step's predicted token back in as the next step's input.",
            ),
            Misconception(
                "the decoder state is reset at every step",
                _fresh_state_every_step,
                "carry the hidden state returned by decode() into the next step.",
            ),
            Misconception(
                "tokens after EOS not replaced by PAD",
                _no_pad_after_eos,
                "after a row's first EOS, write PAD in every later position of that row.",
            ),
            Misconception(
                "the EOS itself replaced by PAD",
                _eos_replaced_too,
                "keep the first EOS of each row: only the positions after it become PAD.",
            ),
        ],
        rtol=0,
        atol=0,
        forbidden=(".greedy_decode",),
        hints=(
            "greedy decoding feeds each step's most likely token back in as the next input, "
            "carrying the decoder's state along.",
            "encode once; start from BOS and the encoder's context; every step gives logits and a "
            "new hidden state to keep.",
            "encode once; then feed the arg-max token back max_len times, carrying the decoder's hidden"
            " state from one step to the next; afterwards every position after a row's first EOS "
            "becomes PAD.",
        ),
    )
)


# --------------------------------------------------------------------------- ex-01-4: training steps
# (appended by the chapters-01-02-07 helper: the learner writes the training step of chapter 01)


def train_seq2seq_steps(model, optimizer, batches):
    """One teacher-forced optimiser step per batch; the N losses before each step, a tensor (N,).

    batches: a list of (src (B, S), tgt (B, T)) pairs, tgt ending with EOS and right-padded
    with PAD. The loss is the mean cross-entropy over the real (non-PAD) target tokens of
    ``model(src, shift_right(tgt))``.
    """
    losses = []
    for src, tgt in batches:
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)  # (B, T)
        logits = model(src, tgt_in)  # (B, T, V)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)  # (N,)


def _train_step_inputs(seed, n_batches, batch, lengths, stale_grads=True):
    def make():
        g = torch.Generator().manual_seed(seed)
        model = reset_parameters(Seq2SeqGRU(13, 6, 8), g)
        if stale_grads:  # gradients left over from an earlier cell, as in a notebook
            for p in model.parameters():
                p.grad = torch.full_like(p, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        batches = []
        for _ in range(n_batches):
            n = torch.randint(lengths[0], lengths[1] + 1, (batch,), generator=g).tolist()
            rows = [torch.randint(3, 13, (k,), generator=g).tolist() for k in n]
            width = max(n)
            src = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
            tgt = torch.tensor([r[::-1] + [EOS] + [PAD] * (width - len(r)) for r in rows])
            batches.append((src, tgt))
        return model, optimizer, batches

    return make


def _losses_as_floats(value):
    """The losses as a float64 vector, whether returned as a tensor, an array or a list."""
    import numpy as np

    if isinstance(value, tuple):
        value = [np.asarray(v, dtype=np.float64).reshape(-1) for v in value]
        return np.concatenate(value) if value else np.zeros(0)
    return np.asarray(value, dtype=np.float64).reshape(-1)


def _compare_losses(expected, got, exercise):
    from attnlib.checks.core import compare_outputs

    try:
        got = _losses_as_floats(got)
    except (TypeError, ValueError):
        return False, "return the losses as a tensor (N,) of numbers, one per batch"
    return compare_outputs(_losses_as_floats(expected), got, exercise.rtol, exercise.atol)


def _train_variant(shift=True, ignore_pad=True, zero_grad=True, step=True, reduction="mean"):
    def train(model, optimizer, batches):
        losses = []
        for src, tgt in batches:
            tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)
            logits = model(src, tgt_in if shift else tgt)
            loss = nn.functional.cross_entropy(
                logits.flatten(0, 1),
                tgt.flatten(),
                ignore_index=PAD if ignore_pad else -100,
                reduction=reduction,
            )
            losses.append(optimiser_step(optimizer, loss, zero_grad=zero_grad, step=step))
        return torch.stack(losses)

    return train


def _batch_loss(model, src, tgt, predict_input=False):
    """One batch's teacher-forced loss as the reference computes it; ``predict_input``: the loss
    asks position t for its own input token instead (targets misaligned)."""
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)
    logits = model(src, tgt_in)
    target = tgt_in if predict_input else tgt
    return nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD)


def _zero_grad_once(model, optimizer, batches):
    """The gradients are cleared once, before the first batch: from then on they pile up."""
    optimizer.zero_grad()
    losses = []
    for src, tgt in batches:
        losses.append(optimiser_step(optimizer, _batch_loss(model, src, tgt), zero_grad=False))
    return torch.stack(losses)


def _zero_grad_after_step(model, optimizer, batches):
    """The gradients are cleared after each step: the first step still uses the leftover ones."""
    losses = []
    for src, tgt in batches:
        losses.append(optimiser_step(optimizer, _batch_loss(model, src, tgt), zero_grad=False))
        optimizer.zero_grad()
    return torch.stack(losses)


def _predict_the_input(model, optimizer, batches):
    """Targets misaligned: the loss asks position t to predict its own input token."""
    losses = []
    for src, tgt in batches:
        losses.append(optimiser_step(optimizer, _batch_loss(model, src, tgt, predict_input=True)))
    return torch.stack(losses)


def _loss_after_the_step(model, optimizer, batches):
    """Returns each batch's loss recomputed after the step instead of the loss the step used."""
    losses = []
    for src, tgt in batches:
        optimizer.zero_grad()
        _batch_loss(model, src, tgt).backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(_batch_loss(model, src, tgt))
    return torch.stack(losses)


register(
    Exercise(
        id="ex-01-4",
        function="train_seq2seq_steps",
        reference=train_seq2seq_steps,
        cases=cases(
            None,
            {
                "3 batches of 4 strings, lengths 2-5": _train_step_inputs(1, 3, 4, (2, 5)),
                "1 batch of 2 strings of length 3": _train_step_inputs(2, 1, 2, (3, 3)),
                "4 batches of 3 strings, lengths 1-6, no stale gradients": _train_step_inputs(
                    3, 4, 3, (1, 6), stale_grads=False
                ),
                "hidden: 3 batches of 5 strings, lengths 1-7": _train_step_inputs(4, 3, 5, (1, 7)),
            },
        ),
        misconceptions=[
            Misconception(
                "decoder input not shifted right (the target itself fed in)",
                _train_variant(shift=False),
                "teacher forcing feeds BOS followed by the target without its last token "
                "(shift_right(tgt)); fed the target itself, position t sees the token it must predict.",
            ),
            Misconception(
                "loss target is the decoder input (targets misaligned)",
                _predict_the_input,
                "the decoder input is shifted right, the loss target is not: position t predicts tgt[:, t].",
            ),
            Misconception(
                "PAD positions counted in the loss",
                _train_variant(ignore_pad=False),
                "padding is not part of any target: pass ignore_index=PAD to the cross-entropy.",
            ),
            Misconception(
                "gradients never zeroed (optimizer.zero_grad missing)",
                _train_variant(zero_grad=False),
                "backward() adds to .grad: clear the old gradients with optimizer.zero_grad() "
                "before each backward().",
            ),
            Misconception(
                "gradients zeroed once, before the first batch (they pile up from batch to batch)",
                _zero_grad_once,
                "every backward() adds to .grad, this step's gradients to the last step's: clear "
                "them before every backward(), not once for the whole loop.",
            ),
            Misconception(
                "gradients zeroed after the step: the leftover gradients leak into the first step",
                _zero_grad_after_step,
                "the model may arrive with gradients from an earlier cell: clear them before each "
                "backward(), so that the first step's update holds only its own gradients.",
            ),
            Misconception(
                "optimizer.step missing: the parameters never change",
                _train_variant(step=False),
                "after backward(), call optimizer.step() to update the parameters.",
            ),
            Misconception(
                "loss summed over tokens instead of averaged",
                _train_variant(reduction="sum"),
                "the loss is the mean over the real target tokens (the cross-entropy's default "
                "reduction), so its size does not depend on the batch.",
            ),
            Misconception(
                "loss recomputed after the step",
                _loss_after_the_step,
                "return the loss each step was computed from, before optimizer.step() changed the model.",
            ),
        ],
        rtol=1e-4,
        atol=1e-5,
        compare=_compare_losses,
        forbidden=("attnlib.chapters.seq2seq.train_seq2seq",),
        hints=(
            "a training step is: the model's predictions with teacher forcing, a loss, gradients, "
            "an update; the loss of each step is what you return.",
            "the decoder input is the target shifted right (BOS first); the loss compares the "
            "logits with the target itself and skips the padding; old gradients must not leak "
            "into the next step.",
            "teacher forcing: the decoder's input is the target shifted right (BOS first); the loss is "
            "the cross-entropy over the real (non-PAD) target tokens with batch and time flattened; "
            "then zero_grad, backward and step, keeping each loss detached.",
        ),
    )
)

# The written question of solutions/01-bottleneck.ipynb (graded by hand): check_all lists it.
register_written("q-01-1", points=1)
