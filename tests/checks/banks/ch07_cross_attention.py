"""Answer bank of chapter 07 (cross attention, the source mask, greedy decoding, which mask where,
the decoder layer)."""

import math

import torch
from bank import NO_MISTAKE, Right, Wrong

from banks.scaffold import source_key_mask

BOS, EOS, PAD = 1, 2, 0

# --------------------------------------------------------------------------- ex-07-1


def _softmax_masked(scores, mask, dim=-1):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


def cross_roles_swapped(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q, k, v = encoder_states @ w_q, decoder_states @ w_k, decoder_states @ w_v
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def cross_causal(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v
    T, S = q.shape[1], k.shape[1]
    mask = source_mask[:, None, :] & torch.ones(T, S, dtype=torch.bool).tril()
    w = torch.nan_to_num(_softmax_masked(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), mask))
    return w @ v, w


def cross_no_mask(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def cross_unscaled(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v
    w = _softmax_masked(q @ k.transpose(-2, -1), source_mask[:, None, :])
    return w @ v, w


def cross_softmax_over_targets(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v
    w = _softmax_masked(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), source_mask[:, None, :], dim=-2)
    return w @ v, w


def cross_mask_after_softmax(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) * source_mask[:, None, :]
    return w @ v, w


def cross_by_sdpa(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    from torch.nn import functional

    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v
    w = _softmax_masked(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), source_mask[:, None, :])
    return functional.scaled_dot_product_attention(q, k, v, attn_mask=source_mask[:, None, :]), w


def cross_einsum_where(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):
    q = torch.einsum("btd,dk->btk", decoder_states, w_q)
    k = torch.einsum("bsd,dk->bsk", encoder_states, w_k)
    v = torch.einsum("bsd,dv->bsv", encoder_states, w_v)
    s = torch.einsum("btk,bsk->bts", q, k) / math.sqrt(w_q.shape[1])
    s = torch.where(source_mask.unsqueeze(1), s, torch.tensor(-math.inf, dtype=s.dtype))
    e = torch.exp(s - s.amax(dim=2, keepdim=True))
    w = e / e.sum(dim=2, keepdim=True)
    return torch.einsum("bts,bsv->btv", w, v), w


# --------------------------------------------------------------------------- ex-07-2


def source_mask_inverted(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] >= src_lengths[:, None])[:, None, None, :]


def source_mask_off_by_one(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] <= src_lengths[:, None])[:, None, None, :]


def source_mask_2d(src_lengths, src_len):
    return torch.arange(src_len)[None, :] < src_lengths[:, None]


def source_mask_3d(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] < src_lengths[:, None]).unsqueeze(1)


def source_mask_wrong_axes(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] < src_lengths[:, None])[:, None, :, None]


def source_mask_float(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] < src_lengths[:, None]).float()[:, None, None, :]


def source_mask_view(src_lengths, src_len):
    B = src_lengths.shape[0]
    return (torch.arange(src_len).view(1, -1) < src_lengths.view(-1, 1)).view(B, 1, 1, src_len)


def source_mask_loop(src_lengths, src_len):
    mask = torch.zeros(len(src_lengths), 1, 1, src_len, dtype=torch.bool)
    for b, n in enumerate(src_lengths.tolist()):
        mask[b, ..., :n] = True
    return mask


# --------------------------------------------------------------------------- ex-07-3


def _greedy(step, state, batch_size, max_len, *, pad_after=True, pad_eos=False, feed_bos=False, stop=False):
    prev = torch.full((batch_size,), BOS, dtype=torch.long)
    finished = torch.zeros(batch_size, dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, state = step(prev, state)
        token = logits.argmax(dim=-1)
        if pad_after:
            token = torch.where(finished, PAD, token)
        finished = finished | (token == EOS)
        out.append(torch.where(token == EOS, PAD, token) if pad_eos else token)
        prev = torch.full_like(token, BOS) if feed_bos else token
        if stop and finished.any():
            break
    return torch.stack(out, dim=1)


def greedy_no_pad(step, state, batch_size, max_len):
    return _greedy(step, state, batch_size, max_len, pad_after=False)


def greedy_eos_to_pad(step, state, batch_size, max_len):
    return _greedy(step, state, batch_size, max_len, pad_eos=True)


def greedy_feeds_bos(step, state, batch_size, max_len):
    return _greedy(step, state, batch_size, max_len, feed_bos=True)


def greedy_stops_batch(step, state, batch_size, max_len):
    return _greedy(step, state, batch_size, max_len, stop=True)


def greedy_python_lists(step, state, batch_size, max_len):
    rows = [[] for _ in range(batch_size)]
    done = [False] * batch_size
    prev = torch.tensor([BOS] * batch_size)
    for _ in range(max_len):
        logits, state = step(prev, state)
        best = logits.argmax(dim=-1).tolist()
        for b in range(batch_size):
            rows[b].append(PAD if done[b] else best[b])
            done[b] = done[b] or best[b] == EOS
        prev = torch.tensor([r[-1] for r in rows])
    return torch.tensor(rows)


# --------------------------------------------------------------------------- ex-07-4


def masks_causal_cross(src_lengths, src_len, tgt_len):
    causal = torch.ones(tgt_len, tgt_len, dtype=torch.bool).tril()
    causal_cross = torch.ones(tgt_len, src_len, dtype=torch.bool).tril()
    return causal, source_key_mask(src_lengths, src_len) & causal_cross


def masks_no_causal(src_lengths, src_len, tgt_len):
    return torch.ones(tgt_len, tgt_len, dtype=torch.bool), source_key_mask(src_lengths, src_len)


def masks_triu(src_lengths, src_len, tgt_len):
    return torch.ones(tgt_len, tgt_len, dtype=torch.bool).triu(), source_key_mask(src_lengths, src_len)


def masks_cross_2d(src_lengths, src_len, tgt_len):
    causal = torch.ones(tgt_len, tgt_len, dtype=torch.bool).tril()
    return causal, torch.arange(src_len)[None, :] < src_lengths[:, None]


def masks_swapped(src_lengths, src_len, tgt_len):
    return source_key_mask(src_lengths, src_len), torch.ones(tgt_len, tgt_len, dtype=torch.bool).tril()


def masks_arange(src_lengths, src_len, tgt_len):
    t = torch.arange(tgt_len)
    self_mask = t[None, :] <= t[:, None]  # key j <= query i
    cross = torch.stack([torch.arange(src_len) < n for n in src_lengths])  # (B, S)
    return self_mask, cross.view(len(src_lengths), 1, 1, src_len)


WRONG = [
    Wrong("ex-07-1", cross_roles_swapped, "roles swapped"),
    Wrong("ex-07-1", cross_causal, "causal mask"),
    Wrong("ex-07-1", cross_no_mask, "source mask is ignored"),
    Wrong("ex-07-1", cross_unscaled, "scaling"),
    Wrong("ex-07-1", cross_softmax_over_targets, "target axis"),
    Wrong("ex-07-1", cross_mask_after_softmax, "after the softmax"),
    Wrong("ex-07-1", cross_by_sdpa, "not allowed"),
    Wrong("ex-07-2", source_mask_inverted, "inverted"),
    Wrong("ex-07-2", source_mask_off_by_one, "off by one"),
    Wrong("ex-07-2", source_mask_2d, "shape (B, S)"),
    Wrong("ex-07-2", source_mask_3d, "shape (B, 1, S)"),
    Wrong("ex-07-2", source_mask_float, "expected booleans"),
    Wrong("ex-07-2", source_mask_wrong_axes, "on the target axis"),
    Wrong("ex-07-3", greedy_no_pad, "does not stop at EOS"),
    Wrong("ex-07-3", greedy_eos_to_pad, "EOS itself"),
    Wrong("ex-07-3", greedy_feeds_bos, "feeds BOS"),
    Wrong("ex-07-3", greedy_stops_batch, "whole batch"),
    Wrong("ex-07-4", masks_causal_cross, "causal mask in the cross attention"),
    Wrong("ex-07-4", masks_no_causal, "no causal mask"),
    Wrong("ex-07-4", masks_triu, "upper triangular"),
    Wrong("ex-07-4", masks_cross_2d, "(B, S)"),
    Wrong("ex-07-4", masks_swapped, "wrong order"),
]
RIGHT = [
    Right("ex-07-1", cross_einsum_where),
    Right("ex-07-2", source_mask_view),
    Right("ex-07-2", source_mask_loop),
    Right("ex-07-3", greedy_python_lists),
    Right("ex-07-4", masks_arange),
]


# --------------------------------------------------------------------------- ex-07-5 (decoder layer forward)


def layer_not_causal(layer, y, memory, src_mask):
    a, _ = layer.self_attn(y, y, y)  # every target reads every target
    y = layer.norm1(y + a)
    c, _ = layer.cross_attn(y, memory, memory, attn_mask=src_mask)
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))


def layer_causal_cross(layer, y, memory, src_mask):
    a, _ = layer.self_attn(y, y, y, is_causal=True)
    y = layer.norm1(y + a)
    c, _ = layer.cross_attn(y, memory, memory, attn_mask=src_mask, is_causal=True)
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))


def layer_no_source_mask(layer, y, memory, src_mask):
    a, _ = layer.self_attn(y, y, y, is_causal=True)
    y = layer.norm1(y + a)
    c, _ = layer.cross_attn(y, memory, memory)
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))


def layer_pre_norm(layer, y, memory, src_mask):
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, is_causal=True)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, attn_mask=src_mask)[0]
    return y + layer.ffn(layer.norm3(y))


def layer_no_residual(layer, y, memory, src_mask):
    y = layer.norm1(layer.self_attn(y, y, y, is_causal=True)[0])
    y = layer.norm2(layer.cross_attn(y, memory, memory, attn_mask=src_mask)[0])
    return layer.norm3(layer.ffn(y))


def layer_by_calling_it(layer, y, memory, src_mask):
    return layer(y, memory, src_mask)[0]


def layer_by_its_own_self_attend(layer, y, memory, src_mask):
    y = layer.self_attend(y, is_causal=True)  # the layer's own first sub-layer
    c, _ = layer.cross_attn(y, memory, memory, attn_mask=src_mask)
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))


def layer_explicit_masks(layer, y, memory, src_mask):
    """Right: the causal mask built by hand (bool, True = may attend), the mask squeezed and re-expanded."""
    T = y.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    a, _ = layer.self_attn(y, y, y, attn_mask=causal)
    y = layer.norm1(y + a)
    key_mask = src_mask[:, 0, 0, :]  # (B, S)
    c, _ = layer.cross_attn(y, memory, memory, attn_mask=key_mask[:, None, None, :])
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))


def layer_sublayers_in_a_loop(layer, y, memory, src_mask):
    """Right: the same steps, written with sub-layers in a loop."""
    subs = [
        (lambda x: layer.self_attn(x, x, x, is_causal=True)[0], layer.norm1),
        (lambda x: layer.cross_attn(x, memory, memory, attn_mask=src_mask)[0], layer.norm2),
        (layer.ffn, layer.norm3),
    ]
    for sublayer, norm in subs:
        y = norm(y + sublayer(y))
    return y


WRONG += [
    Wrong("ex-07-5", layer_not_causal, "without the causal mask"),
    Wrong("ex-07-5", layer_causal_cross, "causal mask on the cross attention"),
    Wrong("ex-07-5", layer_no_source_mask, "source mask is ignored"),
    Wrong("ex-07-5", layer_pre_norm, "pre-norm"),
    Wrong("ex-07-5", layer_no_residual, "residual connection is missing"),
    Wrong("ex-07-5", layer_by_calling_it, "not allowed"),
    Wrong("ex-07-5", layer_by_its_own_self_attend, "not allowed"),
]
RIGHT += [
    Right("ex-07-5", layer_explicit_masks),
    Right("ex-07-5", layer_sublayers_in_a_loop),
]

# --------------------------------------------------------------------------- issue 33 item 14


def masks_float_01(src_lengths, src_len, tgt_len):  # the right masks as 0.0/1.0 floats
    causal = torch.ones(tgt_len, tgt_len).tril()
    source = (torch.arange(src_len)[None, :] < src_lengths[:, None]).float()
    return causal, source[:, None, None, :]


WRONG += [Wrong("ex-07-4", masks_float_01, "expected booleans", not_named=NO_MISTAKE)]
