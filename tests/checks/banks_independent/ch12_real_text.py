"""Bank for chapter 12, written from the exercise notebook's text (its author also wrote the checks:
not independent in the sense of #25; the answers follow the text's wording, not the checks')."""

import math

import numpy as np
import torch
from bank import Right, Wrong

# ---- ex-12-1 learning_rates -------------------------------------------------


def lr_half_step_warmup(peak_lr, warmup_steps, total_steps, min_lr):
    out = []
    for s in range(total_steps):
        if s < warmup_steps:
            out.append(peak_lr * (s + 0.5) / warmup_steps)  # half a step early
        else:
            p = (s - warmup_steps) / (total_steps - warmup_steps)
            out.append(min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * p)))
    return np.array(out)


def lr_cosine_without_floor(peak_lr, warmup_steps, total_steps, min_lr):
    out = []
    for s in range(total_steps):
        if s < warmup_steps:
            out.append(peak_lr * (s + 1) / warmup_steps)
        else:
            p = (s - warmup_steps) / (total_steps - warmup_steps)
            out.append(peak_lr * 0.5 * (1 + math.cos(math.pi * p)))
    return np.array(out)


def lr_straight_line(peak_lr, warmup_steps, total_steps, min_lr):
    out = []
    for s in range(total_steps):
        if s < warmup_steps:
            out.append(peak_lr * (s + 1) / warmup_steps)
        else:
            p = (s - warmup_steps) / (total_steps - warmup_steps)
            out.append(peak_lr - (peak_lr - min_lr) * p)
    return np.array(out)


def lr_text_to_the_letter(peak_lr, warmup_steps, total_steps, min_lr):
    w, T = warmup_steps, total_steps
    rates = np.empty(T)
    for s in range(T):
        if s < w:
            rates[s] = peak_lr * (s + 1) / w
        else:
            rates[s] = min_lr + (peak_lr - min_lr) * 0.5 * (1 + np.cos(np.pi * (s - w) / (T - w)))
    return rates


# ---- ex-12-2 top_k_logits ---------------------------------------------------


def tk_mask_to_large_negative(logits, k):
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -1e4)  # not -inf: near logits of 1000 it still counts


def tk_exactly_k(logits, k):
    if k >= logits.shape[-1]:
        return logits
    idx = torch.topk(logits, k, dim=-1).indices
    mask = torch.ones_like(logits, dtype=torch.bool).scatter(-1, idx, False)
    return logits.masked_fill(mask, float("-inf"))


def tk_keeps_zeros(logits, k):
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits * (logits >= kth)


def tk_loop(logits, k):
    out = logits.clone()
    flat = out.reshape(-1, out.shape[-1])
    for row in flat:
        if k < row.numel():
            threshold = sorted(row.tolist(), reverse=True)[k - 1]
            row[row < threshold] = float("-inf")
    return out


# ---- ex-12-3 induction_score -------------------------------------------------


def is_same_token(weights):
    T = weights.shape[-1] // 2
    idx = torch.arange(T, 2 * T)
    return weights[..., idx, idx - T].mean(-1)


def is_next_column(weights):
    T = weights.shape[-1] // 2
    idx = torch.arange(T, 2 * T)
    return weights[..., idx - T + 1, idx].mean(-1)


def is_all_rows(weights):
    L = weights.shape[-1]
    T = L // 2
    idx = torch.arange(L)
    return weights[..., idx, (idx - T + 1) % L].mean(-1)


def is_gather(weights):
    T = weights.shape[-1] // 2
    rows = weights[..., T:, :]  # (..., T, 2T)
    keys = (torch.arange(T, 2 * T) - T + 1).expand(*rows.shape[:-1])[..., None]
    return rows.gather(-1, keys)[..., 0].mean(-1)


WRONG = [
    Wrong("ex-12-1", lr_half_step_warmup, "half a step early"),
    Wrong("ex-12-1", lr_cosine_without_floor, "no min_lr floor"),
    Wrong("ex-12-1", lr_straight_line, "linear instead of cosine"),
    Wrong("ex-12-2", tk_mask_to_large_negative, "-1e4 instead of -inf"),
    Wrong("ex-12-2", tk_exactly_k, "ties dropped"),
    Wrong("ex-12-2", tk_keeps_zeros, "zeros kept"),
    Wrong("ex-12-3", is_same_token, "the same token, not the next"),
    Wrong("ex-12-3", is_next_column, "query and key swapped"),
    Wrong("ex-12-3", is_all_rows, "first half included"),
]

RIGHT = [
    Right("ex-12-1", lr_text_to_the_letter),
    Right("ex-12-2", tk_loop),
    Right("ex-12-3", is_gather),
]

NAMED = {
    "lr_half_step_warmup": None,
    "lr_cosine_without_floor": "decays to 0 instead of min_lr",
    "lr_straight_line": "linear decay",
    "tk_mask_to_large_negative": None,
    "tk_exactly_k": "ties with the k-th largest broken",
    "tk_keeps_zeros": "set to 0 instead of -inf",
    "is_same_token": "earlier occurrence itself",
    "is_next_column": "rows and columns swapped",
    "is_all_rows": "first half included",
}
