"""Answer bank for chapter 10 (the Transformer block): plausible wrong answers and correct alternatives."""

import torch
import torch.nn.functional as F
from bank import Right, Wrong
from torch import nn

# --------------------------------------------------------------------------- ex-10-1


def block_post_norm(block, x):
    h = block.norm1(x + block.self_attention(x, is_causal=True))
    return block.norm2(h + block.feed_forward(h))


def block_forgets_residual_of_ffn(block, x):
    h = x + block.self_attention(block.norm1(x), is_causal=True)
    return block.feed_forward(block.norm2(h))


def block_bidirectional(block, x):
    h = x + block.self_attention(block.norm1(x), is_causal=False)
    return h + block.feed_forward(block.norm2(h))


def block_by_calling_it(block, x):
    return block(x, is_causal=True)


def block_explicit_mask(block, x):
    L = x.shape[1]
    allowed = torch.ones(L, L, dtype=torch.bool).tril()
    h = x + block.self_attention(block.norm1(x), attn_mask=allowed)
    return h + block.feed_forward(block.norm2(h))


def block_by_hand(block, x):
    attn = block.attn
    normed = block.norm1(x)
    out, _ = attn(normed, normed, normed, is_causal=True)
    h = x + out
    hidden = torch.relu(block.linear1(block.norm2(h)))
    return h + block.linear2(hidden)


# --------------------------------------------------------------------------- ex-10-2


def train_without_zero_grad(model, optimizer, batches):
    out = []
    for tokens in batches:
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        out.append(loss.item())
    return torch.tensor(out)


def train_same_position_targets(model, optimizer, batches):
    out = []
    for tokens in batches:
        optimizer.zero_grad()
        logits = model(tokens)
        loss = F.cross_entropy(logits.transpose(1, 2), tokens)
        loss.backward()
        optimizer.step()
        out.append(loss.item())
    return torch.tensor(out)


def train_forgets_step(model, optimizer, batches):
    out = []
    for tokens in batches:
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])
        loss.backward()
        out.append(loss.item())
    return torch.tensor(out)


def train_zero_grad_too_late(model, optimizer, batches):
    out = []
    for tokens in batches:
        loss = F.cross_entropy(model(tokens[:, :-1]).transpose(1, 2), tokens[:, 1:])
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        out.append(loss.item())
    return torch.tensor(out)


def train_transpose_and_set_to_none(model, optimizer, batches):
    losses = torch.zeros(len(batches))
    for n, tokens in enumerate(batches):
        optimizer.zero_grad(set_to_none=True)
        logits = model(tokens[:, :-1])  # (B, L-1, V)
        loss = nn.CrossEntropyLoss()(logits.transpose(1, 2), tokens[:, 1:])
        loss.backward()
        optimizer.step()
        losses[n] = loss.item()
    return losses


def train_log_softmax_by_hand(model, optimizer, batches):
    losses = []
    for tokens in batches:
        for p in model.parameters():
            p.grad = None
        logp = torch.log_softmax(model(tokens[:, :-1]), dim=-1)
        loss = -logp.gather(-1, tokens[:, 1:, None]).mean()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return torch.tensor(losses)


# --------------------------------------------------------------------------- ex-10-3


@torch.no_grad()
def generate_positions_restart(model, prompt, max_new_tokens):
    B, P = prompt.shape
    caches = [b.new_cache(B, P + max_new_tokens) for b in model.blocks]
    logits = model.forward_cached(prompt, caches, offset=0)
    out = prompt
    for _ in range(max_new_tokens):
        nxt = logits[:, -1:].argmax(-1)
        out = torch.cat([out, nxt], 1)
        if out.shape[1] < P + max_new_tokens:
            logits = model.forward_cached(nxt, caches, offset=0)
    return out


@torch.no_grad()
def generate_new_caches(model, prompt, max_new_tokens):
    B, P = prompt.shape
    out = prompt
    for _ in range(max_new_tokens):
        caches = [b.new_cache(B, P + max_new_tokens) for b in model.blocks]
        logits = model.forward_cached(out[:, -1:], caches, offset=out.shape[1] - 1)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return out


@torch.no_grad()
def generate_uncached(model, prompt, max_new_tokens):
    out = prompt
    for _ in range(max_new_tokens):
        out = torch.cat([out, model(out)[:, -1].argmax(-1, keepdim=True)], 1)
    return out


@torch.no_grad()
def generate_one_token_at_a_time_prompt(model, prompt, max_new_tokens):
    B, P = prompt.shape
    caches = [b.new_cache(B, P + max_new_tokens) for b in model.blocks]
    for t in range(P):
        logits = model.forward_cached(prompt[:, t : t + 1], caches, offset=t)
    out = prompt
    for n in range(max_new_tokens):
        nxt = logits[:, -1].argmax(-1)[:, None]
        out = torch.cat([out, nxt], dim=1)
        if n + 1 < max_new_tokens:
            logits = model.forward_cached(nxt, caches, offset=P + n)
    return out


# --------------------------------------------------------------------------- ex-10-4

SEP = 10  # the separator's id, attnlib.chapters.tiny_lm.COPY_SEP


def _lengths(tokens):
    return [row.index(SEP) - 1 for row in tokens.tolist()]


def read_on_loops(tokens):
    """Right: plain loops over sentences, rows and keys."""
    B, L = tokens.shape
    out = torch.zeros(B, L, L, dtype=torch.bool)
    for b, n in enumerate(_lengths(tokens)):
        for t in range(n + 2, 2 * n + 2):
            for s in range(2, n + 2):
                out[b, t, s] = bool(tokens[b, s - 1] == tokens[b, t])
    return out


def read_on_one_hot(tokens):
    """Right: one-hot letters and a batched matrix product."""
    B, L = tokens.shape
    n = (tokens == SEP).float().argmax(dim=1) - 1
    pos = torch.arange(L)[None].expand(B, L)
    first = (pos >= 1) & (pos <= n[:, None])  # first-copy letters
    second = (pos >= n[:, None] + 2) & (pos <= 2 * n[:, None] + 1)
    onehot = F.one_hot(tokens, 16).float()
    hits = onehot @ onehot.transpose(1, 2) > 0.5  # [b, t, j]: same token
    hits = hits & second[:, :, None] & first[:, None, :]
    return F.pad(hits[:, :, :-1], (1, 0))  # key j -> s = j + 1


def read_on_same_letter(tokens):
    """Wrong: marks where the letter itself stood, not the token after it."""
    B, L = tokens.shape
    out = torch.zeros(B, L, L, dtype=torch.bool)
    for b, n in enumerate(_lengths(tokens)):
        for t in range(n + 2, 2 * n + 2):
            for s in range(1, n + 1):
                out[b, t, s] = bool(tokens[b, s] == tokens[b, t])
    return out


def read_on_every_earlier_position(tokens):
    """Wrong: any earlier position whose previous token matches (the causal prefix)."""
    B, L = tokens.shape
    out = torch.zeros(B, L, L, dtype=torch.bool)
    for b, n in enumerate(_lengths(tokens)):
        for t in range(n + 2, 2 * n + 2):
            for s in range(1, t + 1):
                out[b, t, s] = bool(tokens[b, s - 1] == tokens[b, t])
    return out


def read_on_every_letter_row(tokens):
    """Wrong: every letter of the sentence gets its read-on keys, the first copy's too."""
    B, L = tokens.shape
    prev = torch.roll(tokens, 1, dims=1)
    out = tokens[:, :, None] == prev[:, None, :]
    for b, n in enumerate(_lengths(tokens)):
        out[b, :, :2] = False
        out[b, :, n + 2 :] = False
        out[b, n + 1 :, :] &= torch.arange(L)[n + 1 :, None] <= 2 * n + 1
        out[b, 0] = False
        out[b, n + 1] = False
    return out


def read_on_first_sentence_length(tokens):
    """Wrong: the word length read off the first sentence only."""
    B, L = tokens.shape
    n = int((tokens[0] == SEP).nonzero()[0]) - 1
    prev = torch.cat([torch.full((B, 1), -1), tokens[:, :-1]], dim=1)
    out = tokens[:, :, None] == prev[:, None, :]
    rows = torch.zeros(L, dtype=torch.bool)
    rows[n + 2 : 2 * n + 2] = True
    keys = torch.zeros(L, dtype=torch.bool)
    keys[2 : n + 2] = True
    return out & rows[None, :, None] & keys[None, None, :]


def generate_rerun_everything(model, prompt, max_new_tokens):
    """Fresh caches and the whole sequence at every step: right tokens, the cache's work redone."""
    tokens = prompt
    with torch.no_grad():
        for _ in range(max_new_tokens):
            caches = [block.new_cache(tokens.shape[0], tokens.shape[1]) for block in model.blocks]
            logits = model.forward_cached(tokens, caches, 0)
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


def generate_prompt_twice(model, prompt, max_new_tokens):
    """Runs the prompt once to fill the caches and again to read its logits."""
    B, P = prompt.shape
    caches = [block.new_cache(B, 2 * P + max_new_tokens) for block in model.blocks]
    with torch.no_grad():
        model.forward_cached(prompt, caches, 0)
        fresh = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
        logits = model.forward_cached(prompt, fresh, 0)
        tokens = prompt
        for step in range(max_new_tokens):
            next_token = logits[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)
            if step + 1 < max_new_tokens:
                logits = model.forward_cached(next_token, fresh, P + step)
    return tokens


def generate_last_token_too(model, prompt, max_new_tokens):
    """Feeds the last new token as well (its logits unused): each position still runs once."""
    B, P = prompt.shape
    caches = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
    with torch.no_grad():
        logits = model.forward_cached(prompt, caches, 0)
        out = [prompt]
        for step in range(max_new_tokens):
            out.append(logits[:, -1:].argmax(-1))
            logits = model.forward_cached(out[-1], caches, P + step)
    return torch.cat(out, dim=1)


WRONG = [
    Wrong("ex-10-1", block_post_norm, "post-norm"),
    Wrong("ex-10-1", block_forgets_residual_of_ffn, "residual"),
    Wrong("ex-10-1", block_bidirectional, "not causal"),
    Wrong("ex-10-1", block_by_calling_it, "write the block yourself"),
    Wrong("ex-10-2", train_without_zero_grad, "zero_grad"),
    Wrong("ex-10-2", train_same_position_targets, "not shifted"),
    Wrong("ex-10-2", train_forgets_step, "never applied"),
    Wrong("ex-10-2", train_zero_grad_too_late, "never applied"),
    Wrong("ex-10-3", generate_positions_restart, "position 0"),
    Wrong("ex-10-3", generate_new_caches, "empty cache"),
    Wrong("ex-10-3", generate_uncached, "use the KV cache"),
    Wrong("ex-10-3", generate_rerun_everything, "ran more than once"),
    Wrong("ex-10-3", generate_prompt_twice, "ran more than once"),
    Wrong("ex-10-4", read_on_same_letter, "matching letter itself"),
    Wrong("ex-10-4", read_on_every_earlier_position, "keys outside the first copy"),
    Wrong("ex-10-4", read_on_every_letter_row, "rows outside the second copy"),
    Wrong("ex-10-4", read_on_first_sentence_length, "one word length"),
]

RIGHT = [
    Right("ex-10-1", block_explicit_mask),
    Right("ex-10-1", block_by_hand),
    Right("ex-10-2", train_transpose_and_set_to_none),
    Right("ex-10-2", train_log_softmax_by_hand),
    Right("ex-10-3", generate_one_token_at_a_time_prompt),
    Right("ex-10-3", generate_last_token_too),
    Right("ex-10-4", read_on_loops),
    Right("ex-10-4", read_on_one_hot),
]
