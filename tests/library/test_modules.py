"""MultiHeadAttention against torch.nn.MultiheadAttention, and AdditiveAttention.

Tolerances: see tests/library/helpers_numerics.py (float64 atol=rtol=1e-12). The torch
module is float64 and in eval mode; weights are copied with `from_torch`.
torch's `key_padding_mask` and bool `attn_mask` mean True = IGNORE, the
opposite of attnlib, and torch defaults to batch_first=False.
"""

import pytest
import torch
from helpers_numerics import assert_close64, bool_to_float_mask, randn
from torch import nn

import attnlib.modules as modules
from attnlib.masks import causal_mask, padding_mask
from attnlib.modules import (
    AdditiveAttention,
    MultiHeadAttention,
    merge_heads,
    parameter_count,
    split_heads,
)

# (B, h, L, S, E, kdim, vdim, bias)
CONFIGS = [
    (1, 1, 3, 5, 4, None, None, True),
    (2, 2, 4, 3, 8, None, None, False),
    (3, 4, 5, 6, 8, 5, 3, True),
    (2, 4, 2, 4, 4, 6, None, False),
]


def torch_mha(E, h, kdim, vdim, bias, batch_first, seed):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, h, bias=bias, kdim=kdim, vdim=vdim, batch_first=batch_first)
    mha = mha.double().eval()
    if bias:  # torch initialises biases to zero; make them matter
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha


def run_torch(mha, q, k, v, batch_first, **kw):
    if not batch_first:  # torch's default layout is (L, B, E)
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    out, w = mha(q, k, v, **kw)
    if not batch_first:
        out = out.transpose(0, 1)
    return out, w


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("masking", ["none", "key", "causal", "key+attn", "per_head", "float"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_matches_torch_mha(config, masking, batch_first):
    B, h, L, S, E, kdim, vdim, bias = config
    mha = torch_mha(E, h, kdim, vdim, bias, batch_first, seed=B * 10 + h)
    ours = MultiHeadAttention.from_torch(mha)
    q = randn(B, L, E, seed=1)
    k = randn(B, S, kdim or E, seed=2)
    v = randn(B, S, vdim or E, seed=3)
    # right padding with at least one real key, so torch never meets a fully masked row
    key_mask = padding_mask([max(1, S - b) for b in range(B)], max_len=S)  # (B, S)
    gen = torch.Generator().manual_seed(4)
    our_kw, torch_kw = {}, {}
    if masking in ("key", "key+attn", "per_head"):
        our_kw["key_mask"] = key_mask
        torch_kw["key_padding_mask"] = ~key_mask
    if masking == "causal":
        our_kw["is_causal"] = True
        torch_kw["attn_mask"] = ~causal_mask(L, S)
    if masking == "key+attn":
        attn = torch.rand(L, S, generator=gen) > 0.3
        attn[:, 0] = True
        our_kw["attn_mask"] = attn
        torch_kw["attn_mask"] = ~attn
    if masking == "per_head":
        attn = torch.rand(B, h, L, S, generator=gen) > 0.3
        attn[..., 0] = True
        our_kw["attn_mask"] = attn
        torch_kw["attn_mask"] = ~attn.reshape(B * h, L, S)  # torch wants (B*h, L, S)
    if masking == "float":
        bias_mask = randn(L, S, seed=5)
        our_kw["attn_mask"] = bias_mask
        torch_kw["attn_mask"] = bias_mask

    for average in (True, False):
        ref_out, ref_w = run_torch(
            mha, q, k, v, batch_first, need_weights=True, average_attn_weights=average, **torch_kw
        )
        out, w = ours(q, k, v, need_weights=True, average_attn_weights=average, **our_kw)
        assert out.shape == (B, L, E)
        assert w.shape == ((B, L, S) if average else (B, h, L, S))
        assert_close64(out, ref_out)
        assert_close64(w, ref_w)
    out, w = ours(q, k, v, **our_kw)
    assert w is None
    assert_close64(out, ref_out)


def test_key_mask_with_float_attn_mask():
    mha = torch_mha(8, 2, None, None, True, True, seed=0)
    ours = MultiHeadAttention.from_torch(mha)
    x = randn(2, 4, 8, seed=6)
    key_mask = padding_mask([4, 2])
    attn = randn(4, 4, seed=7)
    out, w = ours(x, x, x, attn_mask=attn, key_mask=key_mask, need_weights=True)
    # a float key_padding_mask: torch deprecates mixing a bool one with a float attn_mask
    ref_out, ref_w = mha(x, x, x, attn_mask=attn, key_padding_mask=bool_to_float_mask(key_mask))
    assert_close64(out, ref_out)
    assert_close64(w, ref_w)


def test_fully_masked_row_gives_zeros_not_nan():
    ours = MultiHeadAttention(8, 2).double()
    x = randn(2, 3, 8, seed=8)
    key_mask = padding_mask([3, 0])  # the second sequence has no real token
    out, w = ours(x, x, x, key_mask=key_mask, need_weights=True)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.equal(w[1], torch.zeros(3, 3, dtype=torch.float64))
    # zero weights -> zero attention output -> only the output bias is left
    assert_close64(out[1], ours.out_proj.bias.expand(3, 8))


@pytest.mark.parametrize(
    "E,h,bias,kdim,vdim", [(8, 2, True, None, None), (8, 4, False, None, None), (6, 3, True, 4, 5)]
)
def test_parameter_count(E, h, bias, kdim, vdim):
    ref = nn.MultiheadAttention(E, h, bias=bias, kdim=kdim, vdim=vdim)
    expected = sum(p.numel() for p in ref.parameters())
    ours = MultiHeadAttention(E, h, bias=bias, kdim=kdim, vdim=vdim)
    assert sum(p.numel() for p in ours.parameters()) == expected
    assert parameter_count(E, h, bias=bias, kdim=kdim, vdim=vdim) == expected


def test_split_merge_heads_inverse():
    x = randn(2, 5, 12, seed=9)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    # head i owns features i*d:(i+1)*d, as in torch's MultiheadAttention
    assert torch.equal(heads[:, 1], x[..., 4:8])
    assert torch.equal(merge_heads(heads), x)
    y = randn(2, 3, 5, 4, seed=10)
    assert torch.equal(split_heads(merge_heads(y), 3), y)
    with pytest.raises(ValueError, match=r"\(2, 5, 12\).*num_heads=5"):
        split_heads(x, 5)


def test_mha_errors():
    with pytest.raises(ValueError, match="embed_dim=10.*num_heads=3"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(4, 8\)"):
        mha(randn(4, 8).float(), randn(2, 4, 8).float(), randn(2, 4, 8).float())
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(2, 5\)"):
        mha(x, x, x, key_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(2, 2, 4, 4\)"):
        mha(x, x, x, attn_mask=torch.ones(3, 3, dtype=torch.bool))


def additive_reference(att, query, key, value, key_mask):
    """Loop version of Bahdanau attention with torch ops."""
    B, L, _ = query.shape
    S = key.shape[1]
    scores = torch.empty(B, L, S, dtype=query.dtype)
    for b in range(B):
        for i in range(L):
            for j in range(S):
                hidden = torch.tanh(att.w_query(query[b, i]) + att.w_key(key[b, j]))
                scores[b, i, j] = att.v(hidden)[0]
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))
    weights = torch.softmax(scores, -1)
    return weights @ value, weights


def test_additive_attention_matches_loop(monkeypatch):
    # the module must be built from the functions (their kernels: it checks its inputs itself,
    # once per call, instead of once per function): spy on both
    calls = []

    def spy(name):
        fn = getattr(modules, name)

        def wrapper(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)

        return wrapper

    for name in ("_additive_scores", "_masked_softmax"):
        monkeypatch.setattr(modules, name, spy(name))
    torch.manual_seed(0)
    att = AdditiveAttention(query_dim=3, key_dim=5, hidden_dim=4).double()
    q, k, v = randn(2, 3, 3, seed=11), randn(2, 4, 5, seed=12), randn(2, 4, 6, seed=13)
    key_mask = padding_mask([4, 2])
    ctx, w = att(q, k, v, key_mask=key_mask)
    ref_ctx, ref_w = additive_reference(att, q, k, v, key_mask)
    assert ctx.shape == (2, 3, 6) and w.shape == (2, 3, 4)
    assert_close64(ctx, ref_ctx)
    assert_close64(w, ref_w)
    assert torch.all(w[1, :, 2:] == 0)
    assert calls == ["_additive_scores", "_masked_softmax"]
    # value defaults to key; one decoder step (B, E_q)
    ctx1, w1 = att(q[:, 0], k)
    ref_ctx1, ref_w1 = additive_reference(att, q[:, :1], k, k, None)
    assert ctx1.shape == (2, 5) and w1.shape == (2, 4)
    assert_close64(ctx1, ref_ctx1[:, 0])
    assert_close64(w1, ref_w1[:, 0])


def test_additive_attention_errors():
    att = AdditiveAttention(3, 5, 4)
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(2, 3\)"):
        att(torch.randn(2, 3), torch.randn(2, 4, 5), key_mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(3,\)"):
        att(torch.randn(3), torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match=r"\(2, 4, 5\).*\(2, 3, 5\)"):
        att(torch.randn(2, 3), torch.randn(2, 4, 5), torch.randn(2, 3, 5))


@pytest.mark.parametrize("config", CONFIGS)
def test_to_torch_computes_the_same_function(config):
    """to_torch() is the inverse of from_torch(): float64, masks translated (torch: True = ignore)."""
    B, h, L, S, E, kdim, vdim, bias = config
    torch.manual_seed(B + h)
    ours = MultiHeadAttention(E, h, bias=bias, kdim=kdim, vdim=vdim).double()
    if bias:
        with torch.no_grad():
            ours.out_proj.bias.normal_()
            ours.k_proj.bias.normal_()
    theirs = ours.to_torch()
    assert isinstance(theirs, nn.MultiheadAttention) and theirs.batch_first
    assert theirs.dropout == 0.0 and next(theirs.parameters()).dtype == torch.float64
    q, k, v = randn(B, L, E, seed=1), randn(B, S, kdim or E, seed=2), randn(B, S, vdim or E, seed=3)
    key_mask = padding_mask([max(1, S - b) for b in range(B)], S)  # every row keeps a key
    allowed = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - 1)
    float_mask = randn(L, S, seed=4)
    out, w = ours(q, k, v, attn_mask=allowed, key_mask=key_mask, need_weights=True)
    ref_out, ref_w = theirs(q, k, v, attn_mask=~allowed, key_padding_mask=~key_mask)
    assert_close64(out, ref_out)
    assert_close64(w, ref_w)
    out_f, _ = ours(q, k, v, attn_mask=float_mask)
    assert_close64(out_f, theirs(q, k, v, attn_mask=float_mask)[0])
    back = MultiHeadAttention.from_torch(theirs)
    for (name, a), b in zip(ours.state_dict().items(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
