"""The Vision Transformer drawn whole (chapter 11), in the style of :mod:`attnlib.figures.diagrams`.

Kept beside ``diagrams.py`` rather than in it: one module per picture family, sharing
its palette, canvas and boxes. Nothing here is measured: the digit is a hand-drawn 8x8
"3" (:data:`DIGIT`), so the picture is the same on every machine.
"""

from __future__ import annotations

import numpy as np

from ._draw import BLUE, FS, GREEN, GREY, ORANGE, PURPLE, _arrow, _box, _canvas

__all__ = ["DIGIT", "draw_vit"]

# a "3" in the 0-16 grey levels of scikit-learn's digits, drawn by hand for the diagram
DIGIT = np.array(
    [
        [0, 2, 12, 16, 15, 5, 0, 0],
        [0, 6, 13, 6, 12, 12, 0, 0],
        [0, 0, 0, 2, 14, 8, 0, 0],
        [0, 0, 6, 16, 14, 1, 0, 0],
        [0, 0, 1, 6, 14, 11, 0, 0],
        [0, 0, 0, 0, 3, 16, 4, 0],
        [0, 5, 10, 4, 9, 15, 2, 0],
        [0, 3, 13, 16, 13, 4, 0, 0],
    ],
    dtype=float,
)


def _pixels(ax, image, x0, y0, size, edge=None):
    """Draw ``image`` (rows top to bottom) with its lower-left corner at (x0, y0), pixels ``size`` wide."""
    from matplotlib.patches import Rectangle

    rows, cols = image.shape
    for r in range(rows):
        for c in range(cols):
            grey = 1.0 - image[r, c] / 16.0  # ink is dark
            ax.add_patch(
                Rectangle(
                    (x0 + c * size, y0 + (rows - 1 - r) * size),
                    size,
                    size,
                    facecolor=(grey, grey, grey),
                    edgecolor=edge or (0.85, 0.85, 0.85),
                    linewidth=0.3,
                )
            )


def draw_vit():
    """Chapter 11: image -> 2x2 patches -> tokens (+ class token, + positions) -> encoder -> class.

    The 8x8 image is cut into 16 patches of 2x2 pixels (orange grid), each flattened and
    mapped by one linear layer to a token; a learned class token is put in front, a
    learned position vector added to every token, and the 17 tokens go through the
    chapter-10 block twice without a mask. The head reads only the class token's output.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = _canvas(3.8)
    px = 0.22  # one pixel of the input image, in drawing units

    # the image and its patch grid
    x0, y0 = 0.3, 0.6
    _pixels(ax, DIGIT, x0, y0, px)
    for k in range(5):  # patch boundaries every 2 pixels
        ax.plot([x0 + 2 * k * px] * 2, [y0, y0 + 8 * px], color=ORANGE, lw=1.2)
        ax.plot([x0, x0 + 8 * px], [y0 + 2 * k * px] * 2, color=ORANGE, lw=1.2)
    ax.text(x0 + 4 * px, 0.15, "8x8 image", ha="center", fontsize=FS)

    # the 16 patches in reading order, then the tokens above them
    step, first, tile = 0.38, 3.0, 0.15
    xs = [first + step * (n + 1) for n in range(16)]  # patch n's column; the class token at `first`
    tiles_y = 1.2
    _arrow(ax, (x0 + 8 * px + 0.1, tiles_y + tile), (xs[0] - 0.3, tiles_y + tile))
    for n, x in enumerate(xs):
        r, c = divmod(n, 4)
        _pixels(ax, DIGIT[2 * r : 2 * r + 2, 2 * c : 2 * c + 2], x - tile, tiles_y, tile, edge=ORANGE)
    ax.text(
        (xs[0] + xs[-1]) / 2, 0.55, "2x2 patches 0 ... 15, row by row", ha="center", fontsize=FS, color=ORANGE
    )
    ax.text((xs[0] + xs[-1]) / 2, 0.1, "each flattened, one linear map", ha="center", fontsize=FS)

    token_y = 2.75
    for x in xs:
        _box(ax, x, token_y, 0.26, 0.5, color=BLUE)
        _arrow(ax, (x, tiles_y + 2 * tile + 0.05), (x, token_y - 0.27), lw=0.8, shrink=0.5)
    _box(ax, first, token_y, 0.26, 0.5, color=PURPLE)
    ax.text(first - 0.25, token_y, "tokens", ha="right", va="center", fontsize=FS)

    pos_y = 3.6
    for x in [first, *xs]:
        _box(ax, x, pos_y, 0.26, 0.28, color=GREEN)
        _arrow(ax, (x, token_y + 0.27), (x, pos_y - 0.16), lw=0.8, shrink=0.5)
    ax.text(first - 0.25, pos_y, "+ positions", ha="right", va="center", fontsize=FS, color=GREEN)

    # the encoder, the class token's way out, the head
    enc_y = 4.75
    span = xs[-1] - first + 0.45
    _box(
        ax,
        (first + xs[-1]) / 2,
        enc_y,
        span,
        0.85,
        "Transformer block x 2\nno mask: every token sees every token",
    )
    for x in [first, *xs]:
        _arrow(ax, (x, pos_y + 0.16), (x, enc_y - 0.45), lw=0.8, shrink=0.5)
    out_y = 5.85
    for x in xs:
        _box(ax, x, out_y, 0.26, 0.28, color=GREY, fill="white")
        _arrow(ax, (x, enc_y + 0.45), (x, out_y - 0.16), lw=0.8, color=GREY, shrink=0.5)
    _box(ax, first, out_y, 0.26, 0.28, color=PURPLE)
    _arrow(ax, (first, enc_y + 0.45), (first, out_y - 0.16), lw=0.8, shrink=0.5)
    ax.text(first - 0.25, out_y, "class token", ha="right", va="center", fontsize=FS, color=PURPLE)
    ax.text((xs[0] + xs[-1]) / 2, out_y + 0.3, "not read by the head", ha="center", fontsize=FS, color=GREY)
    head_y = 6.95
    _box(ax, first, head_y, 2.7, 0.55, "LayerNorm + linear", color=ORANGE)
    _arrow(ax, (first, out_y + 0.16), (first, head_y - 0.3))
    _arrow(ax, (first + 1.37, head_y), (first + 2.1, head_y))
    ax.text(first + 2.2, head_y, "10 scores; the largest is the digit", va="center", fontsize=FS)
    return fig
