"""attnlib.vision (chapter 11): patches, the patch embedding and attention rollout.

Against torch (``F.unfold``, ``nn.Conv2d``) in float64 and against their defining properties:
patchify/unpatchify are inverse rearrangements; rollout rows are distributions, the identity is
neutral, and the product runs first layer on the right.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlib
from attnlib import PatchEmbedding, attention_rollout, patchify, unpatchify


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def random_weights(*shape, seed=0):
    """Row-stochastic (..., L, L) attention weights."""
    return rand(*shape, seed=seed).mul(3).softmax(-1)


@pytest.mark.parametrize(
    ("shape", "p"), [((2, 1, 8, 8), 2), ((3, 3, 6, 4), 2), ((1, 2, 9, 6), 3), ((2, 1, 4, 4), 1)]
)
def test_patchify_equals_unfold(shape, p):
    """Same values, same order as torch's F.unfold with kernel = stride (patches last)."""
    x = rand(*shape)
    expected = F.unfold(x, kernel_size=p, stride=p).transpose(1, 2)  # (B, N, C p p)
    assert torch.equal(patchify(x, p), expected)


def test_patchify_reads_patches_row_major():
    image = torch.arange(2 * 4 * 6).reshape(2, 4, 6)  # (C, H, W), integers: exact
    patches = patchify(image, 2)  # (6, 8): a 2 x 3 grid of patches
    assert patches.shape == (6, 8)
    # patch 4 = grid row 1, column 1: rows 2-3, columns 2-3 of both channels
    assert patches[4].tolist() == image[:, 2:4, 2:4].flatten().tolist()


@pytest.mark.parametrize(
    ("shape", "p"), [((2, 1, 8, 8), 2), ((5, 3, 6, 4), 2), ((4, 2, 9, 6), 3), ((1, 8, 8), 4)]
)
def test_round_trip_is_exact_both_ways(shape, p):
    x = rand(*shape)
    H, W = shape[-2:]
    assert torch.equal(unpatchify(patchify(x, p), p, H, W), x)
    patches = patchify(x, p)
    assert torch.equal(patchify(unpatchify(patches, p, H, W), p), patches)


def test_patchify_keeps_extra_leading_dimensions_and_dtype():
    x = torch.arange(3 * 2 * 1 * 4 * 4, dtype=torch.int32).reshape(3, 2, 1, 4, 4)
    out = patchify(x, 2)
    assert out.shape == (3, 2, 4, 4) and out.dtype == torch.int32
    for i in range(3):
        assert torch.equal(out[i], patchify(x[i], 2))


def test_patch_embedding_equals_a_strided_conv():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, kernel_size=2, stride=2).double()
    embed = PatchEmbedding.from_conv(conv)
    x = rand(2, 3, 6, 4)
    expected = conv(x).flatten(2).transpose(1, 2)  # (B, D, rows, cols) -> (B, N, D)
    torch.testing.assert_close(embed(x), expected, rtol=0, atol=1e-12)


def test_patch_embedding_shape_and_refusals():
    embed = PatchEmbedding(1, 2, 16)
    assert embed(torch.zeros(3, 1, 8, 8)).shape == (3, 16, 16)
    with pytest.raises(ValueError, match=r"PatchEmbedding: images must be \(\.\.\., 1, H, W\)"):
        embed(torch.zeros(3, 2, 8, 8))
    with pytest.raises(TypeError, match="PatchEmbedding: images must be a torch.Tensor"):
        embed([[0.0]])
    with pytest.raises(ValueError, match="PatchEmbedding: patch_size must be a positive integer"):
        PatchEmbedding(1, 0, 4)
    with pytest.raises(ValueError, match="PatchEmbedding.from_conv: conv must have a square kernel"):
        PatchEmbedding.from_conv(nn.Conv2d(1, 4, 3, stride=1))
    with pytest.raises(TypeError, match="PatchEmbedding.from_conv: conv must be an nn.Conv2d"):
        PatchEmbedding.from_conv(nn.Linear(2, 2))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: patchify([[1.0]], 2), TypeError, "patchify: images must be a torch.Tensor"),
        (lambda: patchify(torch.zeros(1, 6, 6), 4), ValueError, "patchify: patch_size 4 must divide"),
        (lambda: patchify(torch.zeros(6, 6), 2), ValueError, r"patchify: images must be \(\.\.\., C, H, W\)"),
        (lambda: patchify(torch.zeros(1, 6, 6), 0), ValueError, "patchify: patch_size must be a positive"),
        (lambda: patchify(torch.zeros(1, 6, 6), 2.0), ValueError, "patchify: patch_size must be a positive"),
        (lambda: unpatchify(torch.zeros(9, 4), 2, 6, 4), ValueError, "unpatchify: patches must hold"),
        (lambda: unpatchify(torch.zeros(6, 5), 2, 6, 4), ValueError, "unpatchify: each patch must hold"),
        (lambda: unpatchify(torch.zeros(6, 4), 2, 5, 4), ValueError, "unpatchify: patch_size 2 must divide"),
        (lambda: unpatchify(torch.zeros(6, 4), 2, 0, 4), ValueError, "unpatchify: height must be a positive"),
        (lambda: unpatchify("x", 2, 6, 4), TypeError, "unpatchify: patches must be a torch.Tensor"),
    ],
)
def test_bad_input_is_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_rollout_rows_are_distributions():
    w = random_weights(3, 2, 4, 5, 5)  # layers, batch, heads, L, L
    for residual in (True, False):
        r = attention_rollout(w, residual=residual)
        assert r.shape == (2, 5, 5)
        torch.testing.assert_close(r.sum(-1), torch.ones(2, 5, dtype=torch.float64), rtol=0, atol=1e-12)
        assert (r >= 0).all()


def test_rollout_is_the_product_of_head_means_first_layer_on_the_right():
    w = random_weights(3, 2, 4, 5, 5)
    eye = torch.eye(5, dtype=torch.float64)
    a = [0.5 * layer.mean(-3) + 0.5 * eye for layer in w]  # (2, 5, 5) each
    torch.testing.assert_close(attention_rollout(w), a[2] @ a[1] @ a[0], rtol=0, atol=1e-12)
    plain = [layer.mean(-3) for layer in w]
    expected = plain[2] @ plain[1] @ plain[0]
    torch.testing.assert_close(attention_rollout(w, residual=False), expected, rtol=0, atol=1e-12)
    # a list of layers is the same as the stacked tensor
    torch.testing.assert_close(attention_rollout(list(w)), attention_rollout(w), rtol=0, atol=0)


def test_rollout_of_one_layer_and_of_identity_layers():
    w = random_weights(1, 3, 6, 6, seed=1)  # one layer, 3 heads
    torch.testing.assert_close(attention_rollout(w, residual=False), w[0].mean(0), rtol=0, atol=1e-15)
    eye = torch.eye(6, dtype=torch.float64).expand(4, 3, 6, 6)  # 4 layers attending to themselves
    torch.testing.assert_close(attention_rollout(eye), torch.eye(6, dtype=torch.float64), rtol=0, atol=0)


def test_rollout_refuses_bad_weights_by_name():
    with pytest.raises(ValueError, match=r"attention_rollout: weights must be \(layers, \.\.\., h, L, L\)"):
        attention_rollout(torch.zeros(2, 3, 3))
    with pytest.raises(ValueError, match="attention_rollout: weights must hold at least one layer"):
        attention_rollout([])
    with pytest.raises(ValueError, match=r"weights\[1\] is \(1, 4, 4\)"):
        attention_rollout([torch.zeros(1, 3, 3), torch.zeros(1, 4, 4)])
    with pytest.raises(ValueError, match=r"each layer's weights must be \(\.\.\., h, L, L\)"):
        attention_rollout(torch.zeros(2, 1, 3, 4))
    with pytest.raises(TypeError, match="attention_rollout: weights must be a torch.Tensor or a sequence"):
        attention_rollout(3.0)
    with pytest.raises(TypeError, match="attention_rollout: residual must be a bool"):
        attention_rollout(torch.zeros(1, 1, 3, 3), residual="yes")


def test_exported():
    for name in ("PatchEmbedding", "attention_rollout", "patchify", "unpatchify"):
        assert name in attnlib.__all__
