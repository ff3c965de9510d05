"""attnlib.positions against the formulas and the properties chapter 09 teaches.

Tolerances: float64 within 1e-12 unless stated.
"""

import math

import pytest
import torch

from attnlib import scaled_dot_product_attention
from attnlib.positions import (
    LearnedPositions,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_angles,
    sinusoidal_encoding,
)


def test_sinusoidal_matches_the_formula_entry_by_entry():
    P, D, base = 7, 10, 10000.0
    pe = sinusoidal_encoding(P, D, base=base, dtype=torch.float64)
    for p in range(P):
        for i in range(D // 2):
            angle = p / base ** (2 * i / D)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_sinusoidal_odd_width_and_empty():
    pe = sinusoidal_encoding(3, 5, dtype=torch.float64)
    assert pe.shape == (3, 5)
    assert pe[2, 4].item() == pytest.approx(math.sin(2 / 10000 ** (4 / 5)), abs=1e-12)
    assert sinusoidal_encoding(0, 4).shape == (0, 4)


def test_sinusoidal_shift_is_a_fixed_linear_map():
    """PE(p + k) = PE(p) @ M_k for one matrix M_k, whatever p (Vaswani et al.'s motivation)."""
    D, k = 8, 3
    pe = sinusoidal_encoding(40, D, dtype=torch.float64)
    solution = torch.linalg.lstsq(pe[:20], pe[k : 20 + k]).solution  # (D, D)
    assert torch.allclose(pe[20:37] @ solution, pe[23:40], atol=1e-9)


def test_rope_identity_at_zero_and_norm_preserving():
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64)
    y = apply_rope(x)
    assert torch.equal(y[..., 0, :], x[..., 0, :])
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-12)


def test_rope_dot_product_depends_on_the_offset_only():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 16, generator=g, dtype=torch.float64)

    def score(m, n):
        qm = apply_rope(q[None], torch.tensor([m]))[0]
        kn = apply_rope(k[None], torch.tensor([n]))[0]
        return (qm @ kn).item()

    for m, n in [(5, 3), (12, 10), (102, 100)]:
        assert score(m, n) == pytest.approx(score(2, 0), abs=1e-10)
    assert abs(score(5, 3) - score(5, 4)) > 1e-3  # a different offset, a different score


def test_rope_matches_the_complex_number_form():
    """Pair (a, b) at position p becomes (a + ib) * exp(i p theta_i)."""
    x = torch.randn(5, 8, dtype=torch.float64)
    pos = torch.arange(5)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    z = torch.view_as_complex(x.reshape(5, 4, 2).contiguous())
    expected = torch.view_as_real(
        z * torch.polar(torch.ones(5, 4, dtype=torch.float64), pos[:, None] * theta)
    )
    assert torch.allclose(apply_rope(x, pos), expected.reshape(5, 8), atol=1e-12)


def test_rope_low_precision_and_bad_input():
    x = torch.randn(4, 8)
    assert torch.allclose(apply_rope(x.half()).float(), apply_rope(x), atol=2e-3)
    assert apply_rope(x.bfloat16()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.randn(3, 5))
    with pytest.raises(TypeError, match="floating"):
        apply_rope(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, torch.arange(3))


def test_alibi_slopes_and_bias_formula():
    slopes = alibi_slopes(8)
    assert torch.allclose(slopes, torch.tensor([2.0 ** (-(h + 1)) for h in range(8)]))
    bias = alibi_bias(4, 5, 5)
    m = alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(5):
                if j <= i:
                    assert bias[h, i, j].item() == pytest.approx(-m[h].item() * (i - j), abs=1e-7)
                else:
                    assert bias[h, i, j].item() == -math.inf


def test_alibi_decoding_row_is_the_last_row_of_the_full_bias():
    full = alibi_bias(2, 6, 6)
    assert torch.equal(alibi_bias(2, 1, 6), full[:, -1:])


def test_alibi_as_attention_mask_penalises_distance():
    """With equal scores, ALiBi's weights fall off geometrically with the distance."""
    q = torch.zeros(1, 1, 4, 2)
    weights = scaled_dot_product_attention(
        q, q, torch.eye(4).expand(1, 1, 4, 4), attn_mask=alibi_bias(1, 4, 4)
    )
    row = weights[0, 0, 3]
    ratio = row[1:] / row[:-1]
    assert torch.allclose(ratio, torch.full((3,), math.exp(2.0**-8)), atol=1e-6)


def test_learned_positions_adds_the_table_and_refuses_too_long():
    pos = LearnedPositions(6, 4)
    x = torch.zeros(2, 3, 4)
    assert torch.equal(pos(x), pos.weight[:3].expand(2, 3, 4))
    assert torch.equal(pos(x, offset=3), pos.weight[3:].expand(2, 3, 4))
    with pytest.raises(ValueError, match="max_len"):
        pos(torch.zeros(1, 7, 4))
    with pytest.raises(ValueError, match=r"\(\.\.\., L, 4\)"):
        pos(torch.zeros(1, 3, 5))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: sinusoidal_encoding(-1, 4), ValueError, "sinusoidal_encoding: n_positions must be a non"),
        # a number of the wrong kind is a ValueError, a non-number a TypeError: the rule of _validate
        (lambda: sinusoidal_encoding(3.0, 4), ValueError, "sinusoidal_encoding: n_positions .* got 3.0"),
        (lambda: sinusoidal_encoding("3", 4), TypeError, "sinusoidal_encoding: n_positions .* got str"),
        (lambda: sinusoidal_encoding(3, 4, base=1.0), ValueError, "sinusoidal_encoding: base must be > 1"),
        (lambda: sinusoidal_encoding(3, 4, base="e"), TypeError, "sinusoidal_encoding: base must be a real"),
        (lambda: alibi_bias(0, 2, 2), ValueError, "alibi_bias: num_heads must be a positive integer, got 0"),
        (lambda: alibi_bias(2, 2, 2, causal="yes"), TypeError, "alibi_bias: causal must be a bool"),
        (lambda: LearnedPositions(0, 4), ValueError, "LearnedPositions: max_len must be a positive integer"),
        (lambda: rope_angles([0, 1], 4), TypeError, "rope_angles: positions must be a torch.Tensor"),
        (lambda: rope_angles(torch.arange(2), 3), ValueError, "rope_angles: dim must be even"),
        (lambda: apply_rope(torch.zeros(2, 4), base=0.5), ValueError, "apply_rope: base must be > 1"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
