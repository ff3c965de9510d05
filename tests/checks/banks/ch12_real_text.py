"""Answer bank of chapter 12 (the warm-up-then-cosine schedule, top-k filtering, the induction score)."""

import math

import numpy as np
import torch
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-12-1


def rates_warmup_from_zero(peak_lr, warmup_steps, total_steps, min_lr):
    out = []
    for s in range(total_steps):
        if s < warmup_steps:
            out.append(peak_lr * s / warmup_steps)
        else:
            p = (s - warmup_steps) / (total_steps - warmup_steps)
            out.append(min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * p)))
    return np.array(out)


def rates_to_zero(peak_lr, warmup_steps, total_steps, min_lr):
    s = np.arange(total_steps)
    warm = peak_lr * (s + 1) / max(warmup_steps, 1)
    p = (s - warmup_steps) / max(total_steps - warmup_steps, 1)
    return np.where(s < warmup_steps, warm, peak_lr * 0.5 * (1 + np.cos(np.pi * p)))


def rates_linear(peak_lr, warmup_steps, total_steps, min_lr):
    out = []
    for s in range(total_steps):
        if s < warmup_steps:
            out.append(peak_lr * (s + 1) / warmup_steps)
        else:
            out.append(peak_lr + (min_lr - peak_lr) * (s - warmup_steps) / (total_steps - warmup_steps))
    return np.array(out)


def rates_cosine_from_step_zero(peak_lr, warmup_steps, total_steps, min_lr):
    out = []
    for s in range(total_steps):
        if s < warmup_steps:
            out.append(peak_lr * (s + 1) / warmup_steps)
        else:
            out.append(min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))
    return np.array(out)


def rates_vectorised(peak_lr, warmup_steps, total_steps, min_lr):
    s = np.arange(total_steps, dtype=np.float64)
    p = np.clip((s - warmup_steps) / max(total_steps - warmup_steps, 1), 0.0, 1.0)
    decay = min_lr + (peak_lr - min_lr) * (np.cos(np.pi * p) + 1) / 2
    warm = peak_lr * (s + 1) / max(warmup_steps, 1)
    return np.where(s < warmup_steps, warm, decay)


def rates_in_torch(peak_lr, warmup_steps, total_steps, min_lr):
    rates = torch.empty(total_steps, dtype=torch.float64)
    for s in range(total_steps):
        if s < warmup_steps:
            rates[s] = peak_lr * (s + 1) / warmup_steps
        else:
            angle = math.pi * (s - warmup_steps) / (total_steps - warmup_steps)
            rates[s] = min_lr + 0.5 * (peak_lr - min_lr) * (1 + math.cos(angle))
    return rates


# --------------------------------------------------------------------------- ex-12-2


def top_k_zeros(logits, k):
    if k >= logits.shape[-1]:
        return logits
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return torch.where(logits >= kth, logits, torch.zeros_like(logits))


def top_k_keeps_k_plus_one(logits, k):
    if k >= logits.shape[-1] - 1:
        return logits
    kth = logits.sort(dim=-1, descending=True).values[..., k : k + 1]
    return torch.where(logits >= kth, logits, torch.full_like(logits, -math.inf))


def top_k_by_indices(logits, k):
    k = min(k, logits.shape[-1])
    idx = torch.topk(logits, k, dim=-1).indices
    out = torch.full_like(logits, -math.inf)
    return out.scatter(-1, idx, logits.gather(-1, idx))


def top_k_softmaxed(logits, k):
    if k >= logits.shape[-1]:
        return torch.softmax(logits, dim=-1)
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return torch.softmax(logits.masked_fill(logits < kth, -math.inf), dim=-1)


def top_k_by_sort(logits, k):
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1].unsqueeze(-1)
    return torch.where(logits < kth, torch.tensor(float("-inf"), dtype=logits.dtype), logits)


def top_k_in_numpy(logits, k):
    a = logits.numpy()
    if k >= a.shape[-1]:
        return torch.from_numpy(a.copy())
    kth = np.sort(a, axis=-1)[..., -k][..., None]
    return torch.from_numpy(np.where(a >= kth, a, -np.inf))


# --------------------------------------------------------------------------- ex-12-3


def induction_duplicate_token(weights):
    T = weights.shape[-1] // 2
    return torch.stack([weights[..., t, t - T] for t in range(T, 2 * T)], dim=-1).mean(-1)


def induction_previous_token(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)[..., -(weights.shape[-1] // 2) :].mean(-1)


def induction_summed(weights):
    T = weights.shape[-1] // 2
    return sum(weights[..., t, t - T + 1] for t in range(T, 2 * T))


def induction_transposed(weights):
    T = weights.shape[-1] // 2
    w = weights.transpose(-1, -2)
    return torch.stack([w[..., t, t - T + 1] for t in range(T, 2 * T)], dim=-1).mean(-1)


def induction_by_diagonal(weights):
    T = weights.shape[-1] // 2
    # entries (t, t - T + 1) lie on the diagonal offset -(T - 1); its last T are the second half's
    diag = torch.diagonal(weights, offset=-(T - 1), dim1=-2, dim2=-1)  # (..., T + 1)
    return diag[..., 1:].mean(-1)


def induction_loop(weights):
    T = weights.shape[-1] // 2
    total = torch.zeros(weights.shape[:-2], dtype=weights.dtype)
    for t in range(T, 2 * T):
        total = total + weights[..., t, t + 1 - T]
    return total / T


WRONG = [
    Wrong("ex-12-1", rates_warmup_from_zero, "warm-up starts at 0"),
    Wrong("ex-12-1", rates_to_zero, "decays to 0 instead of min_lr"),
    Wrong("ex-12-1", rates_linear, "linear decay"),
    Wrong("ex-12-1", rates_cosine_from_step_zero, "counted from step 0"),
    Wrong("ex-12-2", top_k_zeros, "set to 0 instead of -inf"),
    Wrong("ex-12-2", top_k_keeps_k_plus_one, "k + 1 logits kept"),
    Wrong("ex-12-2", top_k_by_indices, "ties with the k-th largest broken"),
    Wrong("ex-12-2", top_k_softmaxed, "probabilities returned"),
    Wrong("ex-12-3", induction_duplicate_token, "earlier occurrence itself"),
    Wrong("ex-12-3", induction_previous_token, "previous token"),
    Wrong("ex-12-3", induction_summed, "sum over the second half"),
    Wrong("ex-12-3", induction_transposed, "rows and columns swapped"),
]

RIGHT = [
    Right("ex-12-1", rates_vectorised),
    Right("ex-12-1", rates_in_torch),
    Right("ex-12-2", top_k_by_sort),
    Right("ex-12-2", top_k_in_numpy),
    Right("ex-12-3", induction_by_diagonal),
    Right("ex-12-3", induction_loop),
]
