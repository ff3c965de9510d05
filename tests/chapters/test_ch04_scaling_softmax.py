"""Chapter 04: the claims the chapter measures, checked against PyTorch and by their defining properties."""

import math
import warnings

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib.chapters.retrieval import permutation_keys
from attnlib.checks.ch04_scaling_softmax import (
    _lse_global_max,
    _lse_naive,
    _softmax_global_max,
    _softmax_no_shift,
    attention_weights,
    log_sum_exp,
    scaled_scores,
    stable_softmax,
)


@pytest.mark.parametrize("d_k", [4, 64, 512])
def test_dot_product_variance_tracks_d_k(d_k):
    rng = np.random.default_rng(d_k)
    q, k = rng.standard_normal((20_000, d_k)), rng.standard_normal((20_000, d_k))
    dots = np.einsum("nd,nd->n", q, k)
    assert dots.var() == pytest.approx(d_k, rel=0.05)
    assert (dots / math.sqrt(d_k)).var() == pytest.approx(1.0, rel=0.05)


def test_unscaled_scores_saturate_and_scaled_do_not():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(500, 1, 1024, generator=gen, dtype=torch.float64)
    k = torch.randn(500, 16, 1024, generator=gen, dtype=torch.float64)
    raw = (q @ k.transpose(-2, -1)).squeeze(1)
    p_raw, p_scaled = torch.softmax(raw, -1), torch.softmax(raw / 32.0, -1)
    assert p_raw.max(-1).values.mean() > 0.9 and p_scaled.max(-1).values.mean() < 0.4

    def jac_norm(p):
        return (torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)).flatten(1).norm(dim=-1).median()

    assert jac_norm(p_raw) < 1e-3 < 0.1 < jac_norm(p_scaled)


def test_softmax_jacobian_formula_matches_autograd():
    s = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    p = torch.softmax(s, -1)
    formula = torch.diag(p) - torch.outer(p, p)
    torch.testing.assert_close(torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s), formula)


EXTREME = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -999.0, -998.0], [0.0, 1.0, 2.0], [5.0, -3.0, 700.0]])


def test_stable_softmax_and_lse_on_extreme_logits_match_torch():
    ref_sm = torch.softmax(torch.from_numpy(EXTREME), -1).numpy()
    ref_lse = torch.logsumexp(torch.from_numpy(EXTREME), -1).numpy()
    np.testing.assert_allclose(stable_softmax(EXTREME), ref_sm, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(log_sum_exp(EXTREME), ref_lse, rtol=1e-12)
    with np.errstate(all="ignore"):
        assert np.isnan(_softmax_no_shift(EXTREME)[:2]).all()
        assert np.isnan(_softmax_global_max(EXTREME)[1]).all()
        assert np.isinf(_lse_naive(EXTREME)[:2]).all()
        assert np.isneginf(_lse_global_max(EXTREME)[1])


def test_shift_invariance():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5))
    for c in (-700.0, 3.5, 650.0):
        np.testing.assert_allclose(anp.softmax(x + c), anp.softmax(x), rtol=1e-12)
        np.testing.assert_allclose(anp.logsumexp(x + c), anp.logsumexp(x) + c, rtol=1e-12)


def test_float16_logits_of_ten_thousand():
    logits = np.array([[1e4, 1e4 - 1.0, 1e4 - 3.0], [5.0, 12.0, 2.0]], dtype=np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the stable path must not warn at all
        out = anp.softmax(logits)
    assert out.dtype == np.float16 and np.isfinite(out).all()
    ref = torch.softmax(torch.from_numpy(logits.astype(np.float64)), -1).numpy()
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=1e-3)


def test_scaled_scores_and_weights_match_torch():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 5, 8))
    ref = (torch.from_numpy(q) @ torch.from_numpy(k).transpose(-2, -1) / math.sqrt(8)).numpy()
    np.testing.assert_allclose(scaled_scores(q, k), ref, rtol=1e-12)
    x, w_q, w_k = rng.normal(size=(4, 6)) * 40, rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    xt = torch.from_numpy(x)
    s = (xt @ torch.from_numpy(w_q)) @ (xt @ torch.from_numpy(w_k)).T / math.sqrt(3)
    np.testing.assert_allclose(
        attention_weights(x, w_q, w_k), torch.softmax(s, -1).numpy(), rtol=1e-10, atol=1e-300
    )


def test_large_retrieval_test_overflows_naively_and_is_fixed():
    rng = np.random.default_rng(463)
    keys = permutation_keys(1001, 100, rng)
    query = keys[463] + math.sin(30)
    query[[3, 70]] = query[[70, 3]]
    scores = keys @ query
    with np.errstate(all="ignore"):
        naive = _softmax_no_shift(scores)
    assert np.isnan(naive).all()
    fixed = anp.softmax(scores)
    assert fixed.argmax() == scores.argmax() == 463 and fixed.sum() == pytest.approx(1.0)
