"""Chapter 05's claims about masks, checked against torch's own SDPA in float64."""

import pytest
import torch
import torch.nn.functional as F
from page_checks import page_problems

import attnlib
from attnlib.checks.ch05_masks import build_causal_mask, masked_attention, padding_mask_from_lengths


def _qkv(B=3, h=2, L=5, S=5, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, h, n, d, generator=g, dtype=torch.float64) for n in (L, S, S))


def test_padded_keys_and_values_have_no_effect():
    q, k, v = _qkv()
    key_mask = attnlib.padding_mask([5, 2, 3])[:, None, None, :]  # (B, 1, 1, S)
    pad = ~key_mask.transpose(-1, -2)  # (B, 1, S, 1)
    k2 = torch.where(pad, 1e3 * torch.randn_like(k), k)
    v2 = torch.where(pad, 1e3 * torch.randn_like(v), v)
    out = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
    out2 = attnlib.scaled_dot_product_attention(q, k2, v2, attn_mask=key_mask)
    assert torch.equal(out, out2)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask))


@pytest.mark.parametrize("t", range(6))
def test_causal_mask_has_no_future_leakage(t):
    T, d = 6, 4
    q, k, v = _qkv(B=1, h=1, L=T, S=T, d=d, seed=t)
    k2, v2 = k.clone(), v.clone()
    k2[..., t + 1 :, :] = torch.randn_like(k2[..., t + 1 :, :])
    v2[..., t + 1 :, :] = torch.randn_like(v2[..., t + 1 :, :])
    mask = attnlib.causal_mask(T)
    out = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out2 = attnlib.scaled_dot_product_attention(q, k2, v2, attn_mask=mask)
    assert torch.equal(out[..., : t + 1, :], out2[..., : t + 1, :])
    if t < T - 1:
        assert not torch.equal(out[..., t + 1 :, :], out2[..., t + 1 :, :])


def test_causal_alignments():
    assert torch.equal(attnlib.causal_mask(2, 5), torch.ones(2, 5, dtype=torch.bool).tril())
    # bottom right: the 2 queries are the last 2 of 5 positions
    assert attnlib.causal_mask(2, 5, diagonal=3).sum(-1).tolist() == [4, 5]
    # top left never empties a row; bottom right with L > S does
    assert bool(attnlib.causal_mask(5, 3).any(-1).all())
    assert (~attnlib.causal_mask(5, 3, diagonal=-2).any(-1)).sum().item() == 2


def test_fully_masked_row_is_zero_like_torch_sdpa():
    q, k, v = _qkv(B=1, h=1, L=3, S=4)
    mask = torch.tensor([[True, False, True, False], [False] * 4, [True] * 4])
    out, w = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    assert torch.equal(out[..., 1, :], torch.zeros_like(out[..., 1, :]))
    assert torch.equal(w[..., 1, :], torch.zeros_like(w[..., 1, :]))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert torch.isnan(torch.softmax(torch.full((4,), float("-inf")), -1)).all()


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("mask_kind", ["attn_mask", "key_padding_mask"])
def test_nn_multihead_attention_fully_masked_row_depends_on_its_settings(
    need_weights, training, batch_first, grad, mask_kind
):
    """Chapter 05's table (torch 2.13): NaN with need_weights=True and on the fast path
    (eval, batch_first, autograd off); otherwise a zero attention row, i.e. the output
    projection's bias."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(4, 2, batch_first=batch_first)
    torch.nn.init.normal_(mha.out_proj.bias)
    mha.train(training)
    x = torch.randn(1, 3, 4)
    x_in = x if batch_first else x.transpose(0, 1)
    if mask_kind == "attn_mask":
        kwargs = {"attn_mask": torch.tensor([[False] * 3, [True] * 3, [False] * 3])}
    else:
        kwargs = {"key_padding_mask": torch.ones(1, 3, dtype=torch.bool)}
    with torch.set_grad_enabled(grad):
        out, w = mha(x_in, x_in, x_in, need_weights=need_weights, **kwargs)
    row = (out if batch_first else out.transpose(0, 1))[0, 1].detach()
    fast_path = not training and batch_first and not grad
    if need_weights or fast_path:
        assert torch.isnan(row).all()
    else:
        assert torch.equal(row, mha.out_proj.bias.detach())
    if need_weights:
        assert torch.isnan(w[0, 1]).all()
    else:
        assert w is None


def test_nn_multihead_attention_gives_nan_on_a_fully_masked_row():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 2, 4), torch.randn(1, 2, 4)
    blocked = torch.tensor([[False, True], [True, True], [False, False]])  # torch: True = blocked
    out, _ = mha(q, k, v, attn_mask=blocked)
    assert torch.isnan(out[0, 1]).all() and torch.isfinite(out[0, [0, 2]]).all()


def test_additive_and_bool_masks_agree_and_half_precision_limits():
    q, k, v = _qkv()
    mask = attnlib.combine_masks(attnlib.padding_mask([5, 2, 3])[:, None, None, :], attnlib.causal_mask(5))
    assert mask.shape == (3, 1, 5, 5)
    a = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    b = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=attnlib.as_additive_mask(mask, torch.float64))
    assert torch.equal(a, b)
    assert torch.tensor(-1e9).half().item() == float("-inf")
    fmin = torch.tensor(torch.finfo(torch.float16).min, dtype=torch.float16)
    assert (fmin + torch.tensor(-20.0, dtype=torch.float16)).item() == float("-inf")


def test_mask_after_softmax_breaks_row_sums():
    scores = torch.randn(4, 5, dtype=torch.float64)
    mask = attnlib.padding_mask([3], max_len=5)  # (1, S)
    after = torch.softmax(scores, -1) * mask
    assert (after.sum(-1) < 1 - 1e-3).all()
    ones = torch.ones(4, dtype=torch.float64)
    torch.testing.assert_close(attnlib.masked_softmax(scores, mask).sum(-1), ones)


def test_exercise_references():
    assert padding_mask_from_lengths(torch.tensor([2, 0]), 3).tolist() == [[True, True, False], [False] * 3]
    assert torch.equal(build_causal_mask(3, 4), torch.ones(3, 4, dtype=torch.bool).tril())
    q, k, v = _qkv(B=2, h=1, L=3, S=4)
    mask = attnlib.padding_mask([4, 0])[:, None, None, :]
    out, w = masked_attention(q, k, v, mask)
    assert torch.equal(out[1], torch.zeros_like(out[1])) and torch.equal(w[1], torch.zeros_like(w[1]))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize(
    "notebook",
    [
        "00-how-to-use",
        "03-queries-keys-values",
        "04-scaling-softmax",
        "05-masks",
        "06-multi-head-attention",
    ],
)
def test_chapter_source_escapes_tokens_glues_its_figures_and_fits_80_columns(notebook):
    from pathlib import Path

    book = Path(__file__).resolve().parents[2] / "book"
    assert page_problems(book / f"{notebook}.ipynb") == []


def test_the_page_check_finds_each_problem(tmp_path):
    """The check above is not vacuous: a bare <s>, an unglued name and a long line are found."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(
        cells=[
            new_markdown_cell("A caption with <s> and `<pad>` and {glue:text}`missing:.2f`."),
            new_code_cell("x = 1  # " + "y" * 80),
        ]
    )
    nbformat.write(nb, tmp_path / "99-probe.ipynb")
    problems = page_problems(tmp_path / "99-probe.ipynb")
    assert any("unescaped <s>" in p for p in problems)
    assert not any("<pad>" in p for p in problems)  # in backticks: fine
    assert any("`missing` is never glued" in p for p in problems)
    assert any("code line of" in p for p in problems)
