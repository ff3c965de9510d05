"""Score functions against torch references (matmul, einsum, F.cosine_similarity).

Tolerances: see tests/library/helpers_numerics.py (float64 atol=rtol=1e-12, float32
atol 1e-6 vs float64).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers_numerics import assert_close32, assert_close64, randn

from attnlib.scores import (
    additive_scores,
    cosine_scores,
    dot_scores,
    general_scores,
    scaled_dot_scores,
)

# (query shape, key shape, broadcast scores shape); leading dims broadcast
SHAPE_CASES = [
    ((3, 4), (5, 4), (3, 5)),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5)),
    ((2, 1, 3, 4), (3, 6, 4), (2, 3, 3, 6)),
    ((1, 2, 1, 4), (3, 1, 2, 4), (3, 2, 1, 2)),
]


@pytest.mark.parametrize("q_shape,k_shape,out_shape", SHAPE_CASES)
def test_dot_and_scaled(q_shape, k_shape, out_shape):
    q, k = randn(*q_shape, seed=1), randn(*k_shape, seed=2)
    ref = torch.einsum("...le,...se->...ls", q, k)
    out = dot_scores(q, k)
    assert out.shape == out_shape
    assert_close64(out, ref)
    assert_close64(scaled_dot_scores(q, k), ref / math.sqrt(q.shape[-1]))
    assert_close64(scaled_dot_scores(q, k, scale=0.3), ref * 0.3)
    assert_close32(scaled_dot_scores(q.float(), k.float()), ref / math.sqrt(q.shape[-1]))


@pytest.mark.parametrize("q_shape,k_shape,out_shape", SHAPE_CASES)
def test_general(q_shape, k_shape, out_shape):
    q = randn(*q_shape, seed=3)
    k = randn(*k_shape[:-1], k_shape[-1] + 2, seed=4)  # E_k != E_q
    w = randn(q.shape[-1], k.shape[-1], seed=5)
    out = general_scores(q, k, w)
    assert out.shape == out_shape
    assert_close64(out, torch.einsum("...le,ef,...sf->...ls", q, w, k))
    # W = identity gives back the dot product
    assert_close64(general_scores(q, q, torch.eye(q.shape[-1], dtype=q.dtype)), dot_scores(q, q))


@pytest.mark.parametrize("q_shape,k_shape,out_shape", SHAPE_CASES)
def test_cosine_matches_torch(q_shape, k_shape, out_shape):
    q, k = randn(*q_shape, seed=6), randn(*k_shape, seed=7)
    ref = F.cosine_similarity(q.unsqueeze(-2), k.unsqueeze(-3), dim=-1)
    out = cosine_scores(q, k)
    assert out.shape == out_shape
    assert_close64(out, ref)
    assert_close32(cosine_scores(q.float(), k.float()), ref)


def test_cosine_zero_vector_is_zero_not_nan():
    q = torch.zeros(2, 3, dtype=torch.float64)
    k = randn(4, 3, seed=8)
    out = cosine_scores(q, k)
    assert torch.equal(out, torch.zeros(2, 4, dtype=torch.float64))
    assert_close64(out, F.cosine_similarity(q.unsqueeze(-2), k.unsqueeze(-3), dim=-1))


@pytest.mark.parametrize("q_shape,k_shape,out_shape", SHAPE_CASES)
def test_additive_against_loop(q_shape, k_shape, out_shape):
    H = 5
    q = randn(*q_shape, seed=9)
    k = randn(*k_shape[:-1], 3, seed=10)  # E_k = 3 != E_q
    w_q, w_k, v = randn(H, q.shape[-1], seed=11), randn(H, 3, seed=12), randn(H, seed=13)
    out = additive_scores(q, k, w_q, w_k, v)
    assert out.shape == out_shape
    qb = q.unsqueeze(-2).expand(*out_shape, q.shape[-1])
    kb = k.unsqueeze(-3).expand(*out_shape, 3)
    ref = torch.empty(out_shape, dtype=torch.float64)
    for idx in torch.cartesian_prod(*[torch.arange(n) for n in out_shape]).view(-1, len(out_shape)):
        i = tuple(idx.tolist())
        ref[i] = v @ torch.tanh(w_q @ qb[i] + w_k @ kb[i])
    assert_close64(out, ref)


def test_cosine_gradients_equal_autograd_through_torch():
    """dQ and dK of cosine_scores equal autograd's through F.cosine_similarity (same eps)."""
    q = randn(2, 3, 4, seed=14)
    k = randn(2, 5, 4, seed=15)
    upstream = randn(2, 3, 5, seed=16)  # a weighted sum, not .sum(): every entry has its own weight
    grads = []
    for scores in (
        cosine_scores,
        lambda a, b: F.cosine_similarity(a.unsqueeze(-2), b.unsqueeze(-3), dim=-1, eps=1e-8),
    ):
        qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
        (scores(qq, kk) * upstream).sum().backward()
        grads.append((qq.grad, kk.grad))
    (dq, dk), (dq_ref, dk_ref) = grads
    assert_close64(dq, dq_ref)
    assert_close64(dk, dk_ref)
    assert dq.abs().max() > 1e-3, "a zero gradient would pass trivially"


def test_errors_name_shapes():
    q, k = randn(2, 3, 4), randn(2, 5, 6)
    for fn in (dot_scores, scaled_dot_scores, cosine_scores):
        with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(2, 5, 6\)"):
            fn(q, k)
        with pytest.raises(ValueError, match=r"\(4,\)"):
            fn(randn(4), randn(3, 4))
        with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(3, 5, 4\)"):
            fn(q, randn(3, 5, 4))
        with pytest.raises(TypeError, match="int64"):
            fn(torch.ones(3, 4, dtype=torch.long), randn(5, 4))
        with pytest.raises(TypeError, match="float32"):
            fn(q.float(), randn(2, 5, 4))
    with pytest.raises(ValueError, match=r"\(4, 6\).*\(6, 4\)"):
        general_scores(q, k, randn(6, 4))
    with pytest.raises(ValueError, match=r"\(5, 4\).*\(5, 3\)"):
        additive_scores(q, k, randn(5, 3), randn(5, 6), randn(5))
    with pytest.raises(ValueError, match=r"\(5, 1\)"):
        additive_scores(q, k, randn(5, 4), randn(5, 6), randn(5, 1))
