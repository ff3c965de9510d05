"""Independent bank for chapter 07, written from the exercise text only (#25)."""

import math

import torch
from bank import Right, Wrong
from banks.scaffold import source_key_mask

from attnlib.chapters.vocab import BOS, EOS, PAD

# ---- ex-07-1 cross_attention ------------------------------------------------


def _proj(dec, enc, w_q, w_k, w_v):
    return dec @ w_q, enc @ w_k, enc @ w_v


def ca_causal(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    T, S = s.shape[-2:]
    allowed = source_mask[:, None, :] & torch.ones(T, S, dtype=torch.bool).tril()
    w = torch.nan_to_num(torch.softmax(s.masked_fill(~allowed, float("-inf")), -1))
    return w @ v, w


def ca_no_mask(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return w @ v, w


def ca_inverted(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = torch.nan_to_num(torch.softmax(s.masked_fill(source_mask[:, None], float("-inf")), -1))
    return w @ v, w


def ca_mask_queries(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = torch.softmax(s.masked_fill(~source_mask[:, :, None], float("-inf")), -1)  # (B, S, 1)
    w = torch.nan_to_num(w)
    return w @ v, w


def ca_scale_d_v(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    w = torch.softmax(s.masked_fill(~source_mask[:, None], float("-inf")), -1)
    return w @ v, w


def ca_softmax_targets(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = torch.softmax(s.masked_fill(~source_mask[:, None], float("-inf")), -2)
    w = torch.nan_to_num(w)
    return w @ v, w


def ca_minus_1e9(dec, enc, w_q, w_k, w_v, source_mask):
    # every source has a real token, so -1e9 gives the same zeros as -inf
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = torch.einsum("btd,bsd->bts", q, k) / k.shape[-1] ** 0.5
    w = s.masked_fill(~source_mask.unsqueeze(1), -1e9).softmax(-1)
    return torch.einsum("bts,bsv->btv", w, v), w


def ca_where(dec, enc, w_q, w_k, w_v, source_mask):
    q, k, v = _proj(dec, enc, w_q, w_k, w_v)
    s = torch.matmul(q, k.mT) / math.sqrt(w_k.shape[1])
    s = torch.where(source_mask[:, None, :], s, torch.tensor(float("-inf"), dtype=s.dtype))
    w = torch.softmax(s, dim=2)
    return torch.matmul(w, v), w


# ---- ex-07-2 source_mask ------------------------------------------------------


def sm_flat(src_lengths, src_len):
    return torch.arange(src_len)[None, :] < src_lengths[:, None]  # (B, S)


def sm_le(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] <= src_lengths[:, None])[:, None, None, :]


def sm_inverted(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] >= src_lengths[:, None])[:, None, None, :]


def sm_wrong_axes(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] < src_lengths[:, None])[:, None, :, None]  # (B, 1, S, 1)


def sm_float(src_lengths, src_len):
    return (torch.arange(src_len)[None, :] < src_lengths[:, None]).float()[:, None, None, :]


def sm_view(src_lengths, src_len):
    B = src_lengths.shape[0]
    pos = torch.arange(src_len, device=src_lengths.device).view(1, 1, 1, src_len)
    return pos < src_lengths.view(B, 1, 1, 1)


# ---- ex-07-3 greedy_decode ----------------------------------------------------


def _decode(
    step, state, B, max_len, *, feed_back=True, pad=True, keep_eos=True, bos_first=False, stop_early=False
):
    prev = torch.full((B,), BOS, dtype=torch.long)
    out = []
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        logits, state = step(prev, state)
        tok = logits.argmax(-1)
        if pad:
            if keep_eos:
                tok = torch.where(done, torch.full_like(tok, PAD), tok)
                done = done | (tok == EOS)
            else:
                done = done | (tok == EOS)
                tok = torch.where(done, torch.full_like(tok, PAD), tok)
        out.append(tok)
        if feed_back:
            prev = tok
        if stop_early and bool(done.all()):
            break
    tokens = torch.stack(out, 1)
    if bos_first:
        tokens = torch.cat([torch.full((B, 1), BOS, dtype=torch.long), tokens[:, :-1]], 1)
    return tokens


def gd_no_pad(step, state, batch_size, max_len):
    return _decode(step, state, batch_size, max_len, pad=False)


def gd_pad_eos(step, state, batch_size, max_len):
    return _decode(step, state, batch_size, max_len, keep_eos=False)


def gd_bos_every_step(step, state, batch_size, max_len):
    return _decode(step, state, batch_size, max_len, feed_back=False)


def gd_bos_in_output(step, state, batch_size, max_len):
    return _decode(step, state, batch_size, max_len, bos_first=True)


def gd_stop_early(step, state, batch_size, max_len):
    return _decode(step, state, batch_size, max_len, stop_early=True)  # fewer columns


def gd_right(step, state, batch_size, max_len):
    return _decode(step, state, batch_size, max_len)


def gd_post_hoc(step, state, batch_size, max_len):
    # raw argmax fed back (even after EOS), PAD written afterwards
    prev = torch.full((batch_size,), BOS, dtype=torch.long)
    cols = []
    for _ in range(max_len):
        logits, state = step(prev, state)
        prev = logits.argmax(dim=1)
        cols.append(prev)
    tokens = torch.stack(cols, dim=1)
    seen = (tokens == EOS).cumsum(1)
    after = (seen - (tokens == EOS).long()) > 0
    return tokens.masked_fill(after, PAD)


# ---- ex-07-4 decoder_masks ------------------------------------------------------


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def dm_no_causal(src_lengths, src_len, tgt_len):
    return torch.ones(tgt_len, tgt_len, dtype=torch.bool), source_key_mask(src_lengths, src_len)


def dm_swapped(src_lengths, src_len, tgt_len):
    return source_key_mask(src_lengths, src_len), _causal(tgt_len)


def dm_no_padding(src_lengths, src_len, tgt_len):
    B = src_lengths.shape[0]
    return _causal(tgt_len), torch.ones(B, 1, 1, src_len, dtype=torch.bool)


def dm_strict_causal(src_lengths, src_len, tgt_len):
    return _causal(tgt_len).tril(-1), source_key_mask(src_lengths, src_len)


def dm_upper(src_lengths, src_len, tgt_len):
    return _causal(tgt_len).T, source_key_mask(src_lengths, src_len)  # future, not past


def dm_arange(src_lengths, src_len, tgt_len):
    t = torch.arange(tgt_len)
    self_mask = t[:, None] >= t[None, :]
    cross = torch.arange(src_len).view(1, 1, 1, -1) < src_lengths.view(-1, 1, 1, 1)
    return self_mask, cross


# ---- ex-07-5 decoder_layer_forward -----------------------------------------------


def _layer(layer, y, memory, src_mask, *, pre=False, self_causal=True, cross_from_y=False, swap=False):
    if swap:
        a = layer.self_attn(y, y, y, attn_mask=src_mask)[0]
    else:
        a = layer.self_attn(y, y, y, is_causal=self_causal)[0]
    if pre:
        n = layer.norm1(y)
        a = layer.self_attn(n, n, n, is_causal=True)[0]
        x = y + a
        n = layer.norm2(x)
        x = x + layer.cross_attn(n, memory, memory, attn_mask=src_mask)[0]
        return x + layer.ffn(layer.norm3(x))
    x = layer.norm1(y + a)
    q = y if cross_from_y else x
    if swap:
        c = layer.cross_attn(q, memory, memory, is_causal=True)[0]
    else:
        c = layer.cross_attn(q, memory, memory, attn_mask=src_mask)[0]
    x = layer.norm2(x + c)
    return layer.norm3(x + layer.ffn(x))


def dl_pre_norm(layer, y, memory, src_mask):
    return _layer(layer, y, memory, src_mask, pre=True)


def dl_no_causal(layer, y, memory, src_mask):
    return _layer(layer, y, memory, src_mask, self_causal=False)


def dl_cross_query_from_input(layer, y, memory, src_mask):
    return _layer(layer, y, memory, src_mask, cross_from_y=True)


def dl_masks_swapped(layer, y, memory, src_mask):
    return _layer(layer, y, memory, src_mask, swap=True)


def dl_no_residual_ffn(layer, y, memory, src_mask):
    x = layer.norm1(y + layer.self_attn(y, y, y, is_causal=True)[0])
    x = layer.norm2(x + layer.cross_attn(x, memory, memory, attn_mask=src_mask)[0])
    return layer.norm3(layer.ffn(x))


def dl_explicit_causal_mask(layer, y, memory, src_mask):
    T = y.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()
    h = layer.norm1(y + layer.self_attn(y, y, y, attn_mask=causal)[0])
    h = layer.norm2(h + layer.cross_attn(h, memory, memory, attn_mask=src_mask)[0])
    return layer.norm3(h + layer.ffn(h))


WRONG = [
    Wrong("ex-07-1", ca_causal, "causal mask in cross attention"),
    Wrong("ex-07-1", ca_no_mask, "source padding not masked"),
    Wrong("ex-07-1", ca_inverted, "source mask inverted"),
    Wrong("ex-07-1", ca_mask_queries, "mask on target axis (B, S, 1)"),
    Wrong("ex-07-1", ca_scale_d_v, "scaled by sqrt(d_v)"),
    Wrong("ex-07-1", ca_softmax_targets, "softmax over targets"),
    Wrong("ex-07-2", sm_flat, "shape (B, S), not (B, 1, 1, S)"),
    Wrong("ex-07-2", sm_le, "<= off by one"),
    Wrong("ex-07-2", sm_inverted, "mask inverted"),
    Wrong("ex-07-2", sm_wrong_axes, "shape (B, 1, S, 1)"),
    Wrong("ex-07-2", sm_float, "float instead of bool"),
    Wrong("ex-07-3", gd_no_pad, "no PAD after EOS"),
    Wrong("ex-07-3", gd_pad_eos, "EOS replaced by PAD"),
    Wrong("ex-07-3", gd_bos_every_step, "BOS fed every step"),
    Wrong("ex-07-3", gd_bos_in_output, "BOS in output, shifted"),
    Wrong("ex-07-3", gd_stop_early, "stops early: fewer than max_len columns"),
    Wrong("ex-07-4", dm_no_causal, "self mask without causal part"),
    Wrong("ex-07-4", dm_swapped, "masks swapped"),
    Wrong("ex-07-4", dm_no_padding, "cross mask without padding"),
    Wrong("ex-07-4", dm_strict_causal, "strict causal, diagonal missing"),
    Wrong("ex-07-4", dm_upper, "causal mask transposed (future)"),
    Wrong("ex-07-5", dl_pre_norm, "pre-norm instead of post-norm"),
    Wrong("ex-07-5", dl_no_causal, "self-attention not causal"),
    Wrong("ex-07-5", dl_cross_query_from_input, "cross attention queries from y"),
    Wrong("ex-07-5", dl_masks_swapped, "masks swapped between attentions"),
    Wrong("ex-07-5", dl_no_residual_ffn, "FFN residual missing"),
]
RIGHT = [
    Right("ex-07-1", ca_minus_1e9),
    Right("ex-07-1", ca_where),
    Right("ex-07-2", sm_view),
    Right("ex-07-3", gd_right),
    Right("ex-07-3", gd_post_hoc),
    Right("ex-07-4", dm_arange),
    Right("ex-07-5", dl_explicit_causal_mask),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "ca_causal": "a causal mask in cross attention",
    "ca_no_mask": "the source mask is ignored",
    "ca_inverted": "the mask is inverted",
    "ca_mask_queries": None,
    "ca_scale_d_v": None,
    "ca_softmax_targets": None,
    "sm_flat": "shape (B, S)",
    "sm_le": "off by one",
    "sm_inverted": "the mask is inverted",
    "sm_wrong_axes": "shape (B, 1, S, 1)",
    "sm_float": "expected booleans",
    "gd_no_pad": "tokens after EOS are kept",
    "gd_pad_eos": "the EOS itself is replaced by PAD",
    "gd_bos_every_step": "feeds BOS",
    "gd_bos_in_output": None,
    "gd_stop_early": None,
    "dm_no_causal": "no causal mask",
    "dm_swapped": "wrong order",
    "dm_no_padding": None,
    "dm_strict_causal": None,
    "dm_upper": "the causal mask is transposed",
    "dl_pre_norm": "pre-norm",
    "dl_no_causal": "without the causal mask",
    "dl_cross_query_from_input": None,
    "dl_masks_swapped": None,
    "dl_no_residual_ffn": None,
}
