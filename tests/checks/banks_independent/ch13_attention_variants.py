"""Bank for chapter 13, written from the exercise notebook's text (its author also wrote the checks:
not independent in the sense of #25; the answers follow the text's wording, not the checks')."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from bank import Right, Wrong

# ---- ex-13-1 window_mask ----------------------------------------------------


def wm_window_excludes_self(n, window, sinks):
    # reads "keys i - window + 1 .. i" as the window keys *before* the query, plus the query
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j <= i) & ((i - j <= window) | (j < sinks))


def wm_sinks_over_window_only(n, window, sinks):
    # the sinks counted among the first positions of each row only when outside the window
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    in_window = (i - j >= 0) & (i - j < window)
    return in_window | ((j < sinks) & (i - j >= window))  # same as the answer: kept as a right one


def wm_sink_rows_not_columns(n, window, sinks):
    # the first `sinks` *queries* see everything before them instead of the first keys being seen
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j <= i) & ((i - j < window) | (i < sinks))


def wm_float_mask(n, window, sinks):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = (j <= i) & ((i - j < window) | (j < sinks))
    return torch.where(allowed, 0.0, -math.inf)


def wm_to_the_letter(n, window, sinks):
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(max(0, i - window + 1), i + 1):  # the window
            mask[i, j] = True
        for j in range(min(sinks, n)):  # the sinks, at or before the query
            if j <= i:
                mask[i, j] = True
    return mask


# ---- ex-13-2 linear_attention_recurrence ------------------------------------


def lar_softmax_weights(query, key, value):
    # ordinary causal softmax attention, not linear attention
    n = query.shape[-2]
    scores = query @ key.transpose(-1, -2)
    scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    return torch.softmax(scores, dim=-1) @ value


def lar_mean_of_state(query, key, value):
    # divides by the number of positions instead of phi(q_i) . z_i
    pq, pk = F.elu(query) + 1, F.elu(key) + 1
    out, S = [], 0
    for i in range(query.shape[-2]):
        S = S + pk[..., i, :, None] * value[..., i, None, :]
        out.append((pq[..., i, None, :] @ S)[..., 0, :] / (i + 1))
    return torch.stack(out, dim=-2)


def lar_future_included(query, key, value):
    # the state of the whole sequence, built first, read by every query
    pq, pk = F.elu(query) + 1, F.elu(key) + 1
    S = pk.transpose(-1, -2) @ value
    z = pk.sum(-2, keepdim=True)
    return (pq @ S) / (pq * z).sum(-1, keepdim=True)


def lar_to_the_letter(query, key, value):
    phi_q, phi_k = F.elu(query) + 1, F.elu(key) + 1
    n, d = query.shape[-2:]
    S = torch.zeros(*query.shape[:-2], d, value.shape[-1], dtype=query.dtype)
    z = torch.zeros(*query.shape[:-2], d, dtype=query.dtype)
    outs = []
    for i in range(n):
        S = S + torch.einsum("...d,...e->...de", phi_k[..., i, :], value[..., i, :])
        z = z + phi_k[..., i, :]
        num = torch.einsum("...d,...de->...e", phi_q[..., i, :], S)
        den = torch.einsum("...d,...d->...", phi_q[..., i, :], z)[..., None]
        outs.append(num / den)
    return torch.stack(outs, dim=-2)


# ---- ex-13-3 absorbed_query -------------------------------------------------


def aq_up_projected_latent(x, w_q, w_uk):
    # multiplies by W_uk itself (d_c, d_h) from the left of the query's transpose: shapes only
    # line up when d_c == d_h
    q = torch.einsum("bsd,hde->bhse", x, w_q)
    return torch.einsum("hce,bhsc->bhse", w_uk, q) if w_uk.shape[-1] == w_uk.shape[-2] else q


def aq_first_head_everywhere(x, w_q, w_uk):
    # one absorbed matrix (head 0's) for every head
    q = torch.einsum("bsd,hde->bhse", x, w_q)
    return q @ w_uk[0].T


def aq_divided_by_sqrt_dc(x, w_q, w_uk):
    q = torch.einsum("bsd,hde->bhse", x, w_q)
    return q @ w_uk.transpose(-1, -2) / math.sqrt(w_uk.shape[-2])


def aq_einsum_once(x, w_q, w_uk):
    return torch.einsum("bsd,hde,hce->bhsc", x, w_q, w_uk)


# ---- ex-13-4 kv_cache_bytes -------------------------------------------------


def kb_in_bits(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    numbers = {
        "mha": lambda: 2 * num_heads * head_dim,
        "mqa": lambda: 2 * head_dim,
        "gqa": lambda: 2 * kv_heads * head_dim,
        "mla": lambda: latent_dim + rope_dim,
    }[kind]()
    return numbers * layers * bytes_per_element * 8


def kb_mqa_as_two_heads(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    # MQA read as "a key head and a value head per query head pair"
    numbers = {
        "mha": lambda: 2 * num_heads * head_dim,
        "mqa": lambda: num_heads * head_dim,
        "gqa": lambda: 2 * kv_heads * head_dim,
        "mla": lambda: latent_dim + rope_dim,
    }[kind]()
    return numbers * layers * bytes_per_element


def kb_mla_with_values(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    # MLA caches the latent and the rotary key, plus (wrongly) the values of every head
    numbers = {
        "mha": lambda: 2 * num_heads * head_dim,
        "mqa": lambda: 2 * head_dim,
        "gqa": lambda: 2 * kv_heads * head_dim,
        "mla": lambda: latent_dim + rope_dim + num_heads * head_dim,
    }[kind]()
    return numbers * layers * bytes_per_element


def kb_float_result(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    # right numbers, returned as a float (the text asks for an int)
    numbers = {
        "mha": 2 * num_heads * head_dim,
        "mqa": 2 * head_dim,
        "gqa": 2 * (kv_heads or 0) * head_dim,
        "mla": (latent_dim or 0) + (rope_dim or 0),
    }[kind]
    return numbers * layers * bytes_per_element / 1.0


def kb_groups(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    if kind == "mla":
        return (latent_dim + rope_dim) * layers * bytes_per_element
    groups = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}[kind]
    return int(np.int64(2) * groups * head_dim * layers * bytes_per_element)


WRONG = [
    Wrong("ex-13-1", wm_window_excludes_self, "window + 1 keys"),
    Wrong("ex-13-1", wm_sink_rows_not_columns, "the first queries see everything"),
    Wrong("ex-13-1", wm_float_mask, "a float mask"),
    Wrong("ex-13-2", lar_softmax_weights, "softmax attention"),
    Wrong("ex-13-2", lar_mean_of_state, "divides by the count"),
    Wrong("ex-13-2", lar_future_included, "future keys included"),
    Wrong("ex-13-3", aq_up_projected_latent, "W_uk on the wrong side"),
    Wrong("ex-13-3", aq_first_head_everywhere, "head 0's W_uk for every head"),
    Wrong("ex-13-3", aq_divided_by_sqrt_dc, "scaled"),
    Wrong("ex-13-4", kb_in_bits, "bits"),
    Wrong("ex-13-4", kb_mqa_as_two_heads, "MQA misread"),
    Wrong("ex-13-4", kb_mla_with_values, "MLA caches the values too"),
    Wrong("ex-13-4", kb_float_result, "a float"),
]

RIGHT = [
    Right("ex-13-1", wm_to_the_letter),
    Right("ex-13-1", wm_sinks_over_window_only),
    Right("ex-13-2", lar_to_the_letter),
    Right("ex-13-3", aq_einsum_once),
    Right("ex-13-4", kb_groups),
]

NAMED = {
    "wm_window_excludes_self": "window + 1 keys",
    "wm_sink_rows_not_columns": None,
    "wm_float_mask": "expected booleans",
    "lar_softmax_weights": None,
    "lar_mean_of_state": None,
    "lar_future_included": "not causal",
    "aq_up_projected_latent": "not transposed",
    "aq_first_head_everywhere": None,
    "aq_divided_by_sqrt_dc": "scaled by 1/sqrt",
    "kb_in_bits": "bits instead of bytes",
    "kb_mqa_as_two_heads": None,
    "kb_mla_with_values": None,
    "kb_float_result": "expected integers",
}
