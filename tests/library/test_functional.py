"""softmax, log_softmax, logsumexp and masked_softmax against torch's own ops.

Tolerances: see tests/library/helpers_numerics.py (float64 atol=rtol=1e-12, float32
atol 1e-6 vs float64, half precision atol 1e-2).
"""

import pytest
import torch
from helpers_numerics import ATOL16, assert_close32, assert_close64, randn

from attnlib.functional import log_softmax, logsumexp, masked_softmax, softmax

SHAPES = [(5,), (3, 7), (2, 3, 4), (2, 1, 3, 6)]
NEG_INF = float("-inf")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_family_matches_torch_float64(shape, dim):
    x = randn(*shape, seed=1) * 3
    assert_close64(softmax(x, dim), torch.softmax(x, dim))
    assert_close64(log_softmax(x, dim), torch.log_softmax(x, dim))
    assert_close64(logsumexp(x, dim), torch.logsumexp(x, dim))
    assert_close64(logsumexp(x, dim, keepdim=True), torch.logsumexp(x, dim, keepdim=True))


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_family_float32_vs_float64(shape):
    x = randn(*shape, seed=2) * 3
    xf = x.float()
    assert_close32(softmax(xf), torch.softmax(x, -1))
    assert_close32(log_softmax(xf), torch.log_softmax(x, -1))
    assert_close32(logsumexp(xf), torch.logsumexp(x, -1))


def test_huge_logits_do_not_overflow():
    x = torch.tensor([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4 - 2.0, -1e4 + 1.0]], dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        p = softmax(x.to(dtype))
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p.double(), torch.softmax(x, -1), atol=1e-6, rtol=0)
        lse = logsumexp(x.to(dtype))
        torch.testing.assert_close(lse.double(), torch.logsumexp(x, -1), atol=1e-3, rtol=0)
        assert torch.isfinite(log_softmax(x.to(dtype))).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_computed_in_float32(dtype):
    # exp(20) already overflows float16: a naive half softmax would give inf/NaN
    x = torch.tensor([[20.0, 19.0, -5.0, 0.0], [1e4, 1e4, 0.0, -1e4]], dtype=torch.float64)
    xh = x.to(dtype)
    ref = x.to(dtype).double()
    p = softmax(xh)
    assert p.dtype == dtype
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p.double(), torch.softmax(ref, -1), atol=ATOL16, rtol=0)
    lse = logsumexp(xh)
    assert lse.dtype == dtype
    torch.testing.assert_close(lse.double(), torch.logsumexp(ref, -1), atol=0, rtol=1e-2)
    assert log_softmax(xh).dtype == dtype


def test_all_neg_inf_row_gives_zero_weights():
    x = torch.tensor([[NEG_INF] * 3, [0.0, NEG_INF, 1.0]], dtype=torch.float64)
    p = softmax(x)
    assert not torch.isnan(p).any()
    assert torch.equal(p[0], torch.zeros(3, dtype=torch.float64))
    assert_close64(p[1], torch.softmax(x[1], -1))
    assert p[1, 1] == 0
    lse = logsumexp(x)
    assert lse[0] == NEG_INF
    assert_close64(lse, torch.logsumexp(x, -1))
    ls = log_softmax(x)
    assert torch.all(ls[0] == NEG_INF)
    assert_close64(ls[1], torch.log_softmax(x[1], -1))


def test_gradients_finite_with_neg_inf_rows():
    x = torch.tensor([[NEG_INF] * 3, [0.0, NEG_INF, 1.0], [1e4, 0.0, -1e4]], dtype=torch.float64)
    w = randn(3, 3, seed=3)
    for fn in (softmax, log_softmax):
        xr = x.clone().requires_grad_()
        out = fn(xr)
        (torch.nan_to_num(out, neginf=0.0) * w).sum().backward()
        assert torch.isfinite(xr.grad).all(), fn.__name__
    xr = x.clone().requires_grad_()
    torch.nan_to_num(logsumexp(xr), neginf=0.0).sum().backward()
    assert torch.isfinite(xr.grad).all()
    assert torch.equal(xr.grad[0], torch.zeros(3, dtype=torch.float64))


def test_softmax_gradient_matches_torch():
    x = randn(3, 5, seed=4).requires_grad_()
    w = randn(3, 5, seed=5)
    (softmax(x) * w).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    (torch.softmax(x2, -1) * w).sum().backward()
    assert_close64(x.grad, x2.grad)


@pytest.mark.parametrize("mask_shape", [(6,), (4, 6), (2, 1, 6), (2, 4, 6)])
def test_masked_softmax_bool_and_float(mask_shape):
    scores = randn(2, 4, 6, seed=6)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(7)) > 0.4
    mask[..., 0] = True  # no fully masked row here: torch.softmax would give NaN
    ref = torch.softmax(torch.where(mask, scores, NEG_INF), -1)
    assert_close64(masked_softmax(scores, mask), ref)
    additive = torch.zeros(mask_shape, dtype=torch.float64).masked_fill(~mask, NEG_INF)
    assert_close64(masked_softmax(scores, additive), ref)
    assert torch.all(masked_softmax(scores, mask)[~mask.expand_as(scores)] == 0)


def test_masked_softmax_fully_masked_row_and_other_dim():
    scores = randn(3, 4, seed=8)
    out = masked_softmax(scores, torch.zeros(3, 4, dtype=torch.bool))
    assert torch.equal(out, torch.zeros(3, 4, dtype=torch.float64))
    # along dim 0 the mask (3, 1) masks whole rows of a column-wise softmax
    col_mask = torch.tensor([[True], [False], [True]])
    out0 = masked_softmax(scores, col_mask, dim=0)
    ref0 = torch.softmax(scores.masked_fill(~col_mask, NEG_INF), 0)
    assert_close64(out0, ref0)
    assert_close64(masked_softmax(scores), torch.softmax(scores, -1))


def test_masked_softmax_gradient_finite_fully_masked():
    scores = randn(2, 3, seed=9).requires_grad_()
    mask = torch.tensor([[False, False, False], [True, False, True]])
    masked_softmax(scores, mask).pow(2).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.equal(scores.grad[0], torch.zeros(3, dtype=torch.float64))


def test_errors():
    with pytest.raises(TypeError, match="int64"):
        softmax(torch.arange(3))
    with pytest.raises(TypeError, match="int64"):
        logsumexp(torch.arange(3))
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(2, 4, 6\)"):
        masked_softmax(randn(2, 4, 6), torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="int64"):
        masked_softmax(randn(2, 3), torch.ones(2, 3, dtype=torch.long))
