"""Independent bank for chapter 10, written from the exercise text only (#25)."""

import torch
import torch.nn.functional as F
from bank import Right, Wrong

from attnlib.chapters import tiny_lm

# ---- ex-10-1 block_forward ------------------------------------------------------


def bf_post_norm(block, x):
    h = block.norm1(x + block.self_attention(x, is_causal=True))
    return block.norm2(h + block.feed_forward(h))


def bf_not_causal(block, x):
    h = x + block.self_attention(block.norm1(x), is_causal=False)
    return h + block.feed_forward(block.norm2(h))


def bf_residual_from_normed(block, x):
    y = block.norm1(x)
    h = y + block.self_attention(y, is_causal=True)  # residual of the normed input
    z = block.norm2(h)
    return z + block.feed_forward(z)


def bf_norm1_twice(block, x):
    h = x + block.self_attention(block.norm1(x), is_causal=True)
    return h + block.feed_forward(block.norm1(h))  # norm1 for the FFN too


def bf_ffn_on_x(block, x):
    h = x + block.self_attention(block.norm1(x), is_causal=True)
    return h + block.feed_forward(block.norm2(x))  # FFN reads x, not h


def bf_row_loop(block, x):
    rows = []
    for b in range(x.shape[0]):
        xb = x[b : b + 1]
        hb = xb + block.self_attention(block.norm1(xb), is_causal=True)
        rows.append(hb + block.feed_forward(block.norm2(hb)))
    return torch.cat(rows, 0)


def bf_named_steps(block, x):
    attn_in = block.norm1(x)
    attn_out = block.self_attention(attn_in, is_causal=True)
    resid = attn_out + x
    ffn_out = block.feed_forward(block.norm2(resid))
    return ffn_out + resid


# ---- ex-10-2 train_steps ------------------------------------------------------------


def _ce(model, batch, *, shift=True, ignore_pad=False):
    if shift:
        logits, targets = model(batch[:, :-1]), batch[:, 1:]
    else:
        logits, targets = model(batch), batch
    kw = {"ignore_index": tiny_lm.COPY_PAD} if ignore_pad else {}
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), **kw)


def ts_no_zero_grad(model, optimizer, batches):
    losses = []
    for batch in batches:
        loss = _ce(model, batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def ts_no_shift(model, optimizer, batches):
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        loss = _ce(model, batch, shift=False)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def ts_loss_after_step(model, optimizer, batches):
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        _ce(model, batch).backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(_ce(model, batch))
    return torch.stack(losses)


def ts_ignore_pad(model, optimizer, batches):
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        loss = _ce(model, batch, ignore_pad=True)  # the text says all positions
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def ts_shift_wrong_way(model, optimizer, batches):
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        logits = model(batch[:, 1:])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, :-1].flatten())
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def ts_zero_grad_after(model, optimizer, batches):
    losses = []
    for batch in batches:
        loss = _ce(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()  # the leftover gradient reaches the first step
        losses.append(loss.detach())
    return torch.stack(losses)


def ts_full_then_slice(model, optimizer, batches):
    # a causal LM: the logits of the first n-1 positions of the full batch
    # are those of model(batch[:, :-1]) (the last position predicts nothing)
    losses = torch.zeros(len(batches))
    for i in range(len(batches)):
        batch = batches[i]
        optimizer.zero_grad(set_to_none=True)
        logits = model(batch)[:, :-1]
        loss = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:])
        loss.backward()
        optimizer.step()
        losses[i] = loss.item()
    return losses


def ts_right(model, optimizer, batches):
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        loss = _ce(model, batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses)


# ---- ex-10-3 generate_cached -------------------------------------------------------


def _gen(model, prompt, n, *, offset_rule, capacity_extra=0, take=-1):
    B, P = prompt.shape
    caches = [blk.new_cache(B, P + n + capacity_extra) for blk in model.blocks]
    out = [prompt]
    if n == 0:
        return prompt
    logits = model.forward_cached(prompt, caches, 0)
    tok = logits[:, take].argmax(-1, keepdim=True)
    out.append(tok)
    for i in range(1, n):
        logits = model.forward_cached(tok, caches, offset_rule(P, i))
        tok = logits[:, -1].argmax(-1, keepdim=True)
        out.append(tok)
    return torch.cat(out, 1)


def gc_offset_zero(model, prompt, max_new_tokens):
    return _gen(model, prompt, max_new_tokens, offset_rule=lambda P, i: 0)


def gc_offset_P(model, prompt, max_new_tokens):
    return _gen(model, prompt, max_new_tokens, offset_rule=lambda P, i: P)


def gc_offset_plus_one(model, prompt, max_new_tokens):
    # the first fed-back token sits at P, this puts it at P + 1
    return _gen(model, prompt, max_new_tokens, offset_rule=lambda P, i: P + i, capacity_extra=1)


def gc_first_logit(model, prompt, max_new_tokens):
    return _gen(model, prompt, max_new_tokens, offset_rule=lambda P, i: P + i - 1, take=0)


def gc_offset_i(model, prompt, max_new_tokens):
    return _gen(model, prompt, max_new_tokens, offset_rule=lambda P, i: i)


def gc_right(model, prompt, max_new_tokens):
    return _gen(model, prompt, max_new_tokens, offset_rule=lambda P, i: P + i - 1)


def gc_token_by_token(model, prompt, max_new_tokens):
    # every prompt position fed alone, then the new ones: each exactly once
    B, P = prompt.shape
    caches = [blk.new_cache(B, P + max_new_tokens) for blk in model.blocks]
    seq = prompt.clone()
    logits = None
    for t in range(P):
        logits = model.forward_cached(prompt[:, t : t + 1], caches, t)
    for i in range(max_new_tokens):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
        if i + 1 < max_new_tokens:
            logits = model.forward_cached(nxt, caches, P + i)
    return seq


# ---- ex-10-4 read_on_keys -----------------------------------------------------------


def _copies(tokens):
    letter = tokens < tiny_lm.COPY_SEP - 2  # ids 0..7
    after_sep = (tokens == tiny_lm.COPY_SEP).long().cumsum(1) > 0
    return letter & ~after_sep, letter & after_sep


def _read_on(tokens, *, key_shift=1, rows="second", keys="first", include_sep=True):
    first, second = _copies(tokens)
    B, L = tokens.shape
    if key_shift == 1:
        prev_tok = torch.cat([torch.full((B, 1), -1), tokens[:, :-1]], 1)
        prev_first = torch.cat([torch.zeros(B, 1, dtype=torch.bool), first[:, :-1]], 1)
        prev_any = torch.cat([torch.zeros(B, 1, dtype=torch.bool), (first | second)[:, :-1]], 1)
    elif key_shift == 0:
        prev_tok, prev_first, prev_any = tokens, first, first | second
    else:  # s + 1
        prev_tok = torch.cat([tokens[:, 1:], torch.full((B, 1), -1)], 1)
        prev_first = torch.cat([first[:, 1:], torch.zeros(B, 1, dtype=torch.bool)], 1)
        prev_any = prev_first
    key_ok = prev_first if keys == "first" else prev_any
    if not include_sep:
        key_ok = key_ok & (tokens != tiny_lm.COPY_SEP)
    row_ok = second if rows == "second" else first | second
    same = tokens[:, :, None] == prev_tok[:, None, :]
    return row_ok[:, :, None] & key_ok[:, None, :] & same


def rk_matching_letter(tokens):
    return _read_on(tokens, key_shift=0)  # the same letter, not the one after


def rk_both_copies_keys(tokens):
    return _read_on(tokens, keys="any")


def rk_first_copy_rows(tokens):
    return _read_on(tokens, rows="both")


def rk_no_separator(tokens):
    return _read_on(tokens, include_sep=False)


def rk_shift_wrong_way(tokens):
    return _read_on(tokens, key_shift=-1)


def rk_loop(tokens):
    B, L = tokens.shape
    out = torch.zeros(B, L, L, dtype=torch.bool)
    for b in range(B):
        row = tokens[b].tolist()
        sep = row.index(tiny_lm.COPY_SEP)
        first = range(1, sep)  # <bos> at 0
        second = [t for t in range(sep + 1, L) if row[t] < 8]
        for t in second:
            for s in range(1, L):
                if (s - 1) in first and row[s - 1] == row[t]:
                    out[b, t, s] = True
    return out


WRONG = [
    Wrong("ex-10-1", bf_post_norm, "post-norm instead of pre-norm"),
    Wrong("ex-10-1", bf_not_causal, "not causal"),
    Wrong("ex-10-1", bf_residual_from_normed, "residual from the normed input"),
    Wrong("ex-10-1", bf_norm1_twice, "norm1 used for the FFN"),
    Wrong("ex-10-1", bf_ffn_on_x, "FFN reads x, not the attention's output"),
    Wrong("ex-10-2", ts_no_zero_grad, "no zero_grad: leftover gradients"),
    Wrong("ex-10-2", ts_no_shift, "targets not shifted"),
    Wrong("ex-10-2", ts_loss_after_step, "loss after the step"),
    Wrong("ex-10-2", ts_ignore_pad, "PAD ignored though the text says all positions"),
    Wrong("ex-10-2", ts_shift_wrong_way, "shifted the wrong way"),
    Wrong("ex-10-2", ts_zero_grad_after, "zero_grad after the step"),
    Wrong("ex-10-3", gc_offset_zero, "every new token at position 0"),
    Wrong("ex-10-3", gc_offset_P, "every new token at constant position P"),
    Wrong("ex-10-3", gc_offset_plus_one, "offset one too large (P + 1 for the first new token)"),
    Wrong("ex-10-3", gc_first_logit, "next token from the first logit of the prompt"),
    Wrong("ex-10-3", gc_offset_i, "offset i, prompt length forgotten"),
    Wrong("ex-10-4", rk_matching_letter, "key is the matching letter, not the one after"),
    Wrong("ex-10-4", rk_both_copies_keys, "keys from the second copy too"),
    Wrong("ex-10-4", rk_first_copy_rows, "rows of the first copy too"),
    Wrong("ex-10-4", rk_no_separator, "separator after the last letter left out"),
    Wrong("ex-10-4", rk_shift_wrong_way, "key shift the wrong way (s + 1)"),
]
RIGHT = [
    Right("ex-10-1", bf_row_loop),
    Right("ex-10-1", bf_named_steps),
    Right("ex-10-2", ts_full_then_slice),
    Right("ex-10-2", ts_right),
    Right("ex-10-3", gc_right),
    Right("ex-10-3", gc_token_by_token),
    Right("ex-10-4", rk_loop),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "bf_post_norm": "post-norm",
    "bf_not_causal": "the attention is not causal",
    "bf_residual_from_normed": None,
    "bf_norm1_twice": "norm1 used for both",
    "bf_ffn_on_x": "in parallel",
    "ts_no_zero_grad": "no zero_grad",
    "ts_no_shift": "the targets are not shifted",
    "ts_loss_after_step": None,
    "ts_ignore_pad": None,
    "ts_shift_wrong_way": None,
    "ts_zero_grad_after": None,
    "gc_offset_zero": "placed at position 0",
    "gc_offset_P": "the offset does not advance",
    "gc_offset_plus_one": "the offset is one too far",
    "gc_first_logit": "first position's logits",
    "gc_offset_i": None,
    "rk_matching_letter": "the matching letter itself",
    "rk_both_copies_keys": None,
    "rk_first_copy_rows": "rows outside the second copy",
    "rk_no_separator": None,
    "rk_shift_wrong_way": None,
}
