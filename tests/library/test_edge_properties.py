"""Property tests (hypothesis) on the inputs users also send: every public function of
attnlib's core (functional, attention, scores, masks, modules, numpy, utils) over

* shapes with sizes 0 and 1 (no keys S = 0, no queries L = 0, embedding size E = 0),
* dtypes float16, bfloat16, float32, float64 (NumPy: float16, float32, float64),
* masks with fully masked rows, bool and float,
* NaN, +inf and -inf entries,

either agrees with a float64 reference written with torch ops (torch.softmax,
torch.logsumexp, matmul, nn.MultiheadAttention) within a dtype-fit tolerance, or
raises a ValueError/TypeError whose message names the argument. No other
exception type may escape (test_no_other_exception_escapes).

Settings: max_examples=EXAMPLES (60) per property (600 for the fuzz test), derandomize=True
and database=None (CI repeats the very same examples), deadline=None (a loaded 2-core
machine must not fail a test). About 10 s of CPU in all.

Tolerance: the reference runs in float64 on the inputs already rounded to the
tested dtype, so only attnlib's internal rounding is measured:
atol = rtol = 8 * eps(dtype) * (1 + largest |score|) * (1 + largest |value|),
where eps is the dtype's machine epsilon (float16 and bfloat16 compute in
float32 and only round the result, so their eps is the output rounding).
The one deliberate difference from torch, checked here too: a fully masked
(all -inf) row gives zero weights (torch: NaN), -inf log-probabilities and -inf logsumexp.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnlib
import attnlib.numpy as anp
from attnlib import masks, modules, scores
from attnlib.utils import seed_everything

EXAMPLES = 60
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,  # no .hypothesis example database: every run draws the very same examples
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NP_DTYPES = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}
SPECIALS = [float("nan"), float("inf"), float("-inf")]

dtypes = st.sampled_from(DTYPES)
sizes = st.integers(0, 3)
seeds = st.integers(0, 2**16)


def eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def make(seed: int, shape, dtype, magnitude=1.0, specials=()) -> torch.Tensor:
    """Seeded normal tensor rounded to `dtype`, with `specials` (flat index, value) written in."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(tuple(shape), dtype=torch.float64, generator=gen) * magnitude).to(dtype)
    flat = x.view(-1)
    for index, value in specials:
        if x.numel():
            flat[index % x.numel()] = value
    return x


def specials_strategy():
    return st.lists(st.tuples(st.integers(0, 100), st.sampled_from(SPECIALS)), max_size=2)


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> None:
    """`actual` (any dtype) against the float64 `expected`; NaN must sit where the reference has NaN."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual.double(), expected, atol=tol, rtol=tol, equal_nan=True)


def all_neg_inf(x64: torch.Tensor, dim: int) -> torch.Tensor:
    """Slices along `dim` that are entirely -inf (non-empty), kept with size 1."""
    if x64.dim() == 0:
        return (x64 == -math.inf).reshape(())
    return (x64 == -math.inf).all(dim=dim, keepdim=True) & (x64.shape[dim] > 0)


# --------------------------------------------------------------------------
# the softmax family
# --------------------------------------------------------------------------
@SETTINGS
@given(
    dtype=dtypes,
    shape=st.lists(sizes, min_size=0, max_size=3),
    seed=seeds,
    magnitude=st.sampled_from([1.0, 30.0]),
    specials=specials_strategy(),
    masked_rows=st.booleans(),
    data=st.data(),
)
def test_softmax_family_matches_torch(dtype, shape, seed, magnitude, specials, masked_rows, data):
    x = make(seed, shape, dtype, magnitude, specials)
    ndim = max(x.dim(), 1)
    dim = data.draw(st.integers(-ndim, ndim - 1), label="dim")
    if masked_rows and x.dim() >= 1 and x.numel():
        x.select(dim, 0).fill_(-math.inf) if x.dim() > 1 else x.fill_(-math.inf)
    x64 = x.double()
    dead = all_neg_inf(x64, dim)
    tol = 8 * eps(dtype) * (1 + magnitude)

    ref = torch.softmax(x64, dim).masked_fill(dead, 0.0)  # attnlib: zeros, torch: NaN
    close(attnlib.softmax(x, dim), ref, tol)
    ref_log = torch.log_softmax(x64, dim).masked_fill(dead, -math.inf)
    got_log = attnlib.log_softmax(x, dim)
    close(got_log, ref_log, tol * (1 + magnitude))
    keepdim = data.draw(st.booleans(), label="keepdim")
    close(attnlib.logsumexp(x, dim, keepdim=keepdim), torch.logsumexp(x64, dim, keepdim=keepdim), tol)
    for out in (attnlib.softmax(x, dim), got_log):
        assert out.dtype == dtype

    if dtype in NP_DTYPES:  # the NumPy mirrors agree on the same inputs
        xn = x.numpy()
        close(torch.from_numpy(np.asarray(anp.softmax(xn, dim))), ref, tol)
        close(torch.from_numpy(np.asarray(anp.log_softmax(xn, dim))), ref_log, tol * (1 + magnitude))
        lse = np.asarray(anp.logsumexp(xn, dim, keepdim=keepdim))
        close(torch.from_numpy(lse), torch.logsumexp(x64, dim, keepdim=keepdim), tol)


@SETTINGS
@given(
    dtype=dtypes,
    shape=st.tuples(sizes, sizes, sizes),
    seed=seeds,
    p_keep=st.sampled_from([0.0, 0.5, 1.0]),
    float_mask=st.booleans(),
    specials=specials_strategy(),
)
def test_masked_softmax_matches_torch(dtype, shape, seed, p_keep, float_mask, specials):
    x = make(seed, shape, dtype, 3.0, specials)
    gen = torch.Generator().manual_seed(seed + 1)
    keep = torch.rand(shape[-2:], generator=gen) < p_keep  # (L, S), broadcast over the batch
    mask = attnlib.as_additive_mask(keep, dtype) if float_mask else keep
    x64 = x.double()
    # a bool mask replaces masked scores by -inf; a float mask is added (NaN + -inf stays NaN, as in torch)
    masked = x64 + mask.double() if float_mask else torch.where(keep, x64, -math.inf)
    ref = torch.softmax(masked, -1).masked_fill(all_neg_inf(masked, -1), 0.0)
    got = attnlib.masked_softmax(x, mask)
    assert got.dtype == dtype
    close(got, ref, 8 * eps(dtype) * 4)
    if not float_mask:
        assert torch.all(got[..., ~keep] == 0)  # masked entries are exactly zero, even beside NaN


# --------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------
def reference_attention(q, k, v, allowed, bias, scale):
    """float64 attention with torch ops; rows with no allowed key are zero (attnlib's policy)."""
    s = q @ k.transpose(-2, -1) * scale
    if bias is not None:
        s = s + bias
    if allowed is not None:
        s = torch.where(allowed, s, -math.inf)
    w = torch.softmax(s, -1)
    if s.shape[-1]:
        w = w.masked_fill((s == -math.inf).all(-1, keepdim=True), 0.0)
    return w @ v, w


@SETTINGS
@given(
    dtype=dtypes,
    B=st.integers(0, 2),
    L=sizes,
    S=sizes,
    E=sizes,
    Ev=st.integers(1, 3),
    seed=seeds,
    mask_kind=st.sampled_from(["none", "bool", "float"]),
    p_keep=st.sampled_from([0.0, 0.6, 1.0]),
    is_causal=st.booleans(),
    scale=st.sampled_from([None, 0.5]),
    specials=specials_strategy(),
)
def test_attention_matches_torch(dtype, B, L, S, E, Ev, seed, mask_kind, p_keep, is_causal, scale, specials):
    q = make(seed, (B, L, E), dtype, 2.0, specials)
    k = make(seed + 1, (B, S, E), dtype, 2.0)
    v = make(seed + 2, (B, S, Ev), dtype)
    keep = torch.rand(B, L, S, generator=torch.Generator().manual_seed(seed)) < p_keep
    allowed = keep if mask_kind == "bool" else None
    bias = attnlib.as_additive_mask(keep, torch.float64) if mask_kind == "float" else None
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool).tril()
        allowed = causal if allowed is None else allowed & causal
    attn_mask = {"none": None, "bool": keep, "float": attnlib.as_additive_mask(keep, dtype)}[mask_kind]
    eff_scale = scale if scale is not None else (1 / math.sqrt(E) if E else 1.0)
    ref_out, ref_w = reference_attention(q.double(), k.double(), v.double(), allowed, bias, eff_scale)
    # scores reach |q||k| * scale; the weights' error grows with them, the output's with |v|
    smax = 4.0 * max(E, 1) * eff_scale
    tol = 8 * eps(dtype) * (1 + smax) * (1 + 3.0)

    out, w = attnlib.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, return_weights=True
    )
    assert out.dtype == w.dtype == dtype
    close(out, ref_out, tol)
    close(w, ref_w, tol)
    if not specials:  # and torch's own SDPA (2.13 gives zeros for fully masked rows too)
        torch_mask = allowed if bias is None else bias
        if is_causal and bias is not None:
            torch_mask = bias + attnlib.as_additive_mask(allowed, torch.float64)
        if B and L and S:
            ref_sdpa = torch.nn.functional.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), attn_mask=torch_mask, scale=scale if E else 1.0
            )
            close(out, torch.nan_to_num(ref_sdpa, nan=0.0), tol)
    if dtype in NP_DTYPES:
        np_mask = None if attn_mask is None else attn_mask.numpy()
        out_np, w_np = anp.scaled_dot_product_attention(
            q.numpy(),
            k.numpy(),
            v.numpy(),
            attn_mask=np_mask,
            is_causal=is_causal,
            scale=scale,
            return_weights=True,
        )
        assert out_np.dtype == NP_DTYPES[dtype]
        close(torch.from_numpy(out_np), ref_out, tol)
        close(torch.from_numpy(w_np), ref_w, tol)


# --------------------------------------------------------------------------
# scores
# --------------------------------------------------------------------------
@SETTINGS
@given(dtype=dtypes, L=sizes, S=sizes, E=sizes, Ek=sizes, H=sizes, seed=seeds, specials=specials_strategy())
def test_scores_match_torch(dtype, L, S, E, Ek, H, seed, specials):
    q = make(seed, (2, L, E), dtype, 1.0, specials)
    k = make(seed + 1, (2, S, E), dtype)
    k2 = make(seed + 2, (2, S, Ek), dtype)
    w = make(seed + 3, (E, Ek), dtype)
    wq, wk, v = make(seed + 4, (H, E), dtype), make(seed + 5, (H, Ek), dtype), make(seed + 6, (H,), dtype)
    q64, k64, k264 = q.double(), k.double(), k2.double()
    big = 1 + 4.0 * max(E, Ek, H, 1)
    tol = 8 * eps(dtype) * big
    scale = 1 / math.sqrt(E) if E else 1.0
    refs = {
        "dot_scores": ((q, k), q64 @ k64.mT),
        "scaled_dot_scores": ((q, k), q64 @ k64.mT * scale),
        "general_scores": ((q, k2, w), q64 @ w.double() @ k264.mT),
        "cosine_scores": (
            (q, k),
            (q64 / q64.norm(dim=-1, keepdim=True).clamp_min(1e-8))
            @ (k64 / k64.norm(dim=-1, keepdim=True).clamp_min(1e-8)).mT,
        ),
        "additive_scores": (
            (q, k2, wq, wk, v),
            torch.tanh((q64 @ wq.double().T)[..., :, None, :] + (k264 @ wk.double().T)[..., None, :, :])
            @ v.double(),
        ),
    }
    for name, (args, ref) in refs.items():
        got = getattr(scores, name)(*args)
        assert got.dtype == dtype, name
        close(got, ref, tol)
        if dtype in NP_DTYPES:
            got_np = getattr(anp, name)(*(a.numpy() for a in args))
            close(torch.from_numpy(np.asarray(got_np)), ref, tol)


# --------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------
@SETTINGS
@given(
    B=st.integers(0, 2),
    L=sizes,
    S=sizes,
    h=st.integers(1, 2),
    d=st.integers(1, 2),
    kdim=st.sampled_from([None, 3]),
    bias=st.booleans(),
    seed=seeds,
    p_keep=st.sampled_from([0.0, 0.6, 1.0]),
    is_causal=st.booleans(),
)
def test_multihead_attention_round_trips_through_torch(B, L, S, h, d, kdim, bias, seed, p_keep, is_causal):
    E = h * d
    torch.manual_seed(seed)
    ours = modules.MultiHeadAttention(E, h, bias=bias, kdim=kdim, vdim=kdim).double()
    ref = ours.to_torch().eval()
    assert isinstance(ref, torch.nn.MultiheadAttention) and ref.batch_first
    back = modules.MultiHeadAttention.from_torch(ref)
    assert all(
        torch.equal(a, b) for a, b in zip(ours.state_dict().values(), back.state_dict().values(), strict=True)
    )
    x = make(seed, (B, L, E), torch.float64)
    kv = make(seed + 1, (B, S, kdim or E), torch.float64)
    key_mask = torch.rand(B, S, generator=torch.Generator().manual_seed(seed)) < p_keep
    out, w = ours(x, kv, kv, key_mask=key_mask, is_causal=is_causal, need_weights=True)
    if B and L and S:  # torch refuses empty batches in some paths; compare rows it can compute
        causal = torch.ones(L, S, dtype=torch.bool).tril() if is_causal else None
        ref_out, ref_w = ref(
            x,
            kv,
            kv,
            key_padding_mask=~key_mask,
            attn_mask=None if causal is None else ~causal,
        )
        alive = key_mask[:, None, :].expand(B, L, S) & (causal if causal is not None else True)  # (B, L, S)
        rows = alive.any(-1)  # rows torch can compute (the rest are NaN there, zero weights here)
        torch.testing.assert_close(out[rows], ref_out[rows], atol=1e-12, rtol=1e-12)
        torch.testing.assert_close(w[rows], ref_w[rows], atol=1e-12, rtol=1e-12)
        assert torch.all(w[~rows] == 0)
        if bias:
            torch.testing.assert_close(out[~rows], ours.out_proj.bias.expand_as(out[~rows]))
    assert out.shape == (B, L, E) and w.shape == (B, L, S)


@SETTINGS
@given(
    dtype=dtypes,
    B=st.integers(0, 2),
    L=sizes,
    S=sizes,
    single=st.booleans(),
    seed=seeds,
    p_keep=st.sampled_from([0.0, 0.6]),
)
def test_additive_attention_matches_formula(dtype, B, L, S, single, seed, p_keep):
    torch.manual_seed(seed)
    attn = modules.AdditiveAttention(2, 3, 4).to(dtype)
    q = make(seed, (B, 2) if single else (B, L, 2), dtype)
    k = make(seed + 1, (B, S, 3), dtype)
    key_mask = torch.rand(B, S, generator=torch.Generator().manual_seed(seed)) < p_keep
    context, weights = attn(q, k, key_mask=key_mask)
    q3 = q.double()[:, None] if single else q.double()
    s = (
        torch.tanh(
            (q3 @ attn.w_query.weight.double().T)[..., :, None, :]
            + (k.double() @ attn.w_key.weight.double().T)[..., None, :, :]
        )
        @ attn.v.weight.double()[0]
    )
    s = s.masked_fill(~key_mask[:, None, :], -math.inf)
    ref_w = torch.softmax(s, -1).nan_to_num(0.0) if S else s
    ref_c = ref_w @ k.double()
    if single:
        ref_w, ref_c = ref_w[:, 0], ref_c[:, 0]
    tol = 8 * eps(dtype) * 10
    close(weights, ref_w, tol)
    close(context, ref_c, tol)


@SETTINGS
@given(B=st.integers(0, 2), L=sizes, h=st.integers(1, 3), d=sizes, dtype=dtypes)
def test_split_and_merge_heads_are_inverse(B, L, h, d, dtype):
    x = torch.arange(B * L * h * d).reshape(B, L, h * d).to(dtype)
    heads = modules.split_heads(x, h)
    assert heads.shape == (B, h, L, d)
    if d:
        assert torch.equal(heads[:, -1, :, -1], x[:, :, -1])  # the last head holds the last features
    assert torch.equal(modules.merge_heads(heads), x)


@SETTINGS
@given(
    lengths=st.lists(st.integers(0, 4), max_size=4),
    extra=st.integers(0, 2),
    L=sizes,
    S=sizes,
    diagonal=st.integers(-3, 3),
)
def test_masks_match_their_definitions(lengths, extra, L, S, diagonal):
    max_len = max(lengths, default=0) + extra
    pm = masks.padding_mask(lengths, max_len)
    ref = torch.tensor([[j < n for j in range(max_len)] for n in lengths], dtype=torch.bool).reshape(
        len(lengths), max_len
    )
    assert torch.equal(pm, ref)
    assert np.array_equal(anp.padding_mask(lengths, max_len), ref.numpy())
    cm = masks.causal_mask(L, S, diagonal=diagonal)
    ref_c = torch.tensor([[j <= i + diagonal for j in range(S)] for i in range(L)], dtype=torch.bool).reshape(
        L, S
    )
    assert torch.equal(cm, ref_c)
    assert np.array_equal(anp.causal_mask(L, S, diagonal=diagonal), ref_c.numpy())
    # merging a key mask is an AND with every query row, in bool and in float form
    key = torch.arange(S) % 2 == 0
    merged = masks.merge_key_mask(cm, key, batch=(), S=S)
    assert torch.equal(merged, cm & key)
    merged_f = masks.merge_key_mask(masks.as_additive_mask(cm, torch.float64), key, batch=(), S=S)
    assert torch.equal(merged_f, masks.as_additive_mask(cm & key, torch.float64))
    assert torch.equal(masks.combine_masks(cm, None, key), cm & key)


# --------------------------------------------------------------------------
# bad input: ValueError or TypeError naming the argument, nothing else
# --------------------------------------------------------------------------
T = torch.ones(2, 3, 4)
TI = torch.ones(2, 3, 4, dtype=torch.long)
MHA = modules.MultiHeadAttention(4, 2)
ADD = modules.AdditiveAttention(4, 4, 3)

# (call, exception type, text the message must contain)
BAD_CALLS = [
    (
        lambda: attnlib.scaled_dot_product_attention(T, T, T, attn_mask=[[True] * 3] * 3),
        TypeError,
        "attn_mask",
    ),
    (lambda: attnlib.scaled_dot_product_attention(T, T, T, is_causal="yes"), TypeError, "is_causal"),
    (lambda: attnlib.scaled_dot_product_attention(T, T, T, return_weights=1), TypeError, "return_weights"),
    (lambda: attnlib.scaled_dot_product_attention(T, T, T, scale="1"), TypeError, "scale"),
    (lambda: attnlib.scaled_dot_product_attention(TI, T, T), TypeError, "query"),
    (lambda: attnlib.scaled_dot_product_attention(T, T.double(), T), TypeError, "key torch.float64"),
    (lambda: attnlib.scaled_dot_product_attention(T, T[..., :2], T), ValueError, "key"),
    (
        lambda: attnlib.scaled_dot_product_attention(T, T, T, attn_mask=torch.ones(4, 4, dtype=torch.bool)),
        ValueError,
        "attn_mask",
    ),
    (lambda: attnlib.masked_softmax(T, [True, False, True, True]), TypeError, "mask"),
    (lambda: attnlib.masked_softmax(T, torch.ones(4, dtype=torch.long)), TypeError, "mask"),
    (lambda: attnlib.softmax(T, dim=3), ValueError, "dim"),
    (lambda: attnlib.softmax(T, dim=1.0), TypeError, "dim"),
    (lambda: attnlib.softmax([1.0, 2.0]), TypeError, "x"),
    (lambda: attnlib.logsumexp(TI), TypeError, "x"),
    (lambda: attnlib.logsumexp(T, keepdim="no"), TypeError, "keepdim"),
    (lambda: attnlib.split_heads(T, 0), ValueError, "num_heads"),
    (lambda: attnlib.split_heads(T, 3), ValueError, "num_heads=3"),
    (lambda: attnlib.split_heads(T[0], 1), ValueError, "x"),
    (lambda: attnlib.merge_heads(T), ValueError, "x"),
    (lambda: attnlib.padding_mask(3), TypeError, "lengths"),
    (lambda: attnlib.padding_mask([1.5]), ValueError, "lengths"),
    (lambda: attnlib.padding_mask([3], max_len=2), ValueError, "max_len"),
    (lambda: attnlib.causal_mask(-1), ValueError, "q_len"),
    (lambda: attnlib.causal_mask("3"), TypeError, "q_len"),
    (lambda: attnlib.causal_mask(3, diagonal=0.5), ValueError, "diagonal"),
    (lambda: attnlib.split_heads(T, "2"), TypeError, "num_heads"),
    (lambda: attnlib.combine_masks(torch.ones(2)), TypeError, "masks"),
    (lambda: attnlib.as_additive_mask([True]), TypeError, "mask"),
    (lambda: attnlib.parameter_count(4, 3), ValueError, "num_heads=3"),
    (lambda: attnlib.dot_scores(T, "k"), TypeError, "key"),
    (lambda: attnlib.general_scores(T, T, torch.ones(3, 3)), ValueError, "weight"),
    (
        lambda: attnlib.additive_scores(T, T, torch.ones(2, 4), torch.ones(2, 4), torch.ones(3)),
        ValueError,
        "w_query",
    ),
    (lambda: modules.MultiHeadAttention(4, 0), ValueError, "num_heads"),
    (lambda: modules.MultiHeadAttention(0, 1), ValueError, "embed_dim"),
    (lambda: modules.MultiHeadAttention(4, 2, bias="yes"), TypeError, "bias"),
    (lambda: modules.MultiHeadAttention(4, 2, dropout="0.1"), TypeError, "dropout must be a probability"),
    (
        lambda: modules.MultiHeadAttention(4, 2, dropout=1.0),
        ValueError,
        "dropout must be a probability in [0, 1), got 1.0",
    ),
    (lambda: modules.MultiHeadAttention(4, 2, dropout=float("nan")), ValueError, "dropout"),
    (lambda: modules.MultiHeadAttention(4, 2, dropout=True), ValueError, "dropout"),
    (lambda: MHA(T, T, T, torch.ones(3, 3, dtype=torch.bool)), TypeError, "positional"),
    (lambda: MHA(torch.ones(2, 3, 5), T, T), ValueError, "query has last dimension 5"),
    (lambda: MHA(T, torch.ones(2, 3, 6), T), ValueError, "expects 4"),
    (lambda: MHA(T.double(), T, T), TypeError, "query has dtype torch.float64"),
    (lambda: MHA(T, T, T, key_mask=torch.ones(2, 3)), TypeError, "key_mask"),
    (lambda: MHA(T, T, T, key_mask=torch.ones(2, 4, dtype=torch.bool)), ValueError, "key_mask"),
    (lambda: MHA(T, T, T, attn_mask=[[True]]), TypeError, "attn_mask"),
    (lambda: MHA(T, T, T, is_causal="yes"), TypeError, "is_causal"),
    (lambda: MHA(T, T[:1], T[:1]), ValueError, "share B"),
    (lambda: ADD(T, T, key_mask=torch.ones(2, 3)), TypeError, "key_mask"),
    (lambda: ADD(torch.ones(2, 3, 5), T), ValueError, "query has last dimension 5"),
    (lambda: modules.AdditiveAttention(4, -1, 3), ValueError, "key_dim"),
    (lambda: modules.AdditiveAttention(4, 4, 0), ValueError, "hidden_dim"),
    (lambda: modules.MultiHeadAttention.from_torch("mha"), TypeError, "MultiheadAttention"),
    (lambda: anp.softmax(np.ones(3, dtype=np.int64)), TypeError, "x"),
    (
        lambda: anp.scaled_dot_product_attention(
            np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), is_causal="yes"
        ),
        TypeError,
        "is_causal",
    ),
    (lambda: anp.padding_mask(3), TypeError, "lengths"),
    (lambda: seed_everything("0"), TypeError, "seed"),
    (lambda: seed_everything(-1), ValueError, "seed"),
]


@pytest.mark.parametrize("case", range(len(BAD_CALLS)))
def test_bad_input_is_named(case):
    call, kind, text = BAD_CALLS[case]
    with pytest.raises(kind) as info:
        call()
    assert text in str(info.value), str(info.value)


JUNK = st.sampled_from(
    [
        None,
        0,
        3,
        -1,
        1.5,
        "yes",
        True,
        [1.0, 2.0],
        [[True]],
        np.ones((2, 3)),
        torch.ones(3, dtype=torch.long),
        torch.ones(0),
        torch.ones(2, 3),
        torch.ones(2, 3, 4),
        torch.ones(2, 3, 4, dtype=torch.float16),
        torch.ones(2, 2, 3, 2),
        torch.ones(2, 3, dtype=torch.bool),
        torch.tensor(float("nan")),
    ]
)
PUBLIC = {
    "softmax": (attnlib.softmax, 2),
    "log_softmax": (attnlib.log_softmax, 2),
    "logsumexp": (attnlib.logsumexp, 3),
    "masked_softmax": (attnlib.masked_softmax, 3),
    "sdpa": (attnlib.scaled_dot_product_attention, 7),
    "dot_scores": (attnlib.dot_scores, 2),
    "scaled_dot_scores": (attnlib.scaled_dot_scores, 3),
    "general_scores": (attnlib.general_scores, 3),
    "cosine_scores": (attnlib.cosine_scores, 3),
    "additive_scores": (attnlib.additive_scores, 5),
    "padding_mask": (attnlib.padding_mask, 2),
    "causal_mask": (attnlib.causal_mask, 3),
    "combine_masks": (attnlib.combine_masks, 3),
    "as_additive_mask": (attnlib.as_additive_mask, 2),
    "split_heads": (attnlib.split_heads, 2),
    "merge_heads": (attnlib.merge_heads, 1),
    "parameter_count": (attnlib.parameter_count, 5),
    "mha": (MHA, 8),
    "MultiHeadAttention": (modules.MultiHeadAttention, 5),
    "AdditiveAttention": (modules.AdditiveAttention, 3),
    "additive": (ADD, 4),
    "seed": (seed_everything, 1),
    "np_softmax": (anp.softmax, 2),
    "np_log_softmax": (anp.log_softmax, 2),
    "np_logsumexp": (anp.logsumexp, 3),
    "np_sdpa": (anp.scaled_dot_product_attention, 7),
    "np_dot": (anp.dot_scores, 2),
    "np_scaled": (anp.scaled_dot_scores, 3),
    "np_general": (anp.general_scores, 3),
    "np_cosine": (anp.cosine_scores, 3),
    "np_additive": (anp.additive_scores, 5),
    "np_padding": (anp.padding_mask, 2),
    "np_causal": (anp.causal_mask, 3),
    "expand_key_mask": (masks.expand_key_mask, 3),
    "merge_key_mask": (masks.merge_key_mask, 4),
}


@settings(SETTINGS, max_examples=EXAMPLES * 10)
@given(name=st.sampled_from(sorted(PUBLIC)), data=st.data())
def test_no_other_exception_escapes(name, data):
    fn, n_args = PUBLIC[name]
    n = data.draw(st.integers(1, n_args), label="n_args")
    args = [data.draw(JUNK, label=f"arg{i}") for i in range(n)]
    try:
        fn(*args)
    except (ValueError, TypeError):
        pass
