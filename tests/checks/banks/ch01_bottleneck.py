"""Answer bank of chapter 01: ex-01-1 context vector, ex-01-2 exact-sequence accuracy,
ex-01-3 greedy decoding, ex-01-4 training steps."""

import torch
from bank import Right, Wrong

BOS, EOS, PAD = 1, 2, 0

# --------------------------------------------------------------------------- ex-01-1


def context_last_column(embedding, gru, src, lengths):
    _, h_n = gru(embedding(src))  # runs over the padding too
    return h_n[-1]


def context_off_by_one(embedding, gru, src, lengths):
    out, _ = gru(embedding(src))  # (B, S, H)
    return out[torch.arange(src.shape[0]), lengths]  # position lengths[b]: one too far


def context_bottom_layer(embedding, gru, src, lengths):
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        embedding(src), lengths, batch_first=True, enforce_sorted=False
    )
    _, h_n = gru(packed)
    return h_n[0]


def context_mean_of_states(embedding, gru, src, lengths):
    out, _ = gru(embedding(src))
    return out.mean(dim=1)


def context_gather(embedding, gru, src, lengths):
    out, _ = gru(embedding(src))  # (B, S, H): the top layer's states
    return out[torch.arange(src.shape[0]), lengths - 1]


def context_one_row_at_a_time(embedding, gru, src, lengths):
    rows = []
    for b in range(src.shape[0]):
        _, h_n = gru(embedding(src[b : b + 1, : int(lengths[b])]))  # no padding at all
        rows.append(h_n[-1, 0])
    return torch.stack(rows)


# --------------------------------------------------------------------------- ex-01-2


def accuracy_per_token(pred, tgt):
    real = tgt != PAD
    return ((pred == tgt) & real).sum() / real.sum()


def accuracy_whole_rows(pred, tgt):
    return (pred == tgt).all(dim=1).double().mean()


def accuracy_count(pred, tgt):
    return ((pred == tgt) | (tgt == PAD)).all(dim=1).sum()  # a count, not a share


def accuracy_prediction_pad_ignored(pred, tgt):
    return ((pred == tgt) | (pred == PAD)).all(dim=1).double().mean()  # the wrong side's PAD


def accuracy_python_loop(pred, tgt):
    right = 0
    for p, t in zip(pred.tolist(), tgt.tolist(), strict=True):
        right += all(pi == ti for pi, ti in zip(p, t, strict=True) if ti != PAD)
    return right / len(tgt)


def accuracy_float32(pred, tgt):
    per_row = (pred.eq(tgt) | tgt.eq(PAD)).float().mean(dim=1)  # 1.0 for a right row
    return per_row.eq(1.0).float().mean()  # float32


# --------------------------------------------------------------------------- ex-01-3


def _decode(model, src, max_len, *, feed_bos=False, reset=False, pad=True, pad_eos=False):
    _, context = model.encode(src)
    hidden = context[None]
    token = torch.full((src.shape[0], 1), BOS)
    out = []
    with torch.no_grad():
        for _ in range(max_len):
            logits, new_hidden = model.decode(None, context, token, hidden=context[None] if reset else hidden)
            hidden = new_hidden
            nxt = logits.argmax(dim=-1)
            out.append(nxt)
            token = torch.full_like(nxt, BOS) if feed_bos else nxt
    tokens = torch.cat(out, dim=1)
    if pad:
        is_eos = (tokens == EOS).long()
        after = (is_eos.cumsum(1) - is_eos) > 0
        tokens = tokens.masked_fill(after, PAD)
    if pad_eos:
        tokens = tokens.masked_fill(tokens == EOS, PAD)
    return tokens


def decode_bos_every_step(model, src, max_len):
    return _decode(model, src, max_len, feed_bos=True)


def decode_state_reset(model, src, max_len):
    return _decode(model, src, max_len, reset=True)


def decode_no_pad(model, src, max_len):
    return _decode(model, src, max_len, pad=False)


def decode_eos_replaced(model, src, max_len):
    return _decode(model, src, max_len, pad_eos=True)


def decode_by_the_model(model, src, max_len):
    return model.greedy_decode(src, max_len)


def decode_with_finished_flags(model, src, max_len):
    batch = src.shape[0]
    _, context = model.encode(src)
    hidden = context.unsqueeze(0)  # (1, B, H)
    prev = torch.full((batch, 1), BOS, dtype=torch.long)
    finished = torch.zeros(batch, 1, dtype=torch.bool)
    columns = []
    for _ in range(max_len):
        with torch.no_grad():
            logits, hidden = model.decode(None, context, prev, hidden=hidden)
        token = logits.argmax(dim=-1)  # (B, 1)
        columns.append(torch.where(finished, torch.full_like(token, PAD), token))
        finished = finished | (token == EOS)
        prev = token
    return torch.cat(columns, dim=1)


WRONG = [
    Wrong("ex-01-1", context_last_column, "padding included"),
    Wrong("ex-01-1", context_off_by_one, "off by one"),
    Wrong("ex-01-1", context_bottom_layer, "bottom layer"),
    Wrong("ex-01-1", context_mean_of_states, "average"),
    Wrong("ex-01-2", accuracy_per_token, "token accuracy"),
    Wrong("ex-01-2", accuracy_whole_rows, "PAD positions included"),
    Wrong("ex-01-2", accuracy_count, "number of right rows"),
    Wrong("ex-01-2", accuracy_prediction_pad_ignored, "prediction's PAD"),
    Wrong("ex-01-3", decode_bos_every_step, "BOS fed at every step"),
    Wrong("ex-01-3", decode_state_reset, "state is reset"),
    Wrong("ex-01-3", decode_no_pad, "not replaced by PAD"),
    Wrong("ex-01-3", decode_eos_replaced, "EOS itself"),
    Wrong("ex-01-3", decode_by_the_model, "not allowed"),
]
RIGHT = [
    Right("ex-01-1", context_gather),
    Right("ex-01-1", context_one_row_at_a_time),
    Right("ex-01-2", accuracy_python_loop),
    Right("ex-01-2", accuracy_float32),
    Right("ex-01-3", decode_with_finished_flags),
]


# --------------------------------------------------------------------------- ex-01-4 (training steps)


def _shift(tgt):
    return torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)


def steps_unshifted(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        logits = model(src, tgt)  # the answer fed in as the input
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses)


def steps_pad_in_loss(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        logits = model(src, _shift(tgt))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def steps_no_zero_grad(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        logits = model(src, _shift(tgt))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def steps_summed(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        logits = model(src, _shift(tgt))
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD, reduction="sum"
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def steps_by_the_library(model, optimizer, batches):
    from attnlib.chapters.seq2seq import train_seq2seq

    it = iter(batches)
    return torch.tensor(train_seq2seq(model, lambda g: next(it), len(batches), lr=0.5, clip=0))


def steps_masked_log_softmax_float64(model, optimizer, batches):
    """Right: the cross-entropy written out, averaged in float64 over the real tokens; a list back."""
    out = []
    for src, tgt in batches:
        tgt_in = tgt.roll(1, dims=1)
        tgt_in[:, 0] = BOS
        log_p = torch.log_softmax(model(src, tgt_in).double(), dim=-1)  # (B, T, V)
        picked = log_p.gather(-1, tgt[..., None])[..., 0]  # (B, T)
        real = (tgt != PAD).double()
        loss = -(picked * real).sum() / real.sum()
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        out.append(loss.item())
    return out


def steps_one_row_of_logits_at_a_time(model, optimizer, batches):
    """Right: NLL over the flattened real positions only, losses as a float32 tensor."""
    losses = torch.zeros(len(batches))
    for i, (src, tgt) in enumerate(batches):
        tgt_in = torch.cat([torch.tensor([[BOS]] * len(tgt)), tgt[:, :-1]], dim=1)
        logits = model(src, tgt_in)
        keep = tgt != PAD
        loss = torch.nn.functional.nll_loss(torch.log_softmax(logits[keep], dim=-1), tgt[keep])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses[i] = loss.detach()
    return losses


WRONG += [
    Wrong("ex-01-4", steps_unshifted, "not shifted"),
    Wrong("ex-01-4", steps_pad_in_loss, "PAD positions counted"),
    Wrong("ex-01-4", steps_no_zero_grad, "zero_grad"),
    Wrong("ex-01-4", steps_summed, "summed"),
    Wrong("ex-01-4", steps_by_the_library, "not allowed"),
]
RIGHT += [
    Right("ex-01-4", steps_masked_log_softmax_float64),
    Right("ex-01-4", steps_one_row_of_logits_at_a_time),
]

# --------------------------------------------------------------------------- issue 33 item 14


def accuracy_skipping_eos(pred, tgt):  # the target's EOS is not compared
    ok = (pred == tgt) | (tgt == PAD) | (tgt == EOS)
    return ok.all(dim=1).double().mean()


WRONG += [
    Wrong(
        "ex-01-2",
        accuracy_skipping_eos,
        "the target's EOS is not compared",
        not_named=("token accuracy",),
    )
]


def train_zero_grad_once(model, optimizer, batches):  # cleared once, then piling up (item 13)
    optimizer.zero_grad()
    losses = []
    for src, tgt in batches:
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses)


WRONG += [Wrong("ex-01-4", train_zero_grad_once, "gradients zeroed once")]
