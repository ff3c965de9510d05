"""Chapter 10's head measurements that need a baseline beside them, on the page's own run.

:mod:`attnlib.chapters.tiny_lm` measures the heads where the second copy is written
(:func:`~attnlib.chapters.tiny_lm.head_scores`). This module adds what chapter 10 compares
them with, computed on the same sentences:

* :func:`even_spread`: the weight a head that spreads evenly over the keys it may see
  (causal: row ``t`` sees ``t + 1`` keys) puts on any one of them, averaged over rows;
* :func:`previous_at_first_copy`: the weight each head puts on the previous token at the
  first copy's letters, where the content rule needs "the letter before me" at the keys;
* :func:`target_entropy`: the loss of a model blind to its input, which can only learn how
  often each target token occurs;
* :func:`position_similarity_unpadded`: :func:`~attnlib.chapters.tiny_lm.position_similarity`
  without the padding positions.

It is not imported by ``tiny_lm`` or ``char_lm``, so the recorded spreads of chapters 10
and 12 (whose hashes cover their modules' code) do not depend on it; the chapter computes
these numbers on its own run and says so.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlib.chapters import tiny_lm

__all__ = [
    "even_spread",
    "first_copy_rows",
    "previous_at_first_copy",
    "second_copy_rows",
    "target_entropy",
    "position_similarity_unpadded",
]


def second_copy_rows(tokens: torch.Tensor) -> torch.Tensor:
    """Long (N,): the rows :func:`~attnlib.chapters.tiny_lm.head_scores` averages over.

    The positions ``n+1 .. 2n`` that predict a letter of the second copy, sentences
    concatenated.
    """
    return tiny_lm.head_targets(tokens)["row"]


def first_copy_rows(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sentence, row)``, long (N,) each: the first copy's letters after its first one.

    Positions ``2 .. n`` of a word of length ``n`` (position 0 is ``<bos>``): the keys an
    induction head reads, whose previous token is a letter of the word.
    """
    n = tiny_lm.word_lengths(tokens)  # (B,)
    sentence = torch.repeat_interleave(torch.arange(tokens.shape[0]), n - 1)
    row = torch.cat([torch.arange(2, k + 1) for k in n.tolist()])
    return sentence, row


def even_spread(rows: torch.Tensor) -> float:
    """Mean weight on one key of a causal head that spreads evenly: mean of ``1 / (row + 1)``."""
    return (1.0 / (rows.double() + 1)).mean().item()


def previous_at_first_copy(model: tiny_lm.TinyDecoderLM, tokens: torch.Tensor) -> torch.Tensor:
    """Float (layers, h): each head's mean weight on the previous token, at :func:`first_copy_rows`."""
    maps = tiny_lm.attention_maps(model, tokens)  # (layers, B, h, L, L)
    sentence, row = first_copy_rows(tokens)
    return maps[:, sentence, :, row, row - 1].mean(0)  # (N, layers, h) -> (layers, h)


def target_entropy(
    word_len: tuple[int, int] = (tiny_lm.MIN_WORD, tiny_lm.MAX_WORD),
    n_letters: int = len(tiny_lm.ALPHABET),
) -> float:
    """The entropy (nats) of the tokens :func:`~attnlib.chapters.tiny_lm.lm_loss` scores.

    Each sentence's word length is uniform over ``word_len`` and its letters uniform over the
    alphabet; the loss scores the ``n`` letters of the second copy and ``<eos>``. A model that
    does not see its input can only predict these frequencies, and its loss is at least this.
    """
    lengths = range(word_len[0], word_len[1] + 1)
    scored = sum(n + 1 for n in lengths)  # per word length, n letters and one <eos>
    p_eos = len(lengths) / scored
    p_letter = (1 - p_eos) / n_letters
    return -(p_eos * math.log(p_eos) + n_letters * p_letter * math.log(p_letter))


def position_similarity_unpadded(model: tiny_lm.TinyDecoderLM, tokens: torch.Tensor) -> float:
    """:func:`~attnlib.chapters.tiny_lm.position_similarity` over pairs of non-padding positions.

    The mean cosine similarity between the last block's outputs at two different positions of
    one sentence, both before its padding.
    """
    with torch.no_grad():
        x = model.positions(model.embed(tokens))  # (B, L, D)
        for block in model.blocks:
            x = block(x, is_causal=True)
    unit = F.normalize(x, dim=-1)
    cos = unit @ unit.transpose(1, 2)  # (B, L, L)
    real = tokens != tiny_lm.COPY_PAD  # (B, L)
    pairs = real[:, :, None] & real[:, None, :] & ~torch.eye(tokens.shape[1], dtype=torch.bool)
    return cos[pairs].mean().item()
