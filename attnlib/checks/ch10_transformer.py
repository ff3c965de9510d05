"""Chapter 10 exercises: the block's forward, a training loop, cached generation."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from attnlib.chapters.handouts import CacheOnlyLM, SublayersOnlyBlock
from attnlib.chapters.tiny_lm import (
    ALPHABET,
    COPY_BOS,
    COPY_EOS,
    COPY_PAD,
    COPY_SEP,
    SEQ_LEN,
    TinyDecoderLM,
    copy_batch,
)
from attnlib.checks._cases import cases, optimiser_step
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.transformer import TransformerBlock

# Every case builds its model with a private generator: no global random state is read or changed.


def _fill(module: torch.nn.Module, seed: int, std: float = 0.3) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return module


# --------------------------------------------------------------------------- ex-10-1 the block's forward


def block_forward(block: TransformerBlock, x: torch.Tensor) -> torch.Tensor:
    """Pre-norm block with causal self-attention: (B, L, D) -> (B, L, D)."""
    x = x + block.self_attention(block.norm1(x), is_causal=True)
    return x + block.feed_forward(block.norm2(x))


def _block_inputs(batch, length, d_model, heads, seed, dtype=torch.float64):
    def make():
        block = SublayersOnlyBlock(d_model, heads, 2 * d_model).to(dtype)
        _fill(block, seed)
        block.eval()
        g = torch.Generator().manual_seed(seed + 100)
        return block, torch.randn(batch, length, d_model, generator=g, dtype=dtype)

    return make


def _post_norm(block, x):
    x = block.norm1(x + block.self_attention(x, is_causal=True))
    return block.norm2(x + block.feed_forward(x))


def _no_residual(block, x):
    x = block.self_attention(block.norm1(x), is_causal=True)
    return block.feed_forward(block.norm2(x))


def _not_causal(block, x):
    x = x + block.self_attention(block.norm1(x))
    return x + block.feed_forward(block.norm2(x))


def _one_norm(block, x):
    x = x + block.self_attention(block.norm1(x), is_causal=True)
    return x + block.feed_forward(block.norm1(x))


def _parallel(block, x):
    return x + block.self_attention(block.norm1(x), is_causal=True) + block.feed_forward(block.norm2(x))


register(
    Exercise(
        id="ex-10-1",
        function="block_forward",
        reference=block_forward,
        cases=cases(
            None,
            {
                "batch 2, 5 positions, D = 8, 2 heads": _block_inputs(2, 5, 8, 2, 0),
                "batch 1, 1 position, D = 4, 1 head": _block_inputs(1, 1, 4, 1, 1),
                "float32, batch 3, 6 positions, D = 12, 3 heads": _block_inputs(
                    3, 6, 12, 3, 2, torch.float32
                ),
                "hidden: batch 4, 9 positions, D = 16, 4 heads": _block_inputs(4, 9, 16, 4, 3),
            },
        ),
        misconceptions=[
            Misconception(
                "post-norm: the LayerNorm comes after the residual sum",
                _post_norm,
                "this block is pre-norm: normalise the input of each sublayer, and add the sublayer's "
                "output to the un-normalised stream.",
            ),
            Misconception(
                "no residual connection",
                _no_residual,
                "each sublayer's output is *added* to its input (x = x + sublayer(...)); without the "
                "sum the input is lost.",
            ),
            Misconception(
                "the attention is not causal",
                _not_causal,
                "a decoder block must not look at later positions: its self-attention must be causal.",
            ),
            Misconception(
                "norm1 used for both sublayers",
                _one_norm,
                "each sublayer has its own LayerNorm: norm1 before the attention, norm2 before the "
                "feed-forward net.",
            ),
            Misconception(
                "attention and feed-forward net in parallel",
                _parallel,
                "the sublayers run one after the other: the feed-forward net reads the stream *after* "
                "the attention's output was added.",
            ),
        ],
        hints=(
            "a block is two residual steps, one per sublayer, applied one after the other.",
            "in a pre-norm block each step normalises its input, applies the sublayer, and adds the result "
            "to the un-normalised stream.",
            "first the attention step (causal self-attention of the stream normalised by norm1, added to "
            "the stream), then the feed-forward step (norm2, feed_forward, added), which reads the stream "
            "as the attention step left it.",
        ),
        rtol=1e-6,
        atol=1e-7,
    )
)

# --------------------------------------------------------------------------- ex-10-2 a training loop


def train_steps(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: torch.Tensor
) -> torch.Tensor:
    """One optimiser step per batch of tokens (N, B, L); returns the N losses before each step.

    The loss is the mean next-token cross-entropy: position t predicts token t + 1.
    """
    losses = []
    for tokens in batches:
        logits = model(tokens[:, :-1])  # (B, L-1, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def _lm(seed, std=0.3, **kwargs):
    model = TinyDecoderLM(d_model=8, num_heads=2, d_ff=16, num_layers=1, **kwargs)
    return _fill(model, seed, std)


def _train_inputs(n_batches, batch, length, seed, stale_grads=True):
    def make():
        model = _lm(seed)
        if stale_grads:  # gradients left over from an earlier call, as in a notebook
            for p in model.parameters():
                p.grad = torch.full_like(p, 0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        g = torch.Generator().manual_seed(seed + 7)
        return model, optimizer, torch.randint(0, 12, (n_batches, batch, length), generator=g)

    return make


def _train_with_mistake(model, optimizer, batches, *, shift=True, zero_grad=True, step=True):
    """train_steps with one known mistake made: the wrong answers of ex-10-2.

    shift=False: each position predicts its own token instead of the next one;
    zero_grad=False: gradients pile up across batches; step=False: the optimiser never steps.
    """
    losses = []
    for tokens in batches:
        inputs, targets = (tokens[:, :-1], tokens[:, 1:]) if shift else (tokens, tokens)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        losses.append(optimiser_step(optimizer, loss, zero_grad=zero_grad, step=step))
    return torch.stack(losses)


_no_zero_grad = functools.partial(_train_with_mistake, zero_grad=False)
_unshifted = functools.partial(_train_with_mistake, shift=False)
_no_step = functools.partial(_train_with_mistake, step=False)


register(
    Exercise(
        id="ex-10-2",
        function="train_steps",
        reference=train_steps,
        cases=cases(
            None,
            {
                "3 batches of 2 sequences, 6 tokens": _train_inputs(3, 2, 6, 0),
                "1 batch of 4 sequences, 5 tokens": _train_inputs(1, 4, 5, 1),
                "hidden: 5 batches of 3 sequences, 8 tokens": _train_inputs(5, 3, 8, 2),
            },
        ),
        misconceptions=[
            Misconception(
                "gradients are never reset (no zero_grad)",
                _no_zero_grad,
                "backward() adds to .grad: gradients left from before (the check's models come with some) "
                "or from the previous batch leak into this batch's step.",
            ),
            Misconception(
                "the targets are not shifted (each position predicts itself)",
                _unshifted,
                "a language model predicts the *next* token: the targets are the inputs shifted by one.",
            ),
            Misconception(
                "the gradients are never applied (no step(), or zero_grad() between backward() and step())",
                _no_step,
                "computing gradients changes nothing by itself: the optimiser has to apply them, once per "
                "batch, after they were computed for that batch.",
            ),
        ],
        hints=(
            "one optimiser step per batch, the loss recorded before the step.",
            "position t predicts token t + 1: the inputs and the targets are the same tokens, shifted.",
            "the model reads every token but the last and is scored on every token but the first: shift"
            " by one between input and target, flatten batch and time for the cross-entropy, then "
            "zero_grad, backward and step; keep each loss detached.",
        ),
        rtol=1e-4,
        atol=1e-5,
    )
)

# --------------------------------------------------------------------------- ex-10-3 cached generation


@torch.no_grad()
def generate_cached(model: TinyDecoderLM, prompt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy decoding with one KV cache per block; returns (B, P + max_new_tokens)."""
    B, P = prompt.shape
    caches = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
    logits = model.forward_cached(prompt, caches, offset=0)  # (B, P, V)
    tokens = prompt
    for _ in range(max_new_tokens):
        next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
        if tokens.shape[1] < P + max_new_tokens:
            logits = model.forward_cached(next_token, caches, offset=tokens.shape[1] - 1)
    return tokens


def _gen_inputs(batch, prompt_len, new, seed, *, layers):
    def make():
        model = CacheOnlyLM(
            d_model=16, num_heads=2, d_ff=32, num_layers=layers, position_budget=prompt_len + new
        )
        _fill(model, seed, std=0.5).eval()
        g = torch.Generator().manual_seed(seed + 3)
        return model, torch.randint(0, 12, (batch, prompt_len), generator=g), new

    return make


@torch.no_grad()
def _generate_with_mistake(
    model, prompt, max_new_tokens, *, read_position=-1, offset_zero=False, fresh_caches=False, offset=None
):
    """generate_cached with one known mistake switched on: the wrong answers of ex-10-3.

    read_position: which position's logits pick the next token (the right one is -1, the last);
    offset_zero: every cached step is told it sits at position 0;
    fresh_caches: every step starts from empty caches instead of the ones the prompt filled;
    offset: a wrong offset rule, (P, n) -> offset of the n-th new token fed back (the right one
    is P + n - 1): a constant P, one too far, or the prompt length forgotten.
    """
    B, P = prompt.shape
    caches = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
    logits = model.forward_cached(prompt, caches, offset=0)  # (B, P, V)
    tokens = prompt
    for _ in range(max_new_tokens):
        next_token = logits[:, read_position].argmax(-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
        if tokens.shape[1] < P + max_new_tokens:
            if fresh_caches:
                caches = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
            at = 0 if offset_zero else tokens.shape[1] - 1
            if offset is not None:
                at = offset(P, tokens.shape[1] - P)
            logits = model.forward_cached(next_token, caches, offset=at)
    return tokens


@torch.no_grad()
def _fresh_caches_prompt_never_run(model, prompt, max_new_tokens):
    """New, empty caches at every step, each fed the last token only: the prompt never runs whole."""
    B, P = prompt.shape
    tokens = prompt
    for _ in range(max_new_tokens):
        caches = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
        logits = model.forward_cached(tokens[:, -1:], caches, offset=tokens.shape[1] - 1)
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


_offset_zero = functools.partial(_generate_with_mistake, offset_zero=True)
_fresh_cache_each_step = functools.partial(_generate_with_mistake, fresh_caches=True)
_first_position = functools.partial(_generate_with_mistake, read_position=0)
_offset_fixed_at_p = functools.partial(_generate_with_mistake, offset=lambda P, n: P)
_offset_one_too_far = functools.partial(_generate_with_mistake, offset=lambda P, n: P + n)
_offset_without_prompt = functools.partial(_generate_with_mistake, offset=lambda P, n: n - 1)


register(
    Exercise(
        id="ex-10-3",
        function="generate_cached",
        reference=generate_cached,
        cases=cases(
            None,
            {
                "1 sequence, prompt of 4, 5 new tokens": _gen_inputs(1, 4, 5, 0, layers=1),
                "batch 3, prompt of 2, 6 new tokens, 2 layers": _gen_inputs(3, 2, 6, 1, layers=2),
                "batch 2, prompt of 1, 1 new token": _gen_inputs(2, 1, 1, 2, layers=1),
                "hidden: batch 4, prompt of 5, 9 new tokens, 2 layers": _gen_inputs(4, 5, 9, 4, layers=2),
            },
        ),
        misconceptions=[
            Misconception(
                "every new token is placed at position P (the offset does not advance)",
                _offset_fixed_at_p,
                "each token fed back sits one position further than the one before: the offset grows "
                "with every step, it is not the prompt's length each time.",
            ),
            Misconception(
                "every new token is placed at position 0",
                _offset_zero,
                "the positions keep counting: the token appended as the n-th of the sequence sits at "
                "offset n - 1.",
            ),
            Misconception(
                "the offset is one too far: the first token fed back is placed at P + 1, not P",
                _offset_one_too_far,
                "positions count from 0: the prompt fills 0 .. P - 1, so the first new token sits at "
                "P, the next at P + 1, ...",
            ),
            Misconception(
                "the offset counts only the new tokens (the prompt's length is left out)",
                _offset_without_prompt,
                "the offset is the token's absolute position in the whole sequence, prompt included.",
            ),
            Misconception(
                "a new, empty cache at every step",
                _fresh_cache_each_step,
                "the caches hold the keys and values of everything decoded so far: create them once, "
                "before the loop, and pass the same ones at every step.",
            ),
            Misconception(
                "a new, empty cache at every step, and the prompt never run (only its last token)",
                _fresh_caches_prompt_never_run,
                "the caches must hold the keys and values of the whole prompt before the first new token is "
                "predicted: the prompt goes through the model once, into caches that the later steps reuse.",
            ),
            Misconception(
                "the next token is read from the first position's logits",
                _first_position,
                "the prediction for the next token is in the logits of the *last* position.",
            ),
        ],
        hints=(
            "the caches remember the keys and values of everything decoded so far: every position goes "
            "through the model once.",
            "create one cache per block before the loop, run the whole prompt through forward_cached once, "
            "then feed each new token alone.",
            "a token appended as the n-th of the sequence goes in at offset n - 1; the next token is the "
            "argmax of the last position's logits.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-10-4 read-on keys


def read_on_keys(tokens: torch.Tensor) -> torch.Tensor:
    """bool (B, L, L): from each letter of the second copy, the first-copy tokens that follow the same letter.

    ``[b, t, s]`` is True when position ``t`` holds a letter of the second copy of
    sentence ``b`` (positions ``n + 2 .. 2n + 1``) and ``s - 1`` is a letter of
    the first copy (``1 .. n``) equal to the letter at ``t``.
    """
    B, L = tokens.shape
    n = (tokens == COPY_SEP).int().argmax(1) - 1  # (B,) word lengths
    pos = torch.arange(L)
    rows = (pos >= n[:, None] + 2) & (pos <= 2 * n[:, None] + 1)  # (B, L): second-copy letters
    keys = (pos >= 2) & (pos <= n[:, None] + 1)  # (B, L): s - 1 is a first-copy letter
    before = torch.cat([torch.full((B, 1), -1), tokens[:, :-1]], dim=1)  # before[b, s] = tokens[b, s-1]
    same = tokens[:, :, None] == before[:, None, :]  # (B, L, L)
    return same & rows[:, :, None] & keys[:, None, :]


def _sentences(*words: str) -> torch.Tensor:
    """Padded copy-language sentences (len(words), SEQ_LEN) for the given words."""
    out = torch.full((len(words), SEQ_LEN), COPY_PAD, dtype=torch.long)
    for b, word in enumerate(words):
        letters = [ALPHABET.index(c) for c in word]
        row = [COPY_BOS, *letters, COPY_SEP, *letters, COPY_EOS]
        out[b, : len(row)] = torch.tensor(row)
    return out


def _sentence_inputs(*words: str):
    return lambda: (_sentences(*words),)


def _random_sentences(batch: int, seed: int):
    return lambda: (copy_batch(batch, torch.Generator().manual_seed(seed)),)


# The known mistakes of ex-10-4, each a wrong answer that _read_on_with_mistake builds.
_READ_ON_MISTAKES = (
    "match itself",  # the matching letter itself instead of the token after it
    "before match",  # the token before the matching letter
    "whole prefix",  # keys anywhere before the row: the second copy and the separator too
    "all rows",  # rows in the first copy as well
    "first length",  # every sentence given the first one's word length
    "both copies",  # keys after a letter of either copy, earlier or later than the row
    "no separator",  # the separator after the word's last letter is not a key
)


def _read_on_with_mistake(tokens, mistake):
    """read_on_keys with one known mistake, one of ``_READ_ON_MISTAKES``: the wrong answers of ex-10-4."""
    if mistake not in _READ_ON_MISTAKES:
        raise ValueError(
            f"_read_on_with_mistake: mistake must be one of {_READ_ON_MISTAKES}, got {mistake!r}"
        )
    B, L = tokens.shape
    n = (tokens == COPY_SEP).int().argmax(1) - 1  # (B,) word lengths
    if mistake == "first length":
        n = n[:1].expand(B)
    n = n[:, None]  # (B, 1)
    pos = torch.arange(L)
    letters = (pos >= 1) & (pos <= 2 * n + 1) & (pos != n + 1)  # (B, L): both copies' letters
    rows = letters if mistake == "all rows" else letters & (pos >= n + 2)  # (B, L)
    # keys (B or 1, 1 or L, L), and before[b, s]: the token compared with the row's letter
    if mistake == "whole prefix":
        keys = ((pos[None, :] >= 2) & (pos[None, :] <= pos[:, None]))[None]  # causal
    elif mistake == "both copies":
        keys = torch.cat([torch.zeros(B, 1, dtype=torch.bool), letters[:, :-1]], dim=1)[:, None, :]
    elif mistake == "match itself":
        keys = ((pos >= 1) & (pos <= n))[:, None, :]
    elif mistake == "before match":
        keys = ((pos >= 0) & (pos <= n - 1))[:, None, :]
    else:
        keys = ((pos >= 2) & (pos <= n + 1))[:, None, :]
    if mistake == "no separator":
        keys = keys & (tokens != COPY_SEP)[:, None, :]
    if mistake == "match itself":
        before = tokens
    elif mistake == "before match":
        before = torch.cat([tokens[:, 1:], torch.full((B, 1), -1)], dim=1)  # the token after s
    else:
        before = torch.cat([torch.full((B, 1), -1), tokens[:, :-1]], dim=1)  # the token before s
    same = tokens[:, :, None] == before[:, None, :]  # (B, L, L)
    return same & rows[:, :, None] & keys


_match_itself = functools.partial(_read_on_with_mistake, mistake="match itself")
_before_match = functools.partial(_read_on_with_mistake, mistake="before match")
_whole_prefix = functools.partial(_read_on_with_mistake, mistake="whole prefix")
_all_rows = functools.partial(_read_on_with_mistake, mistake="all rows")
_first_length = functools.partial(_read_on_with_mistake, mistake="first length")
_both_copies_keys = functools.partial(_read_on_with_mistake, mistake="both copies")
_no_separator = functools.partial(_read_on_with_mistake, mistake="no separator")


register(
    Exercise(
        id="ex-10-4",
        function="read_on_keys",
        reference=read_on_keys,
        cases=cases(
            None,
            {
                "one sentence, ahhe": _sentence_inputs("ahhe"),
                "batch 2, abac and hgfedcba": _sentence_inputs("abac", "hgfedcba"),
                "hidden: batch 3, aaa, abcab and cdecdecd": _sentence_inputs("aaa", "abcab", "cdecdecd"),
                "hidden: batch 3, bbcd, abcdefgh and gg... lengths 4, 8, 3": _sentence_inputs(
                    "bbcd", "abcdefgh", "ggh"
                ),
                "hidden: 16 random sentences": _random_sentences(16, 5),
            },
        ),
        misconceptions=[
            Misconception(
                "the matching letter itself, not the token after it",
                _match_itself,
                "an induction head attends to the token that *follows* the earlier occurrence of the "
                "letter just written: that is the one it copies.",
            ),
            Misconception(
                "keys outside the first copy",
                _whole_prefix,
                "only the first copy's tokens count as keys: the positions 2 .. n + 1, whose previous "
                "token is a letter of the word.",
            ),
            Misconception(
                "rows outside the second copy",
                _all_rows,
                "only the rows of the second copy's letters (positions n + 2 .. 2n + 1) have keys; every "
                "other row is all False.",
            ),
            Misconception(
                "keys in the second copy too",
                _both_copies_keys,
                "only the first copy's tokens count as keys: the positions 2 .. n + 1, whose previous "
                "token is a letter of the word.",
            ),
            Misconception(
                "the separator after the last letter is left out",
                _no_separator,
                "the token after the word's last letter is the separator |, and it is a key too: it is "
                "what an induction head reads on to when the letter just written ends the word.",
            ),
            Misconception(
                "the token before the matching letter, not the one after it",
                _before_match,
                "the key sits one place *after* the earlier occurrence of the letter just written: compare "
                "the row's letter with the token at s - 1.",
            ),
            Misconception(
                "one word length for the whole batch",
                _first_length,
                "each sentence has its own word length: find each one's separator.",
            ),
        ],
        hints=(
            "compare each letter of the second copy with the token *before* each position of the first copy.",
            "a sentence's word length n is the position of its separator minus 1; the rows are n + 2 .. "
            "2n + 1 and the keys 2 .. n + 1.",
            "build the tokens shifted right by one, compare every row token with every shifted token "
            "(broadcasting to (B, L, L)), and keep only the allowed rows and keys.",
        ),
    )
)
