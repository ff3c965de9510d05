"""Answer bank of chapter 13 (the window mask with sinks, the linear-attention recurrence, MLA's
absorbed query, the cache bytes per token)."""

import numpy as np
import torch
import torch.nn.functional as F
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-13-1


def mask_blocked_true(n, window, sinks):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    visible = ((i - j >= 0) & (i - j < window)) | ((j < sinks) & (j <= i))
    return ~visible


def mask_window_plus_one(n, window, sinks):
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(max(0, i - window), i + 1):
            m[i, j] = True
        m[i, : min(sinks, i + 1)] = True
    return m


def mask_symmetric_band(n, window, sinks):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return ((i - j).abs() < window) | ((j < sinks) & (j <= i))


def mask_sink_columns_everywhere(n, window, sinks):
    m = torch.ones(n, n, dtype=torch.bool).tril() & ~torch.ones(n, n, dtype=torch.bool).tril(-window)
    m[:, :sinks] = True
    return m


def mask_without_sinks(n, window, sinks):
    ones = torch.ones(n, n, dtype=torch.bool)
    return ones.tril() & ~ones.tril(-window)


def mask_int_entries(n, window, sinks):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (((i - j >= 0) & (i - j < window)) | ((j < sinks) & (j <= i))).long()


def mask_by_loops(n, window, sinks):
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1):
            m[i, j] = i - j < window or j < sinks
    return m


def mask_with_tril(n, window, sinks):
    ones = torch.ones(n, n, dtype=torch.bool)
    band = ones.tril() & ~ones.tril(-window)  # 0 <= i - j < window
    sink_cols = torch.arange(n)[None, :] < sinks
    return band | (sink_cols & ones.tril())


def mask_in_numpy(n, window, sinks):
    i, j = np.ogrid[:n, :n]
    return torch.from_numpy(((j <= i) & ((i - j < window) | (j < sinks))).copy())


# --------------------------------------------------------------------------- ex-13-2


def phi(x):
    return F.elu(x) + 1


def recurrence_unnormalised(query, key, value):
    pq, pk = phi(query), phi(key)
    S = torch.zeros(*query.shape[:-2], query.shape[-1], value.shape[-1], dtype=query.dtype)
    out = []
    for i in range(query.shape[-2]):
        S = S + pk[..., i, :, None] * value[..., i, None, :]
        out.append(torch.einsum("...d,...de->...e", pq[..., i, :], S))
    return torch.stack(out, dim=-2)


def recurrence_whole_sequence_state(query, key, value):
    pq, pk = phi(query), phi(key)
    S = torch.einsum("...nd,...ne->...de", pk, value)
    z = pk.sum(dim=-2)
    out = [
        torch.einsum("...d,...de->...e", pq[..., i, :], S) / (pq[..., i, :] * z).sum(-1, keepdim=True)
        for i in range(query.shape[-2])
    ]
    return torch.stack(out, dim=-2)


def recurrence_read_then_write(query, key, value):
    pq, pk = phi(query), phi(key)
    S = torch.zeros(*query.shape[:-2], query.shape[-1], value.shape[-1], dtype=query.dtype)
    z = torch.zeros_like(query[..., 0, :])
    out = []
    for i in range(query.shape[-2]):
        q = pq[..., i, :]
        out.append(torch.einsum("...d,...de->...e", q, S) / (q * z).sum(-1, keepdim=True))
        S = S + pk[..., i, :, None] * value[..., i, None, :]
        z = z + pk[..., i, :]
    return torch.stack(out, dim=-2)


def recurrence_raw_queries(query, key, value):
    S = torch.zeros(*query.shape[:-2], query.shape[-1], value.shape[-1], dtype=query.dtype)
    z = torch.zeros_like(query[..., 0, :])
    out = []
    for i in range(query.shape[-2]):
        S = S + key[..., i, :, None] * value[..., i, None, :]
        z = z + key[..., i, :]
        q = query[..., i, :]
        out.append(torch.einsum("...d,...de->...e", q, S) / (q * z).sum(-1, keepdim=True))
    return torch.stack(out, dim=-2)


def recurrence_relu(query, key, value):
    pq, pk = F.relu(query), F.relu(key)
    scores = (pq @ pk.transpose(-1, -2)).tril()
    return (scores @ value) / scores.sum(-1, keepdim=True)


def recurrence_cumsum(query, key, value):
    pq, pk = phi(query), phi(key)
    S = torch.cumsum(pk[..., :, None] * value[..., None, :], dim=-3)  # (..., n, d, dv)
    z = torch.cumsum(pk, dim=-2)  # (..., n, d)
    num = torch.einsum("...nd,...nde->...ne", pq, S)
    return num / (pq * z).sum(-1, keepdim=True)


def recurrence_parallel_masked(query, key, value):
    pq, pk = phi(query), phi(key)
    n = query.shape[-2]
    scores = pq @ pk.transpose(-1, -2) * torch.ones(n, n, dtype=query.dtype).tril()
    return (scores @ value) / scores.sum(-1, keepdim=True)


# --------------------------------------------------------------------------- ex-13-3


def absorbed_untransposed(x, w_q, w_uk):
    q = torch.einsum("bsd,hde->bhse", x, w_q)
    return torch.einsum("bhse,hec->bhsc", q, w_uk)


def absorbed_forgotten(x, w_q, w_uk):
    return torch.stack([x @ w_q[h] for h in range(w_q.shape[0])], dim=1)


def absorbed_scaled(x, w_q, w_uk):
    q = torch.einsum("bsd,hde->bhse", x, w_q) / w_q.shape[-1] ** 0.5
    return q @ w_uk.transpose(-1, -2)


def absorbed_heads_summed(x, w_q, w_uk):
    return sum(x @ w_q[h] @ w_uk[h].T for h in range(w_q.shape[0]))


def absorbed_heads_last(x, w_q, w_uk):
    return torch.einsum("bsd,hde,hce->bshc", x, w_q, w_uk)


def absorbed_matrix_first(x, w_q, w_uk):
    absorbed = w_q @ w_uk.transpose(-1, -2)  # (H, D, d_c): precomputed once per layer
    return torch.einsum("bsd,hdc->bhsc", x, absorbed)


def absorbed_per_head_loop(x, w_q, w_uk):
    heads = []
    for h in range(w_q.shape[0]):
        heads.append((x @ w_q[h]) @ w_uk[h].transpose(0, 1))
    return torch.stack(heads, dim=1)


# --------------------------------------------------------------------------- ex-13-4


def bytes_keys_only(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    heads = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}.get(kind)
    numbers = heads * head_dim if heads is not None else latent_dim + rope_dim
    return numbers * layers * bytes_per_element


def bytes_gqa_all_heads(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    if kind == "mla":
        numbers = latent_dim + rope_dim
    elif kind == "mqa":
        numbers = 2 * head_dim
    else:
        numbers = 2 * num_heads * head_dim
    return numbers * layers * bytes_per_element


def bytes_mla_latent_only(
    kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element
):
    heads = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}.get(kind)
    numbers = 2 * heads * head_dim if heads is not None else latent_dim
    return numbers * layers * bytes_per_element


def bytes_mla_rope_per_head(
    kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element
):
    heads = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}.get(kind)
    numbers = 2 * heads * head_dim if heads is not None else latent_dim + num_heads * rope_dim
    return numbers * layers * bytes_per_element


def bytes_mla_twice(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    heads = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}.get(kind)
    numbers = 2 * heads * head_dim if heads is not None else 2 * (latent_dim + rope_dim)
    return numbers * layers * bytes_per_element


def bytes_one_layer(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    heads = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}.get(kind)
    numbers = 2 * heads * head_dim if heads is not None else latent_dim + rope_dim
    return numbers * bytes_per_element


def bytes_elements(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    heads = {"mha": num_heads, "mqa": 1, "gqa": kv_heads}.get(kind)
    numbers = 2 * heads * head_dim if heads is not None else latent_dim + rope_dim
    return numbers * layers


def bytes_by_table(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    per_layer = {
        "mha": lambda: 2 * num_heads * head_dim,
        "mqa": lambda: 2 * head_dim,
        "gqa": lambda: 2 * kv_heads * head_dim,
        "mla": lambda: latent_dim + rope_dim,
    }[kind]()
    return int(per_layer * layers * bytes_per_element)


def bytes_as_numpy_int(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):
    if kind == "mla":
        shape = (layers, latent_dim + rope_dim)
    else:
        groups = num_heads if kind == "mha" else 1 if kind == "mqa" else kv_heads
        shape = (layers, 2, groups, head_dim)
    return np.prod(shape, dtype=np.int64) * bytes_per_element


WRONG = [
    Wrong("ex-13-1", mask_blocked_true, "inverted"),
    Wrong("ex-13-1", mask_window_plus_one, "window + 1 keys"),
    Wrong("ex-13-1", mask_symmetric_band, "queries see later keys"),
    Wrong("ex-13-1", mask_sink_columns_everywhere, "sinks are seen by every query"),
    Wrong("ex-13-1", mask_without_sinks, "sinks are left out"),
    Wrong("ex-13-1", mask_int_entries, "boolean"),
    Wrong("ex-13-2", recurrence_unnormalised, "no normaliser"),
    Wrong("ex-13-2", recurrence_whole_sequence_state, "not causal"),
    Wrong("ex-13-2", recurrence_read_then_write, "read before position i is added"),
    Wrong("ex-13-2", recurrence_raw_queries, "no feature map"),
    Wrong("ex-13-2", recurrence_relu, "relu instead of elu"),
    Wrong("ex-13-3", absorbed_untransposed, "not transposed"),
    Wrong("ex-13-3", absorbed_forgotten, "without the absorbed up-projection"),
    Wrong("ex-13-3", absorbed_scaled, "scaled by 1/sqrt(d_h)"),
    Wrong("ex-13-3", absorbed_heads_summed, "heads are summed"),
    Wrong("ex-13-3", absorbed_heads_last, "(B, s, H, d_c)"),
    Wrong("ex-13-4", bytes_keys_only, "keys are counted but not the values"),
    Wrong("ex-13-4", bytes_gqa_all_heads, "GQA counted with every query head"),
    Wrong("ex-13-4", bytes_mla_latent_only, "rotary key is left out"),
    Wrong("ex-13-4", bytes_mla_rope_per_head, "rotary key counted once per head"),
    Wrong("ex-13-4", bytes_mla_twice, "latent counted twice"),
    Wrong("ex-13-4", bytes_one_layer, "layers are left out"),
    Wrong("ex-13-4", bytes_elements, "elements instead of bytes"),
]

RIGHT = [
    Right("ex-13-1", mask_by_loops),
    Right("ex-13-1", mask_with_tril),
    Right("ex-13-1", mask_in_numpy),
    Right("ex-13-2", recurrence_cumsum),
    Right("ex-13-2", recurrence_parallel_masked),
    Right("ex-13-3", absorbed_matrix_first),
    Right("ex-13-3", absorbed_per_head_loop),
    Right("ex-13-4", bytes_by_table),
    Right("ex-13-4", bytes_as_numpy_int),
]
