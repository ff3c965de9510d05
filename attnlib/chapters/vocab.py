"""The token vocabulary and the greedy decoder shared by chapters 01, 02 and 07.

Chapter 01 introduces the tokens; chapter 07 adds the ten digit words:

=========  ======================  ===========================================
token id   name                    meaning
=========  ======================  ===========================================
0          ``PAD``                 fills a right-padded batch to one length
1          ``BOS``                 the first input of the decoder
2          ``EOS``                 ends a target
3..12      ``0``..``9``            the digits (``DIGIT_OFFSET + d``)
13..22     ``zero``..``nine``      the digit words of chapter 07 (``WORD_OFFSET + d``)
=========  ======================  ===========================================

``VOCAB_SIZE = 13`` (special tokens and digits) is the vocabulary of chapters
01 and 02; chapter 07's has ``len(digits_vocab()) = 23`` tokens.

:func:`greedy_decode_steps` is the one greedy decoder of the course: every
model's ``greedy_decode`` hands it a step function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

__all__ = [
    "BOS",
    "DIGIT_OFFSET",
    "DIGIT_WORDS",
    "EOS",
    "NUM_DIGITS",
    "PAD",
    "VOCAB_SIZE",
    "WORD_OFFSET",
    "decode_tokens",
    "digits_vocab",
    "encode_digits",
    "exact_match",
    "greedy_decode_steps",
    "pad_rows",
    "shift_right",
    "token_strings",
]

PAD, BOS, EOS = 0, 1, 2
NUM_DIGITS = 10
DIGIT_OFFSET = 3  # digit d is token DIGIT_OFFSET + d
WORD_OFFSET = DIGIT_OFFSET + NUM_DIGITS  # the word for d is token WORD_OFFSET + d
VOCAB_SIZE = DIGIT_OFFSET + NUM_DIGITS  # special tokens and digits: 13
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def digits_vocab() -> list[str]:
    """Names of chapter 07's 23 tokens: special tokens, the digits, the digit words."""
    return ["<pad>", "<bos>", "<eos>", *(str(d) for d in range(NUM_DIGITS)), *DIGIT_WORDS]


def encode_digits(digits: Sequence[int]) -> list[int]:
    """Digits 0-9 -> tokens ``DIGIT_OFFSET + d`` (3..12)."""
    out = []
    for d in digits:
        d = int(d)
        if not 0 <= d < NUM_DIGITS:
            raise ValueError(f"encode_digits: expected digits 0-9, got {d}")
        out.append(d + DIGIT_OFFSET)
    return out


def decode_tokens(tokens, stop_at_eos: bool = True) -> str:
    """Tokens -> a readable string: digits as '0'-'9', BOS as '<s>', EOS as '</s>', PAD skipped.

    Stops after the first EOS when ``stop_at_eos``. Accepts a list or a 1-D tensor.
    """
    if isinstance(tokens, torch.Tensor):
        if tokens.dim() != 1:
            raise ValueError(f"decode_tokens: expected a 1-D sequence, got shape {tuple(tokens.shape)}")
        tokens = tokens.tolist()
    parts = []
    for t in (int(t) for t in tokens):
        if t == PAD:
            continue
        if t == BOS:
            parts.append("<s>")
        elif t == EOS:
            parts.append("</s>")
            if stop_at_eos:
                break
        else:
            is_digit = DIGIT_OFFSET <= t < WORD_OFFSET
            parts.append(str(t - DIGIT_OFFSET) if is_digit else f"<{t}>")
    return " ".join(parts)


def token_strings(ids, vocab: list[str], stop_at_eos: bool = True) -> list[str]:
    """Token ids -> token names from ``vocab``, PAD dropped (and nothing after the first EOS)."""
    out = []
    for i in (int(t) for t in ids):
        if i == PAD:
            continue
        out.append(vocab[i])
        if stop_at_eos and i == EOS:
            break
    return out


def pad_rows(rows: list[list[int]]) -> torch.Tensor:
    """Right-pad lists of token ids with PAD: a LongTensor (B, max length)."""
    width = max(len(r) for r in rows)
    padded = [[*r, *[PAD] * (width - len(r))] for r in rows]
    return torch.tensor(padded, dtype=torch.long)  # one tensor, not one per row


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Teacher-forcing decoder input: BOS followed by the target without its last token, (B, T)."""
    bos = torch.full_like(tgt[:, :1], BOS)
    return torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, T)


def exact_match(pred: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Per-sequence correctness (B,) bool: pred equals tgt at every non-PAD target position.

    pred and tgt are (B, T); positions where the target is PAD are ignored (so
    anything a model writes after its EOS does not count).
    """
    if pred.shape != tgt.shape:
        raise ValueError(f"exact_match: pred {tuple(pred.shape)} and tgt {tuple(tgt.shape)} differ")
    real = tgt != PAD  # (B, T)
    return ((pred == tgt) | ~real).all(dim=1)  # (B,)


# Chapter 01 prints this source: lines kept within 80 columns.
# fmt: off
def greedy_decode_steps(
    step: Callable[[torch.Tensor, object], tuple[torch.Tensor, object]],
    state: object,
    batch_size: int,
    max_len: int,
) -> torch.Tensor:
    """Greedy decoding with any step function (built in chapters 01 and 07).

    Parameters
    ----------
    step
        ``step(prev_tokens (B,), state) -> (logits (B, V), new_state)``.
    state
        the decoder state before the first step.
    batch_size
        B.
    max_len
        number of tokens to produce.

    Returns
    -------
    torch.Tensor
        long (B, max_len): at each step the argmax token, fed back as the next
        input; after a sequence has produced EOS it holds PAD.
    """
    prev = torch.full((batch_size,), BOS, dtype=torch.long)  # (B,)
    finished = torch.zeros(batch_size, dtype=torch.bool)  # (B,)
    out = []
    for _ in range(max_len):  # step t needs the token of step t - 1
        logits, state = step(prev, state)  # (B, V)
        token = logits.argmax(dim=-1)  # (B,)
        token = torch.where(finished, PAD, token)  # PAD after EOS
        out.append(token)
        finished = finished | (token == EOS)
        prev = token  # feed the prediction back, never the gold token
    return torch.stack(out, dim=1)  # (B, max_len)


# fmt: on
