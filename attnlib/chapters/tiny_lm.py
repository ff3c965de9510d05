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
    "BOS",
    "EOS",
    "PAD",
    "SEP",
    "TinyDecoderLM",
    "copy_accuracy",
    "copy_batch",
    "decode_tokens",
    "generate",
    "lm_loss",
]

ALPHABET = "abcdefgh"
PAD, BOS, SEP, EOS = 8, 9, 10, 11  # the letters are 0..7
VOCAB_SIZE = 12
MIN_WORD, MAX_WORD = 3, 8
SEQ_LEN = 2 * MAX_WORD + 3  # <bos> w <sep> w <eos> at the longest


def copy_batch(
    batch_size: int, generator: torch.Generator, word_len: tuple[int, int] = (MIN_WORD, MAX_WORD)
) -> torch.Tensor:
    """Sentences of the copy language, long (batch_size, SEQ_LEN), PAD after ``<eos>``."""
    tokens = torch.full((batch_size, SEQ_LEN), PAD, dtype=torch.long)
    lengths = torch.randint(word_len[0], word_len[1] + 1, (batch_size,), generator=generator)
    letters = torch.randint(0, len(ALPHABET), (batch_size, MAX_WORD), generator=generator)
    for b, n in enumerate(lengths.tolist()):
        word = letters[b, :n]
        tokens[b, : 2 * n + 3] = torch.cat(
            [torch.tensor([BOS]), word, torch.tensor([SEP]), word, torch.tensor([EOS])]
        )
    return tokens


def decode_tokens(tokens) -> str:
    """A readable string: letters, ``|`` for the separator, ``.`` for the end; BOS/PAD dropped."""
    out = []
    for t in tokens.tolist() if isinstance(tokens, torch.Tensor) else tokens:
        if t < len(ALPHABET):
            out.append(ALPHABET[t])
        elif t == SEP:
            out.append("|")
        elif t == EOS:
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
        vocab_size: int = VOCAB_SIZE,
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
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


def _predictable(tokens: torch.Tensor) -> torch.Tensor:
    """bool (B, L): True for the tokens after ``<sep>`` up to and including ``<eos>``."""
    after_sep = (tokens == SEP).long().cumsum(dim=1) > 0  # (B, L)
    return after_sep & (tokens != SEP) & (tokens != PAD)


@torch.no_grad()
def copy_accuracy(model: nn.Module, tokens: torch.Tensor) -> float:
    """Share of predictable tokens (second copy and ``<eos>``) predicted right, teacher forced."""
    pred = model(tokens[:, :-1]).argmax(-1)  # (B, L-1)
    keep = _predictable(tokens)[:, 1:]
    return (pred[keep] == tokens[:, 1:][keep]).float().mean().item()


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
        caches = [block.new_cache(B, P + max_new_tokens) for block in model.blocks]
        logits = model.forward_cached(prompt, caches, offset=0)[:, -1]  # (B, V)
    else:
        logits = model(prompt)[:, -1]  # (B, V)
    for step in range(max_new_tokens):
        if temperature == 0.0:
            next_token = logits.argmax(-1, keepdim=True)  # (B, 1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
            next_token = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, P + step + 1)
        if step == max_new_tokens - 1:
            break
        if use_cache:
            logits = model.forward_cached(next_token, caches, offset=tokens.shape[1] - 1)[:, -1]
        else:
            logits = model(tokens)[:, -1]
    return tokens
