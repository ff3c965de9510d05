"""Chapter 10's decoder-only language model and the small formal language it learns.

The language ("copy"): ``<bos> w <sep> w <eos>``, where ``w`` is a random word
of 3 to 8 letters from an 8-letter alphabet, padded to a fixed length. The
first copy of ``w`` cannot be predicted (its letters are random); the second
can, but only by looking back at the first: the model has to find, for the
letter it just wrote, where that letter stood in the first copy and read the
one after it. Nothing is downloaded: every batch is generated.

:class:`TinyDecoderLM` is token embedding + learned positions + a stack of
:class:`attnlib.transformer.TransformerBlock` (causal) + a LayerNorm + the LM
head. :func:`generate` decodes greedily or by sampling, with or without the
KV cache of chapter 08 (both give the same tokens).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.positions import LearnedPositions
from attnlib.transformer import TransformerBlock

__all__ = [
    "ALPHABET",
    "COPY_BOS",
    "COPY_EOS",
    "COPY_PAD",
    "COPY_SEP",
    "COPY_VOCAB_SIZE",
    "TinyDecoderLM",
    "copy_accuracy",
    "copy_batch",
    "decode_copy",
    "generate",
    "lm_loss",
]

ALPHABET = "abcdefgh"
# The special tokens of the copy language come after its letters (0..7). They are named
# COPY_* because chapters 01-07's vocabulary (attnlib.chapters.vocab) has PAD, BOS and EOS
# at other ids (0, 1, 2): one name, one id, across the course.
COPY_PAD, COPY_BOS, COPY_SEP, COPY_EOS = 8, 9, 10, 11
COPY_VOCAB_SIZE = 12
MIN_WORD, MAX_WORD = 3, 8
SEQ_LEN = 2 * MAX_WORD + 3  # <bos> w <sep> w <eos> at the longest


def copy_batch(
    batch_size: int, generator: torch.Generator, word_len: tuple[int, int] = (MIN_WORD, MAX_WORD)
) -> torch.Tensor:
    """Sentences of the copy language, long (batch_size, SEQ_LEN), COPY_PAD after ``<eos>``."""
    tokens = torch.full((batch_size, SEQ_LEN), COPY_PAD, dtype=torch.long)
    lengths = torch.randint(word_len[0], word_len[1] + 1, (batch_size,), generator=generator)
    letters = torch.randint(0, len(ALPHABET), (batch_size, MAX_WORD), generator=generator)
    for b, n in enumerate(lengths.tolist()):
        word = letters[b, :n]
        tokens[b, : 2 * n + 3] = torch.cat(
            [torch.tensor([COPY_BOS]), word, torch.tensor([COPY_SEP]), word, torch.tensor([COPY_EOS])]
        )
    return tokens


def decode_copy(tokens) -> str:
    """A copy-language sentence as text: letters, ``|`` for the separator, ``.`` for the end.

    ``<bos>`` and the padding are dropped.
    """
    out = []
    for t in tokens.tolist() if isinstance(tokens, torch.Tensor) else tokens:
        if t < len(ALPHABET):
            out.append(ALPHABET[t])
        elif t == COPY_SEP:
            out.append("|")
        elif t == COPY_EOS:
            out.append(".")
    return "".join(out)


class TinyDecoderLM(nn.Module):
    """Token embedding + learned positions + ``num_layers`` causal blocks + LayerNorm + LM head.

    Extra keyword arguments go to every :class:`TransformerBlock` (``norm_first``,
    ``residual``, ``layer_norm``, ``feed_forward``, ...).
    """

    def __init__(
        self,
        d_model: int = 64,
        num_heads: int = 4,
        d_ff: int = 128,
        num_layers: int = 2,
        max_len: int = SEQ_LEN,
        vocab_size: int = COPY_VOCAB_SIZE,
        **block_kwargs,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, num_heads, d_ff, **block_kwargs) for _ in range(num_layers)
        )
        final_norm = block_kwargs.get("norm_first", True) and block_kwargs.get("layer_norm", True)
        self.norm = nn.LayerNorm(d_model) if final_norm else nn.Identity()  # pre-norm needs a last one
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens (B, L) -> next-token logits (B, L, vocab_size)."""
        x = self.positions(self.embed(tokens))  # (B, L) -> (B, L, D)
        for block in self.blocks:
            x = block(x, is_causal=True)  # (B, L, D)
        return self.head(self.norm(x))  # (B, L, D) -> (B, L, V)

    @torch.no_grad()
    def forward_cached(self, tokens: torch.Tensor, caches: list, offset: int) -> torch.Tensor:
        """Logits (B, t, V) of ``t`` new tokens at absolute positions ``offset ..``, using the caches."""
        x = self.positions(self.embed(tokens), offset=offset)  # (B, t) -> (B, t, D)
        for block, cache in zip(self.blocks, caches, strict=True):
            x = block.forward_cached(x, cache)  # (B, t, D)
        return self.head(self.norm(x))  # (B, t, V)


def lm_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the second copy and ``<eos>`` (the predictable part)."""
    logits = model(tokens[:, :-1])  # (B, L-1, V): position t predicts token t+1
    targets = tokens[:, 1:].clone()  # (B, L-1)
    targets[~_predictable(tokens)[:, 1:]] = -100  # ignored by cross_entropy
    return F.cross_entropy(
        logits.flatten(0, 1),
        targets.flatten(),
        ignore_index=-100,
    )


def _predictable(tokens: torch.Tensor) -> torch.Tensor:
    """bool (B, L): True for the tokens after ``<sep>`` up to and including ``<eos>``."""
    after_sep = (tokens == COPY_SEP).long().cumsum(dim=1) > 0  # (B, L)
    return after_sep & (tokens != COPY_SEP) & (tokens != COPY_PAD)


@torch.no_grad()
def copy_accuracy(model: nn.Module, tokens: torch.Tensor) -> float:
    """Share of predictable tokens (second copy and ``<eos>``) predicted right, teacher forced."""
    pred = model(tokens[:, :-1]).argmax(-1)  # (B, L-1)
    keep = _predictable(tokens)[:, 1:]
    return (pred[keep] == tokens[:, 1:][keep]).float().mean().item()


# fmt: off
@torch.no_grad()
def generate(
    model: TinyDecoderLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    use_cache: bool = True,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue ``prompt`` (B, P) by ``max_new_tokens`` tokens; returns (B, P + max_new_tokens).

    ``temperature == 0`` decodes greedily; otherwise samples from
    ``softmax(logits / temperature)`` with ``generator``. With ``use_cache`` the
    prompt is run once and each new token costs one position (chapter 08's
    KVCache); without it the whole sequence is run again at every step.
    """
    tokens = prompt
    B, P = prompt.shape
    if use_cache:
        caches = [  # one KV cache per block
            block.new_cache(B, P + max_new_tokens) for block in model.blocks
        ]
        logits = model.forward_cached(prompt, caches, offset=0)[:, -1]  # (B, V)
    else:
        logits = model(prompt)[:, -1]  # (B, V)
    for step in range(max_new_tokens):
        if temperature == 0.0:
            next_token = logits.argmax(-1, keepdim=True)  # (B, 1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
            # (B, 1): one token drawn per row
            next_token = torch.multinomial(probs, 1, generator=generator)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, P + step + 1)
        if step == max_new_tokens - 1:
            break
        if use_cache:
            logits = model.forward_cached(
                next_token, caches, offset=tokens.shape[1] - 1  # its position
            )[:, -1]
        else:
            logits = model(tokens)[:, -1]
    return tokens
# fmt: on


# -- the chapter's experiments (seeded; swept by attnlib.chapters.spread) -------------------


def build_model(seed: int, **kwargs) -> TinyDecoderLM:
    """A :class:`TinyDecoderLM` whose initial weights come from ``seed`` alone.

    The weights are drawn inside :func:`torch.random.fork_rng`, so the global
    generator's state is the same after the call as before it.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyDecoderLM(**kwargs)


def train(
    model: nn.Module,
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> list[float]:
    """AdamW on ``steps`` fresh batches of the copy language (drawn from ``seed``); the losses."""
    data = torch.Generator().manual_seed(seed)  # the batches
    # foreach: one update for all the tensors, the same numbers with less Python
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
    model.train()
    losses = []
    for _ in range(steps):
        loss = lm_loss(model, copy_batch(batch_size, data))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def test_set(size: int = 256) -> torch.Tensor:
    """The held-out sentences every experiment is measured on (seed 99, never trained on)."""
    return copy_batch(size, torch.Generator().manual_seed(99))


def word_lengths(tokens: torch.Tensor) -> torch.Tensor:
    """Long (B,): the length of each sentence's word (the position of ``<sep>`` minus one)."""
    return (tokens == COPY_SEP).int().argmax(1) - 1


@torch.no_grad()
def attention_maps(model: TinyDecoderLM, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's causal attention weights (layers, B, h, L, L) for pre-norm ``tokens`` (B, L)."""
    maps = []
    x = model.positions(model.embed(tokens))  # (B, L, D)
    for block in model.blocks:
        normed = block.norm1(x)
        _, w = block.attn(
            normed, normed, normed, is_causal=True, need_weights=True, average_attn_weights=False
        )
        maps.append(w)  # (B, h, L, L)
        x = block(x, is_causal=True)
    return torch.stack(maps)


def head_targets(tokens: torch.Tensor) -> dict:
    """Where each head could look, at the positions that predict the second copy's letters.

    For a word of length n, position ``t`` in ``n+1 .. 2n`` predicts the letter at
    ``t+1``, the ``(t-n)``-th letter of the word. Returns a dict of long tensors
    (one entry per such position, sentences concatenated): ``"sentence"``,
    ``"row"`` (t), and the keys ``"separator"`` (n+1), ``"previous"`` (t-1),
    ``"to_copy"`` (t-n: the letter to be written, in the first copy) and
    ``"match"`` (t-n-1: the letter just written, in the first copy; for t = n+1
    this is the last letter, as no letter has been written yet).
    """
    n = word_lengths(tokens)  # (B,)
    sentence = torch.repeat_interleave(torch.arange(tokens.shape[0]), n)
    offset = torch.cat([torch.arange(1, k + 1) for k in n.tolist()])  # 1..n per sentence
    nn_ = n[sentence]
    row = nn_ + offset  # t = n+1 .. 2n
    return {
        "sentence": sentence,
        "row": row,
        "separator": nn_ + 1,
        "previous": row - 1,
        "to_copy": row - nn_,
        "match": torch.where(offset > 1, row - nn_ - 1, nn_),
    }


def head_scores(model: TinyDecoderLM, tokens: torch.Tensor) -> dict:
    """Mean attention weight (layers, h) on each target of :func:`head_targets`.

    Only the positions that predict a second-copy letter count; ``"match"`` is
    averaged over the letters after the first (where a letter has been written).
    """
    maps = attention_maps(model, tokens)  # (layers, B, h, L, L)
    tg = head_targets(tokens)
    rows = maps.permute(1, 3, 0, 2, 4)[tg["sentence"], tg["row"]]  # (N, layers, h, L)
    scores = {}
    for key in ("separator", "previous", "to_copy", "match"):
        index = tg[key].view(-1, 1, 1, 1).expand(*rows.shape[:3], 1)  # (N, layers, h, 1)
        w = rows.gather(-1, index)[..., 0]  # (N, layers, h)
        keep = tg["row"] > tg["separator"] if key == "match" else tg["row"] > 0
        scores[key] = w[keep].mean(0)  # (layers, h)
    return scores


def has_double(word: list) -> bool:
    """True if some letter of ``word`` is followed by the same letter."""
    return any(a == b for a, b in zip(word, word[1:], strict=False))


def induction_ambiguity(tokens: torch.Tensor) -> tuple[int, int]:
    """How often "find the letter just written in the first copy, read the next" is ambiguous.

    Counts the second-copy letters after the first (the first follows ``|``, not a
    letter). For each, the letter just written may occur several times in the
    first copy followed by different tokens (the last letter is followed by ``|``).
    Returns ``(ambiguous, total)``.
    """
    ambiguous = total = 0
    for row, n in zip(tokens.tolist(), word_lengths(tokens).tolist(), strict=True):
        first = row[1 : n + 2]  # the word and <sep>
        for j in range(1, n):  # predict the word's letter j (0-based) from letter j-1
            nexts = {first[i + 1] for i in range(n) if first[i] == first[j - 1]}
            ambiguous += len(nexts) > 1
            total += 1
    return ambiguous, total


def greedy_copies(model: TinyDecoderLM, tokens: torch.Tensor) -> list[tuple[str, str]]:
    """Greedy continuation of ``<bos> w |`` for every sentence: ``(expected, generated)`` strings.

    The prompts of one word length are decoded together, as one batch.
    """
    n = word_lengths(tokens)  # (B,)
    out: list = [None] * tokens.shape[0]
    for k in sorted(set(n.tolist())):
        rows = (n == k).nonzero().flatten()
        generated = generate(model, tokens[rows, : k + 2], k + 1)  # <bos> w | -> + k + 1
        for i, row in zip(rows.tolist(), generated, strict=True):
            out[i] = (decode_copy(tokens[i, : 2 * k + 3]), decode_copy(row))
    return out


def letter_kinds(tokens: torch.Tensor) -> torch.Tensor:
    """Long (B, L): for each letter of the second copy after its first, what "find the letter
    just written in the first copy and read the one after it" faces there.

    ``-1`` elsewhere; ``0``: the letter just written occurs once in the word, or every
    occurrence is followed by the same token (one answer); ``1``: it occurs at
    positions that are not adjacent and followed by different tokens (ambiguous);
    ``2``: it occurs doubled in the word, so two of its successors are neighbours
    (the second of ``hh`` in ``ahhe`` and also the ``e`` after it).
    """
    kinds = torch.full(tokens.shape, -1, dtype=torch.long)
    for b, (row, n) in enumerate(zip(tokens.tolist(), word_lengths(tokens).tolist(), strict=True)):
        first = row[1 : n + 2]  # the word and <sep>
        for j in range(1, n):  # the word's letter j (0-based), written after letter j-1
            where = [i for i in range(n) if first[i] == first[j - 1]]
            if any(b2 - a == 1 for a, b2 in zip(where, where[1:], strict=False)):
                kind = 2
            else:
                kind = int(len({first[i + 1] for i in where}) > 1)
            kinds[b, n + 2 + j] = kind
    return kinds


@torch.no_grad()
def off_track(model: TinyDecoderLM, tokens: torch.Tensor) -> tuple[int, int, int]:
    """Follow the letter just written, or the position? Counts over words of distinct letters.

    For every word of at least 4 distinct letters and every ``j`` in ``1 .. n-3``
    (0-based), the prompt is ``<bos> w |`` and the second copy with letter ``j``
    skipped: ``w[0] .. w[j-1] w[j+1]``. Reading on from the letter just written
    gives ``w[j+2]``; copying the letter at the next position of the first copy
    gives ``w[j+1]`` again. Returns ``(content, position, other)``, the counts
    of the model's greedy next token.
    """
    prompts: dict = {}  # prompt length -> [(prompt, reads on, next position)]
    for row, n in zip(tokens.tolist(), word_lengths(tokens).tolist(), strict=True):
        word = row[1 : n + 1]
        if n < 4 or len(set(word)) < n:
            continue
        for j in range(1, n - 2):
            prompt = row[: n + 2] + word[:j] + [word[j + 1]]
            prompts.setdefault(len(prompt), []).append((prompt, word[j + 2], word[j + 1]))
    counts = [0, 0, 0]
    for batch in prompts.values():
        guesses = model(torch.tensor([p for p, _, _ in batch]))[:, -1].argmax(-1).tolist()
        for guess, (_, content, position) in zip(guesses, batch, strict=True):
            counts[0 if guess == content else 1 if guess == position else 2] += 1
    return tuple(counts)


def lm_experiment(seed: int, steps: int = 500) -> dict:
    """Chapter 10's language model: train from ``seed`` and measure it on :func:`test_set`.

    Returns a dict of numbers and lists: ``"final_loss"`` (mean of the last 20
    steps), ``"accuracy"`` (teacher forced, second copy and ``<eos>``),
    ``"exact"`` (greedy copies right of the first 50 prompts), ``"failures"`` /
    ``"failures_double"`` (greedy failures over all 256 prompts, and how many of
    them are words with a doubled letter), ``"double_share"`` (share of the test
    words with a doubled letter), ``"acc_kind"`` (teacher-forced accuracy on the
    letters of each :func:`letter_kinds` kind 0, 1, 2), ``"off_track"`` (the
    shares of :func:`off_track`), and per head (layer-major, flattened) the mean
    weight on ``"separator"``, ``"previous"``, ``"to_copy"`` and ``"match"``
    (:func:`head_scores`).
    """
    model = build_model(seed, d_model=64, num_heads=4, d_ff=128, num_layers=2)
    losses = train(model, steps, seed=seed)
    tokens = test_set()
    scores = head_scores(model, tokens)
    copies = greedy_copies(model, tokens)
    wrong = [exp for exp, got in copies if exp != got]
    doubled = [has_double(exp.split("|")[0]) for exp, _ in copies]
    with torch.no_grad():
        right = model(tokens[:, :-1]).argmax(-1) == tokens[:, 1:]  # (B, L-1)
    kinds = letter_kinds(tokens)[:, 1:]  # aligned with the predicted tokens
    off = off_track(model, tokens)
    return {
        "final_loss": sum(losses[-20:]) / 20,
        "accuracy": copy_accuracy(model, tokens),
        "exact": sum(exp == got for exp, got in copies[:50]),
        "failures": len(wrong),
        "failures_double": sum(has_double(w.split("|")[0]) for w in wrong),
        "double_share": sum(doubled) / len(doubled),
        "acc_kind": [right[kinds == k].float().mean().item() for k in range(3)],
        "off_track": [c / sum(off) for c in off],
        **{key: value.flatten().tolist() for key, value in scores.items()},
    }


# -- the ablation ---------------------------------------------------------------------------

VARIANTS = {
    "pre-norm": {},
    "post-norm": {"norm_first": False},
    "no residual": {"residual": False},
    "no LayerNorm": {"layer_norm": False},
    "no FFN": {"feed_forward": False},
}
ABLATION_SIZE = {"d_model": 32, "num_heads": 2, "d_ff": 64, "num_layers": 6}


def ablation_models(seed: int) -> dict:
    """The five :data:`VARIANTS` with the same initial weights wherever their parameters coincide.

    The full pre-norm model is drawn from ``seed``; every variant is built and then
    given the full model's tensors for each of its parameters (a variant only
    lacks parameters: no LayerNorm, no FFN, or no final LayerNorm for post-norm).
    """
    full = build_model(seed, **ABLATION_SIZE)
    state = full.state_dict()
    models = {}
    for name, switches in VARIANTS.items():
        model = build_model(seed, **ABLATION_SIZE, **switches)
        own = model.state_dict()
        missing = set(own) - set(state)
        if missing:
            raise RuntimeError(f"ablation_models: {name} has parameters the full model lacks: {missing}")
        model.load_state_dict({k: state[k].clone() for k in own})
        models[name] = model
    return models


def gradient_norms(model: TinyDecoderLM, tokens: torch.Tensor) -> list[float]:
    """The norm of the loss gradient of each block's parameters, one backward pass on ``tokens``."""
    model.zero_grad()
    lm_loss(model, tokens).backward()
    norms = [torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item() for b in model.blocks]
    model.zero_grad()
    return norms


@torch.no_grad()
def position_similarity(model: TinyDecoderLM, tokens: torch.Tensor) -> float:
    """Mean cosine similarity between the last block's outputs at different positions of a sentence.

    Near 1: the positions' vectors have become alike (the tokens' identities are lost).
    """
    x = model.positions(model.embed(tokens))  # (B, L, D)
    for block in model.blocks:
        x = block(x, is_causal=True)
    unit = F.normalize(x, dim=-1)  # (B, L, D)
    cos = unit @ unit.transpose(1, 2)  # (B, L, L)
    L = tokens.shape[1]
    off_diagonal = ~torch.eye(L, dtype=torch.bool)
    return cos[:, off_diagonal].mean().item()


def ablation_experiment(seed: int, steps: int = 120) -> dict:
    """Chapter 10's ablation: the five :data:`VARIANTS` trained from the same weights and batches.

    Returns, per variant (key suffix ``_<name>``, spaces as ``_``): ``"loss"`` (mean
    loss of each 10 steps, a list), ``"final"`` (mean of the last 20 steps),
    ``"acc"`` (teacher-forced accuracy on :func:`test_set`); and, at
    initialisation, for ``pre-norm`` and ``no residual``, ``"grad"`` (each
    block's gradient norm on one batch) and ``"similar"``
    (:func:`position_similarity`).
    """
    models = ablation_models(seed)
    batch = copy_batch(64, torch.Generator().manual_seed(1000 + seed))
    out = {}
    for name in ("pre-norm", "no residual"):
        key = name.replace(" ", "_")
        out[f"grad_{key}"] = gradient_norms(models[name], batch)
        out[f"similar_{key}"] = position_similarity(models[name], batch)
    tokens = test_set()
    for name, model in models.items():
        key = name.replace(" ", "_")
        losses = train(model, steps, seed=seed)
        out[f"loss_{key}"] = [sum(losses[i : i + 10]) / 10 for i in range(0, steps, 10)]
        out[f"final_{key}"] = sum(losses[-20:]) / 20
        out[f"acc_{key}"] = copy_accuracy(model, tokens)
    return out
