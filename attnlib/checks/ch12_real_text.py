"""Chapter 12 exercises: a warm-up-then-cosine schedule, top-k filtering, a head's induction score."""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlib.chapters import char_lm
from attnlib.checks._cases import cases
from attnlib.checks.core import Exercise, Misconception, register

# --------------------------------------------------------------------------- ex-12-1 the schedule


def learning_rates(peak_lr, warmup_steps, total_steps, min_lr):
    """The rate of every step ``0 .. total_steps - 1``, float64 array (total_steps,)."""
    return np.array(
        [char_lm.lr_at(s, peak_lr, warmup_steps, total_steps, min_lr) for s in range(total_steps)]
    )


def _schedule(warmup_rate, decay_rate):
    """A wrong schedule from its two pieces (rate of step s in the warm-up, after it)."""

    def wrong(peak_lr, warmup_steps, total_steps, min_lr):
        out = []
        for s in range(total_steps):
            if s < warmup_steps:
                out.append(warmup_rate(s, peak_lr, warmup_steps))
            else:
                out.append(decay_rate(s, peak_lr, warmup_steps, total_steps, min_lr))
        return np.array(out, dtype=np.float64)

    return wrong


def _right_warmup(s, peak, w):
    return peak * (s + 1) / w


def _cosine(s, peak, w, total, low):
    return low + (peak - low) * 0.5 * (1 + math.cos(math.pi * (s - w) / (total - w)))


_warmup_from_zero = _schedule(lambda s, peak, w: peak * s / w, _cosine)
_decay_to_zero = _schedule(_right_warmup, lambda s, peak, w, total, low: _cosine(s, peak, w, total, 0.0))
_linear_decay = _schedule(
    _right_warmup, lambda s, peak, w, total, low: peak - (peak - low) * (s - w) / (total - w)
)
_cosine_over_all_steps = _schedule(
    _right_warmup,
    lambda s, peak, w, total, low: low + (peak - low) * 0.5 * (1 + math.cos(math.pi * s / total)),
)


def _no_warmup_schedule(peak_lr, warmup_steps, total_steps, min_lr):
    return np.array([_cosine(s, peak_lr, 0, total_steps, min_lr) for s in range(total_steps)])


_full_cosine_period = _schedule(
    _right_warmup,
    lambda s, peak, w, total, low: (
        low + (peak - low) * 0.5 * (1 + math.cos(2 * math.pi * ((s - w) / (total - w))))
    ),
)


register(
    Exercise(
        id="ex-12-1",
        function="learning_rates",
        reference=learning_rates,
        cases=cases(
            None,
            {
                "peak 0.01, 4 warm-up steps of 20, down to 0.001": (0.01, 4, 20, 0.001),
                "peak 1.0, 3 warm-up steps of 10, down to 0": (1.0, 3, 10, 0.0),
                "no warm-up (warmup_steps = 0), 8 steps, down to 0.1": (1.0, 0, 8, 0.1),
                "hidden: no warm-up (0 steps), 12 steps, down to 0.1": (1.0, 0, 12, 0.1),
                "hidden: one warm-up step of 7": (0.5, 1, 7, 0.05),
                "hidden: warm-up only (5 of 5 steps)": (2.0, 5, 5, 0.0),
                "hidden: a long run, 50 warm-up steps of 400": (3e-3, 50, 400, 3e-4),
                "hidden: min_lr equal to the peak (no decay)": (0.2, 2, 9, 0.2),
                "hidden: a single step without warm-up": (0.7, 0, 1, 0.0),
            },
        ),
        misconceptions=[
            Misconception(
                "the warm-up starts at 0 (step / warmup_steps instead of (step + 1) / warmup_steps)",
                _warmup_from_zero,
                "the first step must already move the weights: step s of the warm-up gets "
                "peak_lr * (s + 1) / warmup_steps, so the last warm-up step reaches the peak.",
            ),
            Misconception(
                "the cosine decays to 0 instead of min_lr",
                _decay_to_zero,
                "the cosine runs from peak_lr down to min_lr, not to 0: scale it by (peak_lr - min_lr) "
                "and add min_lr.",
            ),
            Misconception(
                "a linear decay instead of the cosine",
                _linear_decay,
                "after the warm-up the rate follows half a cosine, 0.5 * (1 + cos(pi * progress)), "
                "not a straight line.",
            ),
            Misconception(
                "the cosine's progress counted from step 0 instead of from the end of the warm-up",
                _cosine_over_all_steps,
                "the decay starts where the warm-up ends: progress is 0 at the first step after the "
                "warm-up and would reach 1 at total_steps, so it runs over the steps left after the "
                "warm-up, not over all of them.",
            ),
            Misconception(
                "no warm-up: the cosine from step 0",
                _no_warmup_schedule,
                "the first warmup_steps steps rise linearly to peak_lr before the cosine starts.",
            ),
            Misconception(
                "a full cosine period (cos(2 pi progress)) instead of half of one",
                _full_cosine_period,
                "the rate must fall all the way and not rise again: half a period, cos(pi * progress), "
                "goes from 1 to -1 once.",
            ),
        ],
        forbidden=("attnlib.chapters.char_lm.lr_at", "torch.optim.lr_scheduler"),
        hints=(
            "two pieces: a linear rise over the first warmup_steps steps, then half a cosine from the "
            "peak down to min_lr over the remaining steps.",
            "in the warm-up the rate grows by peak_lr / warmup_steps per step, starting above 0; after "
            "it, progress p goes from 0 (first step after the warm-up) towards 1 at total_steps.",
            "after the warm-up the cosine factor 0.5 * (1 + cos(pi * p)) falls from 1 to 0 as p goes "
            "from 0 to 1: scale and shift it so that the rate falls from peak_lr towards min_lr.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-12-2 top-k


def top_k_logits(logits, k):
    """Keep the k largest logits of each row (last dim), the others -inf; ties with the k-th kept."""
    return char_lm.top_k_logits(logits, k)


def _logit_rows(shape, seed, k):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64) * 2, k


def _tied_rows():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0, 0.5], [0.0, 0.0, 0.0, -1.0, 4.0]], dtype=torch.float64)
    return logits, 2


def _visible_ties():
    """Every rule of the text has a visible case (issue 43.4): ties with the k-th largest are kept,
    so these rows keep 3 and 4 logits for k = 2."""
    logits = torch.tensor(
        [[0.5, 2.0, 1.0, 2.0, -1.0, 2.0], [4.0, 1.0, 1.0, 1.0, 0.0, -2.0]], dtype=torch.float64
    )
    return logits, 2


def _top_k_zero(logits, k):
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def _top_k_plus_one(logits, k):
    if k + 1 >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k + 1, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_strict_ties(logits, k):
    """Exactly k kept: the indices topk returns, ties broken by position."""
    if k >= logits.shape[-1]:
        return logits
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k, dim=-1).indices, True)
    return logits.masked_fill(~keep, float("-inf"))


def _top_k_probabilities(logits, k):
    return torch.softmax(char_lm.top_k_logits(logits, k), dim=-1)


def _top_k_smallest(logits, k):
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1, largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, float("-inf"))


def _top_k_first_axis(logits, k):
    """The k largest of each column (dim 0) instead of each row."""
    if k >= logits.shape[0]:
        return logits
    kth = torch.topk(logits, k, dim=0).values[-1:]
    return logits.masked_fill(logits < kth, float("-inf"))


register(
    Exercise(
        id="ex-12-2",
        function="top_k_logits",
        reference=top_k_logits,
        cases=cases(
            _logit_rows,
            {
                "3 rows of 8 logits, k = 3": ((3, 8), 0, 3),
                "one row of 65 logits, k = 5": ((1, 65), 1, 5),
                "a batch (2, 2, 6) of rows, k = 2": ((2, 2, 6), 10, 2),
                "ties with the k-th largest kept (rows keep 3 and 4 for k = 2)": _visible_ties,
                "k equal to the row's length (4): every logit kept": ((2, 4), 8, 4),
                "k larger than the row's length (k = 6, 4 logits): every logit kept": ((2, 4), 9, 6),
                "hidden: a batch (2, 3, 10), k = 4": ((2, 3, 10), 2, 4),
                "hidden: k = 1 (greedy)": ((4, 6), 3, 1),
                "hidden: k equal to the vocabulary (nothing removed)": ((2, 7), 4, 7),
                "hidden: k larger than the vocabulary": ((2, 5), 5, 9),
                "hidden: ties with the k-th largest are kept": _tied_rows,
                "hidden: whole-number logits (many ties), k = 3": lambda: (
                    _logit_rows((3, 2, 9), 7, 3)[0].round(),
                    3,
                ),
                "hidden: a single row (5,), k = 2": ((5,), 6, 2),
                "hidden: large logits near 1000": lambda: (torch.tensor([[1000.0, 999.0, 1001.0, 998.5]]), 2),
            },
        ),
        misconceptions=[
            Misconception(
                "removed logits set to 0 instead of -inf",
                _top_k_zero,
                "a logit of 0 still has probability exp(0) / Z after the softmax: set the removed "
                "logits to -inf (float('-inf')), whose exponential is exactly 0.",
            ),
            Misconception(
                "k + 1 logits kept (off by one)",
                _top_k_plus_one,
                "the threshold is the k-th largest logit of the row (index k - 1 of the sorted "
                "values, largest first): the k largest are kept, and nothing below them.",
            ),
            Misconception(
                "exactly k kept, ties with the k-th largest broken by position",
                _top_k_strict_ties,
                "the text keeps every logit equal to the k-th largest: compare each logit with the "
                "k-th largest value instead of keeping only the k positions torch.topk returns.",
            ),
            Misconception(
                "probabilities returned instead of logits",
                _top_k_probabilities,
                "return the filtered logits, not their softmax: the sampler divides them by the "
                "temperature first.",
            ),
            Misconception(
                "the k smallest logits kept instead of the largest",
                _top_k_smallest,
                "top-k keeps the most likely tokens: the k largest logits of each row.",
            ),
            Misconception(
                "the k largest of each column (dim 0) instead of each row",
                _top_k_first_axis,
                "each row (the last dimension) is one distribution over the vocabulary: find the k "
                "largest along dim=-1.",
            ),
        ],
        forbidden=("attnlib.chapters.char_lm.top_k_logits", "attnlib.chapters.char_lm.generate_text"),
        hints=(
            "find, in each row, the value of the k-th largest logit; everything below it is removed.",
            "torch.topk gives the k largest values of each row, largest first; the smallest of them "
            "is the row's threshold, and a threshold of shape (..., 1) broadcasts over the row.",
            "a removed logit must get probability 0 from the softmax: which value does that? And "
            "what should a k at least the row's length remove?",
        ),
    )
)

# --------------------------------------------------------------------------- ex-12-3 induction score


def induction_score(weights):
    """weights (..., 2T, 2T) on a sequence whose second half repeats the first -> (...)."""
    T = weights.shape[-1] // 2
    rows = torch.arange(T, 2 * T)
    return weights[..., rows, rows - T + 1].mean(dim=-1)


def _attention(shape, T, seed, causal=True):
    g = torch.Generator().manual_seed(seed)
    L = 2 * T
    scores = torch.randn(*shape, L, L, generator=g, dtype=torch.float64) * 2
    if causal:
        scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    return (torch.softmax(scores, dim=-1),)


def _an_induction_head(T=4):
    """A head whose rows of the second half sit mostly on the token after the earlier occurrence."""
    L = 2 * T
    w = torch.full((L, L), 0.0, dtype=torch.float64)
    for t in range(L):
        w[t, : t + 1] = 1.0 / (t + 1)
    for t in range(T, L):
        w[t] = 0.0
        w[t, : t + 1] = 0.2 / (t + 1)
        w[t, t - T + 1] += 0.8
    return (w[None],)


def _duplicate_token(weights):
    T = weights.shape[-1] // 2
    rows = torch.arange(T, 2 * T)
    return weights[..., rows, rows - T].mean(dim=-1)


def _previous_token(weights):
    T = weights.shape[-1] // 2
    rows = torch.arange(T, 2 * T)
    return weights[..., rows, rows - 1].mean(dim=-1)


def _rows_and_columns_swapped(weights):
    T = weights.shape[-1] // 2
    rows = torch.arange(T, 2 * T)
    return weights[..., rows - T + 1, rows].mean(dim=-1)


def _sum_not_mean(weights):
    T = weights.shape[-1] // 2
    rows = torch.arange(T, 2 * T)
    return weights[..., rows, rows - T + 1].sum(dim=-1)


def _every_row(weights):
    """Rows 0 .. 2T-1 with the key t - T + 1 wrapped around (negative indices)."""
    L = weights.shape[-1]
    T = L // 2
    rows = torch.arange(L)
    return weights[..., rows, (rows - T + 1) % L].mean(dim=-1)


def _last_half_rows_from_t_minus_one(weights):
    """Rows T-1 .. 2T-2 (one early), keys t - T + 1."""
    T = weights.shape[-1] // 2
    rows = torch.arange(T - 1, 2 * T - 1)
    return weights[..., rows, rows - T + 1].mean(dim=-1)


register(
    Exercise(
        id="ex-12-3",
        function="induction_score",
        reference=induction_score,
        cases=cases(
            _attention,
            {
                "one head, T = 4 (8 positions)": ((1,), 4, 0),
                "an induction head, T = 4": _an_induction_head,
                "a batch of 2 sequences and 2 heads (2, 2, 6, 6)": ((2, 2), 3, 5),
                "hidden: a batch of 2 sequences and 3 heads (2, 3, 10, 10)": ((2, 3), 5, 1),
                "hidden: T = 1 (2 positions)": ((2,), 1, 2),
                "hidden: weights that are not causal": lambda: _attention((1, 2), 3, 3, causal=False),
                "hidden: one sequence, 4 heads, T = 16": ((1, 4), 16, 4),
            },
        ),
        misconceptions=[
            Misconception(
                "the weight on the earlier occurrence itself (t - T), not the token after it",
                _duplicate_token,
                "an induction head reads the token that came *after* the earlier occurrence of the "
                "current one: in the first half that is position t - T + 1, one past t - T.",
            ),
            Misconception(
                "the weight on the previous token (t - 1)",
                _previous_token,
                "that is a previous-token head's score; the induction score looks half the sequence "
                "back, at the token after the earlier occurrence.",
            ),
            Misconception(
                "rows and columns swapped (query and key)",
                _rows_and_columns_swapped,
                "weights[..., t, s] is how much query t attends to key s: the rows are the queries "
                "of the second half, the columns the keys they read.",
            ),
            Misconception(
                "the sum over the second half instead of the mean",
                _sum_not_mean,
                "the score is a mean weight (between 0 and 1), averaged over the T queries of the "
                "second half.",
            ),
            Misconception(
                "every query row averaged, the first half included",
                _every_row,
                "only the queries of the second half have an earlier occurrence to look back to: "
                "average over t = T .. 2T - 1.",
            ),
            Misconception(
                "the queries taken one position early (t = T - 1 .. 2T - 2)",
                _last_half_rows_from_t_minus_one,
                "the second half starts at position T (0-based); its last query is 2T - 1.",
            ),
        ],
        forbidden=("attnlib.chapters.char_lm.induction_test",),
        hints=(
            "position t of the second half holds the same token as position t - T; an induction head "
            "at t reads the key that followed that earlier occurrence.",
            "take, for each query t of the second half, one weight from its row, then average over "
            "those queries; the leading dimensions (batch, heads) stay.",
            "index the last two dimensions with two index tensors of the same length, the queries "
            "and, for each, its key, then average over the queries.",
        ),
    )
)
