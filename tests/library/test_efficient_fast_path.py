"""The fast path of tiled attention's forward (issue 15): `tiled._fold_settled`.

After a block of query rows has seen an allowed key in every row, the forward
lets the score matmul subtract a reference maximum and keeps it (no max, no
subtraction, no rescaling), and redoes a tile on the exact path when its scores
overshoot the reference. These tests pin each branch against SDPA in float64.
"""

import pytest
import torch
import torch.nn.functional as F

import attnlib.efficient as eff
import attnlib.efficient.tiled as tiled


@pytest.fixture(autouse=True)
def fast_path_on_small_tiles(monkeypatch):
    """These tests use small tiles; the forward takes its fast path from 2**16 scores on."""
    monkeypatch.setattr(tiled, "_FAST_PATH_MIN_SCORES", 0)


def _qkv(L, S, E=8, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1, 2, n, E, generator=g, dtype=dtype) for n in (L, S, S))


def _count_paths(monkeypatch):
    """Record (settled, folded) for every tile folded: the fast path's answer, or True for the exact one."""
    calls = []
    exact, settled = tiled._fold_exact, tiled._fold_settled

    def counting_exact(*args):
        exact(*args)
        calls.append((False, True))

    def counting_settled(*args):
        folded = settled(*args)
        calls.append((True, folded))
        return folded

    monkeypatch.setattr(tiled, "_fold_exact", counting_exact)
    monkeypatch.setattr(tiled, "_fold_settled", counting_settled)
    return calls


def test_later_tiles_take_the_fast_path_and_agree_with_sdpa(monkeypatch):
    calls = _count_paths(monkeypatch)
    q, k, v = _qkv(8, 32)
    out = eff.tiled_attention(q, k, v, block_q=8, block_k=8)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=1e-12, atol=1e-12)
    # one exact tile per head block, then three settled ones that succeed
    assert calls == [(False, True)] + [(True, True)] * 3


def test_a_tile_that_overshoots_the_reference_is_redone_exactly(monkeypatch):
    calls = _count_paths(monkeypatch)
    q, k, v = _qkv(4, 16)
    k = k.clone()
    k[..., 8:, :] = 40.0 * q[..., :1, :].sum(dim=-2, keepdim=True)  # later keys score far higher
    out = eff.tiled_attention(q, k, v, block_q=4, block_k=8)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=1e-10, atol=1e-12)
    assert (True, False) in calls  # the fast path refused the second tile ...
    assert calls[-1] == (False, True)  # ... and the exact path folded it


def test_rows_without_an_allowed_key_in_the_first_tile_stay_exact():
    q, k, v = _qkv(6, 24)
    key_mask = torch.ones(24, dtype=torch.bool)
    key_mask[:10] = False  # the first tile (8 keys) and part of the second are padding
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[None, :])
    out = eff.tiled_attention(q, k, v, key_mask=key_mask, block_q=3, block_k=8)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    # causal below the diagonal: rows 0..2 never see a key (zero output), the rest settle
    out = eff.tiled_attention(q, k, v, is_causal=True, diagonal=-3, block_q=3, block_k=2)
    allowed = torch.ones(6, 24, dtype=torch.bool).tril(diagonal=-3)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    assert out[..., :3, :].eq(0).all()
    torch.testing.assert_close(out[..., 3:, :], expected[..., 3:, :], rtol=1e-12, atol=1e-12)


def test_large_score_offsets_and_causal_agree_with_sdpa():
    q, k, v = _qkv(40, 40, E=4)
    q = q * 30.0  # scores of several hundred: an exact max matters
    for kwargs in ({}, {"is_causal": True}):
        expected = F.scaled_dot_product_attention(q, k, v, **kwargs)
        out = eff.tiled_attention(q, k, v, block_q=16, block_k=8, **kwargs)
        torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_the_fast_path_keeps_gradients_and_float32_agreement():
    q, k, v = (t.float().requires_grad_() for t in _qkv(64, 96, E=16))
    grad = torch.randn(1, 2, 64, 16, generator=torch.Generator().manual_seed(1))
    out = eff.tiled_attention(q, k, v, block_q=16, block_k=32)
    ref = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    mine = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(ref, (q, k, v), grad)
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_a_nan_score_in_a_settled_tile_makes_its_row_nan():
    q, k, v = _qkv(4, 16)
    k = k.clone()
    k[0, 0, 12, 0] = float("nan")  # only in the second tile, which is settled
    out = eff.tiled_attention(q, k, v, block_q=4, block_k=8)
    assert out[0, 0].isnan().all() and not out[0, 1].isnan().any()


def test_small_tiles_take_the_exact_path_only(monkeypatch):
    monkeypatch.setattr(tiled, "_FAST_PATH_MIN_SCORES", 2 * 8 * 8 + 1)  # one score more than a tile
    calls = _count_paths(monkeypatch)
    q, k, v = _qkv(8, 32)
    eff.tiled_attention(q, k, v, block_q=8, block_k=8)
    assert calls == [(False, True)] * 4


def test_attn_mask_kinds_are_refused_as_attention_refuses_them():
    """One rule for mask kinds (masks.check_mask_tensor), checked before the shape (#17)."""
    from attnlib.attention import scaled_dot_product_attention

    q, k, v = (t.float() for t in _qkv(3, 4))
    for bad, kind in (
        ([[True] * 4] * 3, "got list"),
        (torch.ones(5, 7, dtype=torch.int64), "got dtype torch.int64"),
    ):
        messages = []
        for fn in (eff.tiled_attention, scaled_dot_product_attention):
            with pytest.raises(
                TypeError, match=f"attn_mask must be a torch.Tensor of dtype bool or floating, {kind}"
            ):
                fn(q, k, v, attn_mask=bad)
            try:
                fn(q, k, v, attn_mask=bad)
            except TypeError as error:
                messages.append(str(error).split(": ", 1)[1])  # without the function's name
        assert messages[0] == messages[1]
