"""attnlib.numpy against the PyTorch backend and torch's own ops.

Tolerances: see tests/library/helpers_numerics.py (float64 atol=rtol=1e-12; float32
atol 1e-6 vs float64; float16 atol 1e-2).
"""

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers_numerics import ATOL16, ATOL32, ATOL64, RTOL64, torch_sdpa_reference

import attnlib.numpy as anp
from attnlib import attention, functional, masks, scores

NEG_INF = -np.inf


def close64(actual, expected):
    assert isinstance(actual, np.ndarray)
    np.testing.assert_allclose(actual, np.asarray(expected), atol=ATOL64, rtol=RTOL64)


def rand(*shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 4)])
def test_softmax_logsumexp(shape):
    x = rand(*shape, seed=1) * 3
    for dim in (-1, 0):
        close64(anp.softmax(x, dim), torch.softmax(torch.from_numpy(x), dim))
        close64(anp.logsumexp(x, dim), torch.logsumexp(torch.from_numpy(x), dim))
    close64(anp.logsumexp(x, keepdim=True), torch.logsumexp(torch.from_numpy(x), -1, keepdim=True))


def test_softmax_policy():
    x = np.array([[1e4, 1e4 - 1, -1e4], [NEG_INF] * 3, [0.0, NEG_INF, 1.0]])
    # no overflow, no 0/0, no log(0) anywhere (underflow to 0 is what masking wants)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        p = anp.softmax(x)
        lse = anp.logsumexp(x)
    close64(p, functional.softmax(torch.from_numpy(x)))
    close64(lse, functional.logsumexp(torch.from_numpy(x)))
    assert np.all(p[1] == 0) and lse[1] == NEG_INF
    h = np.array([20.0, 19.0, -5.0], dtype=np.float16)  # exp(20) overflows float16
    ph = anp.softmax(h)
    assert ph.dtype == np.float16 and np.isfinite(ph).all()
    np.testing.assert_allclose(ph, torch.softmax(torch.tensor(h.astype(np.float64)), -1), atol=ATOL16)


SCORE_SHAPES = [((3, 4), (5, 4)), ((2, 1, 3, 4), (3, 6, 4))]


@pytest.mark.parametrize("q_shape,k_shape", SCORE_SHAPES)
def test_scores_match_torch_backend(q_shape, k_shape):
    q, k = rand(*q_shape, seed=2), rand(*k_shape, seed=3)
    tq, tk = torch.from_numpy(q), torch.from_numpy(k)
    close64(anp.dot_scores(q, k), scores.dot_scores(tq, tk))
    close64(anp.scaled_dot_scores(q, k), scores.scaled_dot_scores(tq, tk))
    close64(anp.scaled_dot_scores(q, k, 0.5), scores.scaled_dot_scores(tq, tk, 0.5))
    close64(anp.cosine_scores(q, k), F.cosine_similarity(tq.unsqueeze(-2), tk.unsqueeze(-3), -1))
    k2 = rand(*k_shape[:-1], 3, seed=4)
    w = rand(q_shape[-1], 3, seed=5)
    ref = scores.general_scores(tq, torch.from_numpy(k2), torch.from_numpy(w))
    close64(anp.general_scores(q, k2, w), ref)
    w_q, w_k, v = rand(6, q_shape[-1], seed=6), rand(6, 3, seed=7), rand(6, seed=8)
    ref = scores.additive_scores(tq, *(torch.from_numpy(a) for a in (k2, w_q, w_k, v)))
    close64(anp.additive_scores(q, k2, w_q, w_k, v), ref)


@pytest.mark.parametrize("mask_shape", [None, (6,), (4, 6), (2, 1, 1, 6), (2, 1, 4, 6)])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("float_mask", [False, True])
def test_sdpa_matches_torch(mask_shape, is_causal, float_mask):
    q, k, v = rand(2, 3, 4, 5, seed=9), rand(2, 3, 6, 5, seed=10), rand(2, 3, 6, 7, seed=11)
    mask = None
    if mask_shape is not None:
        mask = np.random.default_rng(12).random(mask_shape) > 0.35
        if float_mask:
            mask = np.where(mask, 0.0, NEG_INF) + rand(*mask_shape, seed=13)
    t = [torch.from_numpy(a) for a in (q, k, v)]
    tmask = None if mask is None else torch.from_numpy(mask)
    out, w = anp.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=True
    )
    ref_out, ref_w = attention.scaled_dot_product_attention(
        *t, attn_mask=tmask, is_causal=is_causal, return_weights=True
    )
    assert not np.isnan(out).any()
    close64(out, ref_out)
    close64(w, ref_w)
    close64(out, torch_sdpa_reference(*t, attn_mask=tmask, is_causal=is_causal))
    m32 = mask if mask is None or mask.dtype == bool else mask.astype(np.float32)
    out32 = anp.scaled_dot_product_attention(
        *(a.astype(np.float32) for a in (q, k, v)), attn_mask=m32, is_causal=is_causal
    )
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, ref_out.numpy(), atol=ATOL32, rtol=0)


def test_sdpa_float16():
    q, k = (rand(2, 3, 64, seed=14) * 30).astype(np.float16), rand(2, 5, 64, seed=15) * 30
    k = k.astype(np.float16)
    v = rand(2, 5, 4, seed=16).astype(np.float16)
    with np.errstate(over="raise"):
        out = anp.scaled_dot_product_attention(q, k, v)
    assert out.dtype == np.float16 and np.isfinite(out).all()


def test_masks_match_torch_backend():
    assert np.array_equal(anp.padding_mask([2, 0, 3]), masks.padding_mask([2, 0, 3]).numpy())
    assert np.array_equal(anp.padding_mask(np.array([1, 2]), 4), masks.padding_mask([1, 2], 4).numpy())
    for args in [(3,), (3, 5), (5, 3), (2, 5, 3), (3, 3, -1)]:
        assert np.array_equal(anp.causal_mask(*args), masks.causal_mask(*args).numpy())


def _same_error(np_call, torch_call, exc):
    with pytest.raises(exc) as np_err:
        np_call()
    with pytest.raises(exc) as torch_err:
        torch_call()
    assert str(np_err.value) == str(torch_err.value)
    return str(np_err.value)


def test_errors_identical_to_torch_backend():
    def both(*arrays):
        return arrays, tuple(torch.from_numpy(np.asarray(a)) for a in arrays)

    sdpa_np, sdpa_t = anp.scaled_dot_product_attention, attention.scaled_dot_product_attention
    cases = [
        (((4,), (5, 4), (5, 3)), r"\(4,\)"),
        (((3, 4), (5, 6), (5, 3)), r"\(3, 4\).*\(5, 6\)"),
        (((3, 4), (5, 4), (6, 3)), r"\(5, 4\).*\(6, 3\)"),
    ]
    for shapes, match in cases:
        np_args, t_args = both(*(rand(*s, seed=0) for s in shapes))
        msg = _same_error(lambda a=np_args: sdpa_np(*a), lambda a=t_args: sdpa_t(*a), ValueError)
        assert re.search(match, msg)
    np_args, t_args = both(rand(2, 3, 4, seed=0), rand(2, 5, 4, seed=0), rand(2, 5, 2, seed=0))
    bad = np.ones((3, 4), dtype=bool)
    msg = _same_error(
        lambda: sdpa_np(*np_args, attn_mask=bad),
        lambda: sdpa_t(*t_args, attn_mask=torch.from_numpy(bad)),
        ValueError,
    )
    assert "(3, 4)" in msg and "(2, 3, 5)" in msg
    with pytest.raises(TypeError, match="int64"):
        sdpa_np(np.ones((3, 4), dtype=np.int64), rand(5, 4, seed=0), rand(5, 2, seed=0))
    with pytest.raises(TypeError, match="float64.*float32"):
        sdpa_np(rand(3, 4, seed=0), rand(5, 4, seed=0).astype(np.float32), rand(5, 2, seed=0))
    msg = _same_error(
        lambda: anp.padding_mask([1, 5], max_len=3),
        lambda: masks.padding_mask([1, 5], max_len=3),
        ValueError,
    )
    assert "[5]" in msg
    for bad_lengths in ([1, -2], [1.5, 2], np.array([1.0, 2.0])):
        with pytest.raises(ValueError, match="lengths"):
            anp.padding_mask(bad_lengths)
    with pytest.raises(ValueError, match="-1"):
        anp.causal_mask(-1)
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(2, 5, 6\)"):
        anp.dot_scores(rand(2, 3, 4, seed=0), rand(2, 5, 6, seed=0))
    with pytest.raises(ValueError, match=r"\(4, 6\).*\(6, 4\)"):
        anp.general_scores(rand(3, 4, seed=0), rand(5, 6, seed=0), rand(6, 4, seed=0))
    with pytest.raises(ValueError, match=r"\(5, 4\).*\(5, 3\)"):
        anp.additive_scores(
            rand(3, 4, seed=0), rand(5, 6, seed=0), rand(5, 3, seed=0), rand(5, 6, seed=0), rand(5, seed=0)
        )
