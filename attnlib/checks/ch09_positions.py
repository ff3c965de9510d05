"""Chapter 09 exercises: the sinusoidal table, rotary embeddings, the ALiBi bias."""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlib.checks._cases import cases
from attnlib.checks.compare import compare_outputs
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.positions import alibi_bias, apply_rope, sinusoidal_encoding

_POSITIONS = (
    "attnlib.positions.sinusoidal_encoding",
    "attnlib.positions.apply_rope",
    "attnlib.positions.alibi_bias",
)

# --------------------------------------------------------------------------- ex-09-1 sinusoidal table


def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """float64 (n_positions, d_model): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""
    return sinusoidal_encoding(n_positions, d_model, dtype=torch.float64)


def _table(angle_fn, interleave=True, sin_first=True):
    """Build a wrong table from an angle rule; used by the misconceptions below."""

    def table(n_positions, d_model):
        p = torch.arange(n_positions, dtype=torch.float64)[:, None]
        i = torch.arange(d_model // 2, dtype=torch.float64)[None, :]
        angle = angle_fn(p, i, d_model)  # (P, D/2)
        first, second = (
            (torch.sin(angle), torch.cos(angle)) if sin_first else (torch.cos(angle), torch.sin(angle))
        )
        if interleave:
            return torch.stack((first, second), dim=-1).flatten(1)  # (P, D/2, 2) -> (P, D)
        return torch.cat((first, second), dim=1)  # (P, D): all sines, then all cosines

    return table


_RIGHT_ANGLE = lambda p, i, d: p / 10000.0 ** (2 * i / d)  # noqa: E731

register(
    Exercise(
        id="ex-09-1",
        function="sinusoidal_table",
        reference=sinusoidal_table,
        cases=cases(
            None,
            {
                "4 positions, d_model 6": (4, 6),
                "10 positions, d_model 8": (10, 8),
                "1 position, d_model 2": (1, 2),
                "hidden: 64 positions, d_model 16": (64, 16),
            },
        ),
        misconceptions=[
            Misconception(
                "sine and cosine swapped",
                _table(_RIGHT_ANGLE, sin_first=False),
                "look at position 0: which of sin and cos is 0 there? The even columns (2i) hold "
                "the one that starts at 0.",
            ),
            Misconception(
                "exponent i/d instead of 2i/d",
                _table(lambda p, i, d: p / 10000.0 ** (i / d)),
                "column pair i uses the wavelength base^(2i / d_model): the exponent counts columns, "
                "and pair i starts at column 2i.",
            ),
            Misconception(
                "sines and cosines in two halves instead of interleaved",
                _table(_RIGHT_ANGLE, interleave=False),
                "sin and cos of the same angle sit side by side: columns 2i and 2i + 1, not the "
                "first half and the second half.",
            ),
            Misconception(
                "multiplies by the wavelength instead of dividing",
                _table(lambda p, i, d: p * 10000.0 ** (2 * i / d)),
                "the angles must shrink as the column grows (slow waves in the last columns): divide "
                "the position by the base's power.",
            ),
            Misconception(
                "positions counted from 1",
                _table(lambda p, i, d: (p + 1) / 10000.0 ** (2 * i / d)),
                "the first row is position p = 0: sin(0) = 0 in its even columns and cos(0) = 1 in "
                "its odd ones.",
            ),
        ],
        hints=(
            "each pair of columns holds a sine and a cosine of one angle; the angle grows with the position "
            "and shrinks with the column pair.",
            "build the angles as a (P, D/2) table by broadcasting a column of positions against a row of "
            "wavelengths, then fill the even columns and the odd columns from it.",
            "the angle of position p in column pair i is p divided by 10000 to the power 2i / d_model; "
            "the pair's even column holds its sine and the odd column its cosine, so two slice assignments "
            "fill the whole table.",
        ),
        forbidden=_POSITIONS,
        rtol=1e-6,
        atol=1e-6,
    )
)

# --------------------------------------------------------------------------- ex-09-2 rotary embedding


def rope(x: torch.Tensor) -> torch.Tensor:
    """Rotate pair (x[..., 2i], x[..., 2i+1]) of the row at position p by p * 10000^(-2i/E)."""
    return apply_rope(x)


def _rope_with(freq_exp=2.0, sign=1.0, start=0, halves=False):
    def rotate(x):
        L, E = x.shape[-2], x.shape[-1]
        p = torch.arange(start, start + L, dtype=torch.float64)[:, None]
        i = torch.arange(E // 2, dtype=torch.float64)[None, :]
        theta = sign * p * 10000.0 ** (-freq_exp * i / E)  # (L, E/2)
        cos, sin = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)
        if halves:
            a, b = x[..., : E // 2], x[..., E // 2 :]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    return rotate


def _rope_float32_angles(x):
    """RoPE with the angles in float32 (torch's default arange and powers), the rotation in x's dtype."""
    L, E = x.shape[-2], x.shape[-1]
    p = torch.arange(L, dtype=torch.float32)[:, None]
    theta = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float32) / E)
    phi = p * theta  # float32 (L, E/2)
    cos, sin = torch.cos(phi).to(x.dtype), torch.sin(phi).to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


FLOAT64_TOLERANCE = 1e-10  # float64 work on a float64 x: every right way of writing it is far closer
FLOAT32_WORK = "correct to float32's precision only"


def _rope_precision(expected, got, exercise):
    """ex-09-2's text asks for x's precision: a float64 x is compared to about 1e-10 in float64
    (float32 work, ~1e-7 off at position 40, fails and is told so; a float32 result too), a
    float32 x at float32's precision (compare_outputs never goes below 16 of its epsilons)."""
    arrays = isinstance(expected, np.ndarray) and isinstance(got, np.ndarray)
    if not arrays or expected.dtype != np.float64:
        return compare_outputs(expected, got, exercise.rtol, exercise.atol)
    if got.dtype.kind == "f" and got.dtype != np.float64:
        return False, (
            f"expected float64 values for a float64 x, got {got.dtype}: the dtype is not kept, "
            f"so the result is {FLOAT32_WORK} (compute in x's dtype, or finer, and give float64 back)"
        )
    ok, message = compare_outputs(expected, got, exercise.rtol, exercise.atol)
    if not ok and got.shape == expected.shape and compare_outputs(expected, got, 1e-6, 1e-6)[0]:
        return False, (
            f"{message}: {FLOAT32_WORK} (float32 work on a float64 x, the angles or the rotation "
            "computed in float32): for a float64 x, compute in float64"
        )
    return ok, message


def _rope_inputs(shape, seed, dtype=torch.float64):
    def make():
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(shape, generator=g, dtype=dtype),)

    return make


register(
    Exercise(
        id="ex-09-2",
        function="rope",
        reference=rope,
        cases=cases(
            None,
            {
                "one sequence: 5 positions, E = 4": _rope_inputs((5, 4), 0),
                "batch 2, heads 3, 6 positions, E = 8": _rope_inputs((2, 3, 6, 8), 1),
                "float32 input, 4 positions, E = 6": _rope_inputs((4, 6), 2, torch.float32),
                "hidden: batch 3, 40 positions, E = 16": _rope_inputs((3, 40, 16), 3),
            },
        ),
        misconceptions=[
            Misconception(
                "rotates the other way (sign of the sine flipped)",
                _rope_with(sign=-1.0),
                "a rotation by +theta sends (a, b) to (a cos - b sin, a sin + b cos); check the "
                "sign of each sine term.",
            ),
            Misconception(
                "pairs the two halves instead of neighbouring features",
                _rope_with(halves=True),
                "this exercise pairs feature 2i with feature 2i + 1 (as in the paper); some codebases "
                "pair i with i + E/2 instead, a different (also valid) layout that does not match.",
            ),
            Misconception(
                "frequency exponent i/E instead of 2i/E",
                _rope_with(freq_exp=1.0),
                "pair i turns with the frequency base^(-2i/E), the same exponent as the sinusoidal table.",
            ),
            Misconception(
                "positions counted from 1",
                _rope_with(start=1),
                "the first row is position 0 and must come out unchanged.",
            ),
            Misconception(
                "angles computed in float32: float32's precision on a float64 x",
                _rope_float32_angles,
                "torch.arange and the powers of 10000 are float32 by default: make the positions "
                "and the frequencies in x's dtype (dtype=x.dtype), so that a float64 x is rotated "
                "in float64.",
            ),
        ],
        hints=(
            "RoPE is a rotation in each 2-D plane of neighbouring features, by an angle that grows with the "
            "position.",
            "compute one angle per (position, pair) as an (L, E/2) table; take a = x[..., 0::2] and "
            "b = x[..., 1::2], rotate, and write the results back into the even and odd columns.",
            "each pair turns by its own angle, position times 10000 to the power -2k / E; the rotated pair "
            "is (a cos - b sin, a sin + b cos) of that angle, written back into the same two columns.",
        ),
        forbidden=_POSITIONS,
        rtol=FLOAT64_TOLERANCE,
        atol=FLOAT64_TOLERANCE,
        compare=_rope_precision,
    )
)

# --------------------------------------------------------------------------- ex-09-3 ALiBi bias


def alibi(num_heads: int, L: int) -> torch.Tensor:
    """float32 (num_heads, L, L): -m_h (i - j) for j <= i, -inf for j > i, m_h = 2^(-8(h+1)/num_heads)."""
    return alibi_bias(num_heads, L, L)


def _alibi_with(slope_shift=1, sign=-1.0, future=-math.inf, symmetric=False, past_masked=False):
    def bias(num_heads, L):
        h = torch.arange(num_heads, dtype=torch.float32)
        m = 2.0 ** (-8.0 * (h + slope_shift) / num_heads)  # (h,)
        i = torch.arange(L, dtype=torch.float32)[:, None]
        j = torch.arange(L, dtype=torch.float32)[None, :]
        distance = (i - j).abs() if symmetric else i - j  # (L, L)
        out = sign * m[:, None, None] * distance + 0.0  # (h, L, L)
        if past_masked:  # the -inf below the diagonal, the bias above
            return out.masked_fill(j < i, future)
        return out if symmetric else out.masked_fill(j > i, future)

    return bias


register(
    Exercise(
        id="ex-09-3",
        function="alibi",
        reference=alibi,
        cases=cases(
            None,
            {
                "2 heads, 4 positions": (2, 4),
                "8 heads, 5 positions": (8, 5),
                "1 head, 1 position": (1, 1),
                "hidden: 4 heads, 12 positions": (4, 12),
            },
        ),
        misconceptions=[
            Misconception(
                "slopes start at h = 0 (the first head gets slope 1)",
                _alibi_with(slope_shift=0),
                "head h (counted from 0) has slope 2^(-8(h + 1) / num_heads): the first slope is "
                "2^(-8/num_heads), the last 2^(-8).",
            ),
            Misconception(
                "the bias rewards distance (sign flipped)",
                _alibi_with(sign=1.0),
                "keys further back must get a *lower* score: the bias is minus the slope times the distance.",
            ),
            Misconception(
                "future keys get 0 instead of -inf",
                _alibi_with(future=0.0),
                "ALiBi is used with a causal model: keys after the query must be impossible to attend to.",
            ),
            Misconception(
                "future keys get a penalty by distance instead of -inf",
                _alibi_with(symmetric=True),
                "a distance penalty on both sides is the encoder variant; here keys after the query are "
                "masked out completely.",
            ),
            Misconception(
                "future keys get -1e9 instead of -inf",
                _alibi_with(future=-1e9),
                "the text asks for -inf above the diagonal: -1e9 is a large finite number, and a bias "
                "table is added to scores of any size, so it does not block a key for certain.",
            ),
            Misconception(
                "the -inf on the wrong side: keys before the query masked, later keys biased",
                _alibi_with(past_masked=True),
                "rows are queries i and columns keys j; the keys the query may not see are the later "
                "ones, j > i (above the diagonal).",
            ),
        ],
        hints=(
            "the bias penalises distance: the further back a key, the lower its score; later keys are "
            "not allowed at all.",
            "compute the distance i - j as an (L, L) table, multiply by one slope per head (broadcast to "
            "(num_heads, L, L)), then mask the keys after each query.",
            "the slopes form a geometric sequence over the heads (the exercise's formula, with r counted "
            "from 0); the bias is minus the slope times the distance on and below the diagonal, and "
            "-inf above it (masked_fill or torch.where).",
        ),
        forbidden=_POSITIONS,
        rtol=1e-5,
        atol=1e-6,
    )
)

# --------------------------------------------------------------------------- ex-09-4 RoPE, halves layout


def _halves_to_pairs(E: int) -> torch.Tensor:
    """Feature order that puts feature k beside feature k + E/2: (0, E/2, 1, E/2 + 1, ...)."""
    half = torch.arange(E // 2)
    return torch.stack((half, half + E // 2), dim=-1).flatten()  # (E,)


def rope_halves(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE in the layout of GPT-NeoX and Hugging Face's Llama: feature k is paired with feature k + E/2.

    The paper's rotation (neighbouring pairs, :func:`attnlib.positions.apply_rope`)
    applied to the features reordered so that k and k + E/2 sit side by side,
    then put back in their order: the two layouts differ by a permutation of
    the features only.
    """
    order = _halves_to_pairs(x.shape[-1])  # (E,)
    return apply_rope(x[..., order], positions)[..., torch.argsort(order)]


def _rope_halves_with(sign=1.0, use_positions=True, neighbours=False, interleaved_angles=False, freq_exp=2.0):
    def rotate(x, positions):
        L, E = x.shape[-2], x.shape[-1]
        p = positions.to(torch.float64) if use_positions else torch.arange(L, dtype=torch.float64)
        k = torch.arange(E // 2, dtype=torch.float64)
        phi = sign * p[:, None] * 10000.0 ** (-freq_exp * k / E)  # (L, E/2)
        cos, sin = torch.cos(phi).to(x.dtype), torch.sin(phi).to(x.dtype)
        if neighbours:
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
        if interleaved_angles:  # the angles laid out for neighbouring pairs, the rotation by halves
            cos = cos.repeat_interleave(2, dim=-1)  # (L, E)
            sin = sin.repeat_interleave(2, dim=-1)
            swapped = torch.cat((-x[..., E // 2 :], x[..., : E // 2]), dim=-1)
            return x * cos + swapped * sin
        a, b = x[..., : E // 2], x[..., E // 2 :]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)

    return rotate


def _halves_inputs(shape, first_position, seed, dtype=torch.float64):
    def make():
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g, dtype=dtype)
        return x, torch.arange(first_position, first_position + shape[-2])

    return make


def _same_dtype(expected, got, exercise):
    """compare_outputs after the dtype itself: ex-09-4's text asks for x's dtype, not only its kind."""
    if isinstance(expected, np.ndarray) and isinstance(got, np.ndarray) and got.dtype != expected.dtype:
        return False, (
            f"expected a tensor of x's dtype ({expected.dtype}), got {got.dtype}: the dtype is not "
            "kept (the text asks for the same shape and dtype as x; compute in a finer dtype if you "
            "like, and give the result back in x's)"
        )
    return compare_outputs(expected, got, exercise.rtol, exercise.atol)


register(
    Exercise(
        id="ex-09-4",
        function="rope_halves",
        reference=rope_halves,
        cases=cases(
            None,
            {
                "one sequence: positions 0 .. 4, E = 4": _halves_inputs((5, 4), 0, 0),
                "batch 2, heads 3, positions 0 .. 5, E = 8": _halves_inputs((2, 3, 6, 8), 0, 1),
                "positions 7 .. 10 (after 7 cached tokens), E = 6": _halves_inputs((4, 6), 7, 2),
                "float32 input, positions 0 .. 3, E = 6": _halves_inputs((4, 6), 0, 3, torch.float32),
                "hidden: batch 3, positions 0 .. 39, E = 16": _halves_inputs((3, 40, 16), 0, 4),
                "hidden: positions 100 .. 119, E = 8": _halves_inputs((2, 20, 8), 100, 5),
                "hidden: float32 input, positions 3 .. 12, E = 8": _halves_inputs(
                    (2, 10, 8), 3, 6, torch.float32
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "pairs neighbouring features (the paper's layout), not the two halves",
                _rope_halves_with(neighbours=True),
                "in this layout feature k turns together with feature k + E/2: split the last axis "
                "into a first and a second half, not into even and odd columns.",
            ),
            Misconception(
                "ignores the positions argument (counts the rows from 0)",
                _rope_halves_with(use_positions=False),
                "the angle of a row comes from its entry in `positions`, which need not start at 0 "
                "(a model decoding after cached tokens passes their later positions).",
            ),
            Misconception(
                "rotates the other way (sign of the sine flipped)",
                _rope_halves_with(sign=-1.0),
                "a rotation by +phi sends (a, b) to (a cos - b sin, a sin + b cos); check the sign of "
                "each sine term.",
            ),
            Misconception(
                "angles laid out for neighbouring pairs (repeat_interleave) while rotating halves",
                _rope_halves_with(interleaved_angles=True),
                "when the pairs are (k, k + E/2), feature k and feature k + E/2 need the same angle: "
                "the angle table for the full width is the (L, E/2) table twice, side by side.",
            ),
            Misconception(
                "frequency exponent k/E instead of 2k/E",
                _rope_halves_with(freq_exp=1.0),
                "pair k turns with theta_k = 10000^(-2k/E), as in exercise 09.2: with k running to E/2 - 1, "
                "the exponent runs to almost 1.",
            ),
        ],
        hints=(
            "it is the rotation of exercise 09.2; only the partner of feature k changes (now feature "
            "k + E/2), and each row's angle comes from its given position.",
            "take a = x[..., :E/2] and b = x[..., E/2:]; build the (L, E/2) angle table from "
            "`positions`, rotate, and join the two halves again with torch.cat.",
            "the angle of row r and pair k is the row's entry in `positions` times 10000 to the power "
            "-2k / E; rotate (first half, second half) by it as in exercise 09.2, in x's dtype.",
        ),
        forbidden=_POSITIONS,
        rtol=1e-5,
        atol=1e-5,
        compare=_same_dtype,
    )
)
