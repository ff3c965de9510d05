"""Chapter 11 exercises: patches and back, the class token and positions, attention rollout."""

from __future__ import annotations

import functools

import torch

from attnlib.checks._cases import cases
from attnlib.checks.core import Exercise, Misconception, register

# Calls that already cut images into patches or put them back: every exercise here forbids them.
_PATCHES = (
    "attnlib.vision",
    "attnlib.chapters.vit",
    "torch.nn.functional.unfold",
    "torch.nn.functional.fold",
    "torch.nn.Unfold",
    "torch.nn.Fold",
)


def _images(batch, channels, height, width, seed):
    """float64 images (batch, channels, height, width) from a private generator."""

    def make():
        g = torch.Generator().manual_seed(seed)
        return torch.randn(batch, channels, height, width, generator=g, dtype=torch.float64)

    return make


def _counting_image(channels, height, width):
    """One image whose pixels count 0, 1, 2, ... (easy to read in feedback), float64."""
    return lambda: torch.arange(float(channels * height * width), dtype=torch.float64).reshape(
        1, channels, height, width
    )


# --------------------------------------------------------------------------- ex-11-1 patchify


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C * p * p): patches row-major, each flattened in (C, p, p) order."""
    B, C, H, W = images.shape
    p = patch_size
    x = images.reshape(B, C, H // p, p, W // p, p)  # (B, C, rows, p, cols, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, p, p)
    return x.reshape(B, (H // p) * (W // p), C * p * p)


def _patchify_with_mistake(images, patch_size, *, mistake):
    """patchify with one known mistake: the wrong answers of ex-11-1."""
    B, C, H, W = images.shape
    p = patch_size
    if mistake == "reshape only":  # no permute: runs of C p p consecutive values
        return images.reshape(B, (H // p) * (W // p), C * p * p)
    x = images.reshape(B, C, H // p, p, W // p, p)
    if mistake == "column-major grid":
        x = x.permute(0, 4, 2, 1, 3, 5)  # (B, cols, rows, C, p, p)
    elif mistake == "channels last":
        x = x.permute(0, 2, 4, 3, 5, 1)  # (B, rows, cols, p, p, C)
    elif mistake == "patch transposed":
        x = x.permute(0, 2, 4, 1, 5, 3)  # (B, rows, cols, C, p(w), p(h))
    elif mistake == "pixel runs":  # a patch = p * p consecutive pixels of a row-major flattening
        return images.reshape(B, C, -1, p * p).permute(0, 2, 1, 3).reshape(B, -1, C * p * p)
    else:
        raise ValueError(f"_patchify_with_mistake: unknown mistake {mistake!r}")
    return x.reshape(B, (H // p) * (W // p), C * p * p)


register(
    Exercise(
        id="ex-11-1",
        function="patchify",
        reference=patchify,
        cases=cases(
            None,
            {
                "one 4x4 image counting 0..15, p = 2": lambda: (_counting_image(1, 4, 4)(), 2),
                "batch 2, 3 channels, 6x4 images, p = 2": lambda: (_images(2, 3, 6, 4, 0)(), 2),
                "hidden: batch 3, 2 channels, 9x6 images, p = 3": lambda: (_images(3, 2, 9, 6, 1)(), 3),
                "hidden: p = 1, every pixel a patch": lambda: (_images(2, 2, 3, 5, 2)(), 1),
                "hidden: p = 4 on 8x8 digits-sized images, batch 5": lambda: (_images(5, 1, 8, 8, 3)(), 4),
                "hidden: one 2-channel 4x6 image counting": lambda: (_counting_image(2, 4, 6)(), 2),
            },
        ),
        misconceptions=[
            Misconception(
                "reshape without moving the axes",
                functools.partial(_patchify_with_mistake, mistake="reshape only"),
                "a reshape alone keeps the memory order: its 'patches' are runs of consecutive values "
                "along the rows, not squares. Split H and W into (patch row, inside) and (patch column, "
                "inside), then move the axes before flattening.",
            ),
            Misconception(
                "patches in column-major order",
                functools.partial(_patchify_with_mistake, mistake="column-major grid"),
                "the patches are numbered row by row, as one reads: patch n sits in patch row n // (W/p) "
                "and patch column n % (W/p).",
            ),
            Misconception(
                "channels last inside a patch",
                functools.partial(_patchify_with_mistake, mistake="channels last"),
                "inside a patch the values are flattened in (C, p, p) order, channel first, as a Conv2d "
                "weight is laid out.",
            ),
            Misconception(
                "each patch read column by column",
                functools.partial(_patchify_with_mistake, mistake="patch transposed"),
                "inside a patch the pixels are read row by row (the pixel row is the slower index), not "
                "column by column.",
            ),
            Misconception(
                "runs of p * p consecutive pixels instead of square patches",
                functools.partial(_patchify_with_mistake, mistake="pixel runs"),
                "a patch is a p x p square of the image, p pixels from each of p neighbouring rows, not "
                "p * p pixels in a row.",
            ),
        ],
        hints=(
            "a patch is a p x p square; the image is a grid of (H/p) x (W/p) of them, read row by row.",
            "reshape H into (H/p, p) and W into (W/p, p), then reorder the axes so that the grid comes "
            "first and each patch's (C, p, p) values come last.",
            "images (B, C, H, W) -> (B, C, H/p, p, W/p, p) -> permute to (B, H/p, W/p, C, p, p) -> "
            "reshape to (B, N, C p p).",
        ),
        forbidden=_PATCHES,
        rtol=0.0,
        atol=0.0,
    )
)

# --------------------------------------------------------------------------- ex-11-2 unpatchify


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """(B, N, C * p * p) -> (B, C, height, width): the inverse of :func:`patchify`."""
    B, N, K = patches.shape
    p = patch_size
    C = K // (p * p)
    x = patches.reshape(B, height // p, width // p, C, p, p)  # (B, rows, cols, C, p, p)
    x = x.permute(0, 3, 1, 4, 2, 5)  # (B, C, rows, p, cols, p)
    return x.reshape(B, C, height, width)


def _unpatchify_inputs(batch, channels, height, width, p, seed):
    return lambda: (patchify(_images(batch, channels, height, width, seed)(), p), p, height, width)


def _counting_patches(channels, height, width, p):
    return lambda: (patchify(_counting_image(channels, height, width)(), p), p, height, width)


def _unpatchify_with_mistake(patches, patch_size, height, width, *, mistake):
    """unpatchify with one known mistake: the wrong answers of ex-11-2."""
    B, N, K = patches.shape
    p = patch_size
    C = K // (p * p)
    if mistake == "reshape only":
        return patches.reshape(B, C, height, width)
    if mistake == "height and width swapped":
        height, width = width, height
        x = patches.reshape(B, height // p, width // p, C, p, p).permute(0, 3, 1, 4, 2, 5)
        return x.reshape(B, C, height, width).transpose(-2, -1)
    x = patches.reshape(B, height // p, width // p, C, p, p)
    if mistake == "inner axes not interleaved":  # (B, C, rows, cols, p, p) flattened
        x = x.permute(0, 3, 1, 2, 4, 5)
    elif mistake == "channels last":
        x = patches.reshape(B, height // p, width // p, p, p, C).permute(0, 5, 1, 3, 2, 4)
    else:
        raise ValueError(f"_unpatchify_with_mistake: unknown mistake {mistake!r}")
    return x.reshape(B, C, height, width)


register(
    Exercise(
        id="ex-11-2",
        function="unpatchify",
        reference=unpatchify,
        cases=cases(
            None,
            {
                "the patches of one 4x4 image counting 0..15, p = 2": _counting_patches(1, 4, 4, 2),
                "batch 2, 3 channels, 6x4 images, p = 2": _unpatchify_inputs(2, 3, 6, 4, 2, 0),
                "hidden: batch 3, 2 channels, 9x6 images, p = 3": _unpatchify_inputs(3, 2, 9, 6, 3, 1),
                "hidden: p = 1": _unpatchify_inputs(2, 2, 3, 5, 1, 2),
                "hidden: one patch covering the image (p = H = W = 4)": _unpatchify_inputs(2, 3, 4, 4, 4, 3),
                "hidden: batch 5 of 8x8 images, p = 2": _unpatchify_inputs(5, 1, 8, 8, 2, 4),
                "hidden: a 2-channel 2x6 image counting, p = 2": _counting_patches(2, 2, 6, 2),
            },
        ),
        misconceptions=[
            Misconception(
                "reshape without moving the axes",
                functools.partial(_unpatchify_with_mistake, mistake="reshape only"),
                "the patches' values are not in the image's memory order: split each patch into its "
                "(C, p, p) values and the sequence into the (H/p, W/p) grid, and move the axes back "
                "before the final reshape.",
            ),
            Misconception(
                "height and width swapped",
                functools.partial(_unpatchify_with_mistake, mistake="height and width swapped"),
                "the grid has height / p patch rows and width / p patch columns; on an image that is not "
                "square, swapping them puts every patch in the wrong place.",
            ),
            Misconception(
                "the grid and the inside of the patches not interleaved",
                functools.partial(_unpatchify_with_mistake, mistake="inner axes not interleaved"),
                "a pixel's row is (patch row, row inside the patch) and its column (patch column, column "
                "inside the patch): put each patch-grid axis next to its inside axis before the reshape.",
            ),
            Misconception(
                "each patch read as channels last",
                functools.partial(_unpatchify_with_mistake, mistake="channels last"),
                "each patch holds its values in (C, p, p) order, channel first, as patchify wrote them.",
            ),
        ],
        hints=(
            "undo patchify's steps in reverse order: the same reshape and permute, run backwards.",
            "the number of channels is the patch length divided by p * p; the grid is (height/p) x "
            "(width/p), row by row.",
            "patches (B, N, C p p) -> (B, H/p, W/p, C, p, p) -> permute to (B, C, H/p, p, W/p, p) -> "
            "reshape to (B, C, H, W).",
        ),
        forbidden=_PATCHES,
        rtol=0.0,
        atol=0.0,
    )
)

# --------------------------------------------------------------------------- ex-11-3 class token + positions


def vit_tokens(patch_vectors: torch.Tensor, cls_token: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """(B, N, D), (D,), (N + 1, D) -> (B, N + 1, D): the class token first, then a position on every token."""
    B = patch_vectors.shape[0]
    cls = cls_token.reshape(1, 1, -1).expand(B, 1, -1)  # (B, 1, D)
    return torch.cat([cls, patch_vectors], dim=1) + positions  # (B, N + 1, D)


def _tokens_inputs(batch, n, d, seed):
    def make():
        g = torch.Generator().manual_seed(seed)
        patches = torch.randn(batch, n, d, generator=g, dtype=torch.float64)
        cls = torch.randn(d, generator=g, dtype=torch.float64)
        positions = torch.randn(n + 1, d, generator=g, dtype=torch.float64)
        return patches, cls, positions

    return make


def _cls_last(patch_vectors, cls_token, positions):
    cls = cls_token.reshape(1, 1, -1).expand(patch_vectors.shape[0], 1, -1)
    return torch.cat([patch_vectors, cls], dim=1) + positions


def _cls_without_position(patch_vectors, cls_token, positions):
    cls = cls_token.reshape(1, 1, -1).expand(patch_vectors.shape[0], 1, -1)
    return torch.cat([cls, patch_vectors + positions[1:]], dim=1)


def _positions_before_cls(patch_vectors, cls_token, positions):
    """positions[:N] on the patches, then the class token in front with positions[N]."""
    n = patch_vectors.shape[1]
    cls = (cls_token + positions[n]).reshape(1, 1, -1).expand(patch_vectors.shape[0], 1, -1)
    return torch.cat([cls, patch_vectors + positions[:n]], dim=1)


def _cls_added_to_patches(patch_vectors, cls_token, positions):
    """The class token added to every patch vector, then positions 0..N-1: no extra token."""
    return patch_vectors + cls_token + positions[: patch_vectors.shape[1]]


register(
    Exercise(
        id="ex-11-3",
        function="vit_tokens",
        reference=vit_tokens,
        cases=cases(
            None,
            {
                "batch 2, 4 patches, D = 3": _tokens_inputs(2, 4, 3, 0),
                "batch 1, 1 patch, D = 2": _tokens_inputs(1, 1, 2, 1),
                "hidden: batch 5, 16 patches, D = 32": _tokens_inputs(5, 16, 32, 2),
                "hidden: batch 3, 9 patches, D = 1": _tokens_inputs(3, 9, 1, 3),
            },
        ),
        misconceptions=[
            Misconception(
                "the class token put last",
                _cls_last,
                "the class token goes in front of the patches: position 0, so the head reads token 0.",
            ),
            Misconception(
                "the class token gets no position",
                _cls_without_position,
                "the position table has N + 1 rows: row 0 is the class token's, and every token, the "
                "class token included, gets its row.",
            ),
            Misconception(
                "positions added before the class token is put in front",
                _positions_before_cls,
                "put the class token in front first, then add the N + 1 positions to the N + 1 tokens in "
                "order: the class token's position is row 0, the first patch's row 1.",
            ),
            Misconception(
                "the class token added to the patches instead of put in front of them",
                _cls_added_to_patches,
                "the class token is an extra token, concatenated in front: the result has N + 1 tokens.",
            ),
        ],
        hints=(
            "the sequence the encoder reads is one token longer than the patches: a learned token in "
            "front, then a learned position vector on every token.",
            "repeat the class token for every image of the batch, concatenate along the token axis, then "
            "add the (N + 1, D) table, which broadcasts over the batch.",
            "torch.cat([class token as (B, 1, D), patch_vectors], dim=1) + positions.",
        ),
        forbidden=_PATCHES,
        rtol=1e-12,
        atol=1e-12,
    )
)

# --------------------------------------------------------------------------- ex-11-4 attention rollout


def rollout(weights: torch.Tensor) -> torch.Tensor:
    """(layers, B, h, L, L) -> (B, L, L): heads averaged, 0.5 A + 0.5 I, then A_n ... A_2 A_1."""
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
    result = None
    for layer in weights:
        a = 0.5 * layer.mean(dim=1) + 0.5 * eye  # (B, L, L)
        result = a if result is None else a @ result
    return result


def _rollout_inputs(layers, batch, heads, length, seed, sharp=3.0):
    def make():
        g = torch.Generator().manual_seed(seed)
        scores = torch.randn(layers, batch, heads, length, length, generator=g, dtype=torch.float64)
        return ((sharp * scores).softmax(-1),)

    return make


def _rollout_with_mistake(weights, *, order="later left", residual="half", heads="mean", last_only=False):
    """rollout with one known mistake: the wrong answers of ex-11-4."""
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
    layers = weights[-1:] if last_only else weights
    if heads == "per head":  # roll out every head alone, then average
        result = None
        for layer in layers:
            a = 0.5 * layer + 0.5 * eye  # (B, h, L, L)
            result = a if result is None else a @ result
        return result.mean(dim=1)
    result = None
    for layer in layers:
        a = layer.max(dim=1).values if heads == "max" else layer.mean(dim=1)
        if residual == "half":
            a = 0.5 * a + 0.5 * eye
        elif residual == "plus":
            a = a + eye
        if result is None:
            result = a
        else:
            result = a @ result if order == "later left" else result @ a
    return result


register(
    Exercise(
        id="ex-11-4",
        function="rollout",
        reference=rollout,
        cases=cases(
            None,
            {
                "2 layers, batch 1, 2 heads, 3 tokens": _rollout_inputs(2, 1, 2, 3, 0),
                "3 layers, batch 2, 4 heads, 5 tokens": _rollout_inputs(3, 2, 4, 5, 1),
                "hidden: 1 layer, batch 2, 3 heads, 4 tokens": _rollout_inputs(1, 2, 3, 4, 2),
                "hidden: 4 layers, batch 3, 4 heads, 17 tokens (the chapter's ViT)": _rollout_inputs(
                    4, 3, 4, 17, 3
                ),
                "hidden: 2 layers, 1 head, 1 token": _rollout_inputs(2, 1, 1, 1, 4),
                "hidden: 3 layers, nearly one-hot weights": _rollout_inputs(3, 2, 2, 6, 5, sharp=12.0),
            },
        ),
        misconceptions=[
            Misconception(
                "the layers multiplied in the wrong order",
                functools.partial(_rollout_with_mistake, order="earlier left"),
                "the first layer acts first, so its matrix stands on the right: rollout = A_n ... A_2 A_1, "
                "each new layer multiplied from the left.",
            ),
            Misconception(
                "the residual path left out",
                functools.partial(_rollout_with_mistake, residual="none"),
                "each block adds its input back (the residual connection): count it as half of the flow, "
                "0.5 A + 0.5 I, before multiplying.",
            ),
            Misconception(
                "the identity added without halving (rows no longer sum to 1)",
                functools.partial(_rollout_with_mistake, residual="plus"),
                "A + I has rows that sum to 2: the mix of attention and residual is 0.5 A + 0.5 I, still a "
                "distribution over the tokens.",
            ),
            Misconception(
                "every head rolled out alone, then averaged",
                functools.partial(_rollout_with_mistake, heads="per head"),
                "the heads of a layer write into the same stream: average them within each layer first, "
                "then multiply the layers' averages.",
            ),
            Misconception(
                "the heads' maximum instead of their mean",
                functools.partial(_rollout_with_mistake, heads="max"),
                "rollout averages the heads' weights; the maximum is not a distribution over the tokens.",
            ),
            Misconception(
                "only the last layer",
                functools.partial(_rollout_with_mistake, last_only=True),
                "rollout follows the flow through every layer, from the input tokens up: multiply all of "
                "them.",
            ),
        ],
        hints=(
            "each layer mixes the tokens by its attention weights and keeps part of each token through the "
            "residual path; rollout follows that mixing from the input up through every layer.",
            "per layer: average the heads, mix in the identity for the residual path (rows must still sum "
            "to 1), then chain the layers by matrix products, the first layer acting first.",
            "A_l = 0.5 * mean over heads of W_l + 0.5 * I; rollout = A_n @ ... @ A_2 @ A_1.",
        ),
        forbidden=_PATCHES,
        rtol=1e-9,
        atol=1e-12,
    )
)
