"""Independent bank for chapter 01, written from the exercise text only (#25)."""

import torch
import torch.nn.functional as F
from bank import Right, Wrong
from torch.nn.utils.rnn import pack_padded_sequence

from attnlib.chapters.seq2seq import BOS, EOS, PAD, shift_right

# ---- ex-01-1 context_vector ------------------------------------------------


def ctx_no_packing(embedding, gru, src, lengths):
    _, h = gru(embedding(src))
    return h[-1]  # the GRU read the PAD tokens


def ctx_bottom_layer(embedding, gru, src, lengths):
    packed = pack_padded_sequence(embedding(src), lengths.cpu(), batch_first=True, enforce_sorted=False)
    _, h = gru(packed)
    return h[0]  # the first layer, not the top one


def ctx_last_column(embedding, gru, src, lengths):
    out, _ = gru(embedding(src))
    return out[:, -1]  # position S - 1 for every row


def ctx_gather_off_by_one(embedding, gru, src, lengths):
    out, _ = gru(embedding(src))
    idx = lengths.clamp(max=src.shape[1] - 1)  # token lengths[b], one too far
    return out[torch.arange(src.shape[0]), idx]


def ctx_mean_layers(embedding, gru, src, lengths):
    packed = pack_padded_sequence(embedding(src), lengths.cpu(), batch_first=True, enforce_sorted=False)
    _, h = gru(packed)
    return h.mean(0)  # averaged over layers


def ctx_gather_outputs(embedding, gru, src, lengths):
    # the top layer's output at lengths - 1 is its state after that token
    out, _ = gru(embedding(src))
    return out[torch.arange(src.shape[0]), lengths - 1]


def ctx_row_by_row(embedding, gru, src, lengths):
    rows = []
    for b in range(src.shape[0]):
        n = int(lengths[b])
        _, h = gru(embedding(src[b : b + 1, :n]))
        rows.append(h[-1, 0])
    return torch.stack(rows)


# ---- ex-01-2 exact_sequence_accuracy ------------------------------------------


def esa_token_accuracy(pred, tgt):
    real = tgt != PAD
    return ((pred == tgt) & real).sum() / real.sum()


def esa_all_positions(pred, tgt):
    return (pred == tgt).all(1).float().mean()  # counts what follows EOS


def esa_mask_from_pred(pred, tgt):
    real = pred != PAD  # the mask taken from the prediction
    return ((pred == tgt) | ~real).all(1).float().mean()


def esa_count(pred, tgt):
    return ((pred == tgt) | (tgt == PAD)).all(1).sum()  # a count, not a share


def esa_ignores_eos(pred, tgt):
    real = tgt > EOS  # drops the EOS position too
    return ((pred == tgt) | ~real).all(1).float().mean()


def esa_loop(pred, tgt):
    right = 0
    for p, t in zip(pred.tolist(), tgt.tolist(), strict=True):
        right += all(a == b for a, b in zip(p, t, strict=True) if b != PAD)
    return right / len(tgt)


# ---- ex-01-3 greedy_decode_loop --------------------------------------------


def _greedy(model, src, max_len, *, feed_back=True, pad_eos=True, keep_eos=True):
    _, context = model.encode(src)
    hidden = context[None]
    token = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
    out = []
    for _ in range(max_len):
        logits, hidden = model.decode(None, context, token, hidden=hidden)
        nxt = logits.argmax(-1)  # (B, 1)
        out.append(nxt)
        if feed_back:
            token = nxt
    tokens = torch.cat(out, 1)
    if pad_eos:
        is_eos = (tokens == EOS).long().cumsum(1)
        after = is_eos > 0 if not keep_eos else (is_eos - (tokens == EOS).long()) > 0
        tokens = tokens.masked_fill(after, PAD)
    return tokens


def gdl_no_pad(model, src, max_len):
    return _greedy(model, src, max_len, pad_eos=False)


def gdl_pads_the_eos(model, src, max_len):
    return _greedy(model, src, max_len, keep_eos=False)


def gdl_bos_every_step(model, src, max_len):
    return _greedy(model, src, max_len, feed_back=False)


def gdl_bos_in_output(model, src, max_len):
    tokens = _greedy(model, src, max_len)
    bos = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
    return torch.cat([bos, tokens[:, :-1]], 1)


def gdl_right(model, src, max_len):
    return _greedy(model, src, max_len)


def gdl_hidden_none_first(model, src, max_len):
    # the text: decode's hidden defaults to the context at the first step
    _, context = model.encode(src)
    B = src.shape[0]
    token, hidden = torch.full((B, 1), BOS, dtype=torch.long), None
    out = torch.full((B, max_len), PAD, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(max_len):
        logits, hidden = model.decode(None, context, token, hidden=hidden)
        token = logits[:, 0].argmax(-1, keepdim=True)
        out[:, t] = torch.where(done, torch.full_like(token[:, 0], PAD), token[:, 0])
        done |= token[:, 0] == EOS
    return out


# ---- ex-01-4 train_seq2seq_steps -------------------------------------------


def _loss(model, src, tgt):
    logits = model(src, shift_right(tgt))
    return F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)


def tss_no_zero_grad(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        loss = _loss(model, src, tgt)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def tss_zero_grad_after_step(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        loss = _loss(model, src, tgt)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()  # too late for the first batch's leftover
        losses.append(loss.detach())
    return torch.stack(losses)


def tss_pad_in_loss(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        optimizer.zero_grad()
        logits = model(src, shift_right(tgt))
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def tss_no_shift(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        optimizer.zero_grad()
        logits = model(src, tgt)  # the decoder sees the token it must predict
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def tss_loss_after_step(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        optimizer.zero_grad()
        _loss(model, src, tgt).backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(_loss(model, src, tgt))  # after the update
    return torch.stack(losses)


def tss_mean_of_row_means(model, optimizer, batches):
    losses = []
    for src, tgt in batches:
        optimizer.zero_grad()
        logits = model(src, shift_right(tgt))
        ce = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
        real = (tgt != PAD).float()
        loss = ((ce * real).sum(1) / real.sum(1)).mean()  # rows weigh equally
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def tss_masked_sum(model, optimizer, batches):
    losses = torch.empty(len(batches))
    for i, (src, tgt) in enumerate(batches):
        optimizer.zero_grad(set_to_none=False)
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], 1)
        logp = model(src, tgt_in).log_softmax(-1)
        nll = -logp.gather(-1, tgt[..., None])[..., 0]
        real = tgt != PAD
        loss = nll[real].sum() / real.sum()
        loss.backward()
        optimizer.step()
        losses[i] = loss.item()
    return losses


WRONG = [
    Wrong("ex-01-1", ctx_no_packing, "GRU reads PAD (no packing)"),
    Wrong("ex-01-1", ctx_bottom_layer, "bottom layer h[0] not top"),
    Wrong("ex-01-1", ctx_last_column, "output at last column S-1"),
    Wrong("ex-01-1", ctx_gather_off_by_one, "gathers at lengths not lengths-1"),
    Wrong("ex-01-1", ctx_mean_layers, "mean over layers"),
    Wrong("ex-01-2", esa_token_accuracy, "token accuracy instead of sequence"),
    Wrong("ex-01-2", esa_all_positions, "compares positions after EOS"),
    Wrong("ex-01-2", esa_mask_from_pred, "mask taken from pred not tgt"),
    Wrong("ex-01-2", esa_count, "count instead of share"),
    Wrong("ex-01-2", esa_ignores_eos, "EOS position not compared"),
    Wrong("ex-01-3", gdl_no_pad, "no PAD after first EOS"),
    Wrong("ex-01-3", gdl_pads_the_eos, "EOS itself replaced by PAD"),
    Wrong("ex-01-3", gdl_bos_every_step, "BOS fed every step, no feedback"),
    Wrong("ex-01-3", gdl_bos_in_output, "BOS included in output, shifted"),
    Wrong("ex-01-4", tss_no_zero_grad, "no zero_grad, gradients accumulate"),
    Wrong("ex-01-4", tss_zero_grad_after_step, "zero_grad after step: leftover leaks"),
    Wrong("ex-01-4", tss_pad_in_loss, "PAD counted in the loss"),
    Wrong("ex-01-4", tss_no_shift, "decoder input not shifted"),
    Wrong("ex-01-4", tss_loss_after_step, "loss recorded after the update"),
    Wrong("ex-01-4", tss_mean_of_row_means, "mean of per-row means"),
]
RIGHT = [
    Right("ex-01-1", ctx_gather_outputs),
    Right("ex-01-1", ctx_row_by_row),
    Right("ex-01-2", esa_loop),
    Right("ex-01-3", gdl_right),
    Right("ex-01-3", gdl_hidden_none_first),
    Right("ex-01-4", tss_masked_sum),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "ctx_no_packing": "padding included",
    "ctx_bottom_layer": "the bottom layer's final state",
    "ctx_last_column": "the state after the last column",
    "ctx_gather_off_by_one": None,
    "ctx_mean_layers": None,
    "esa_token_accuracy": "token accuracy over the real",
    "esa_all_positions": "whole rows compared, PAD positions included",
    "esa_mask_from_pred": "the prediction's PAD positions ignored",
    "esa_count": "the number of right rows instead of their share",
    "esa_ignores_eos": None,
    "gdl_no_pad": "tokens after EOS not replaced by PAD",
    "gdl_pads_the_eos": "the EOS itself replaced by PAD",
    "gdl_bos_every_step": "BOS fed at every step",
    "gdl_bos_in_output": None,
    "tss_no_zero_grad": "gradients never zeroed",
    "tss_zero_grad_after_step": "gradients zeroed after the step",
    "tss_pad_in_loss": "PAD positions counted in the loss",
    "tss_no_shift": "decoder input not shifted right",
    "tss_loss_after_step": "loss recomputed after the step",
    "tss_mean_of_row_means": None,
}
