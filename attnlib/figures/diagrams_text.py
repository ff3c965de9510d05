"""Chapter 12's pictures, in the style of :mod:`attnlib.figures.diagrams`: what an induction head reads,
and the masks of the three model families.

Kept beside ``diagrams.py`` rather than in it: one module per picture family, sharing its
palette, canvas and boxes. Nothing here is measured: the pictures are the same on every machine.
"""

from __future__ import annotations

from ._draw import BLUE, FS, GREEN, GREY, ORANGE, VERMILION, _arrow, _box, _canvas

__all__ = ["draw_induction", "draw_model_families"]

_REPEATED = "qzkbe" * 2  # a random first half, repeated


def draw_induction():
    """A sequence of random tokens repeated once, and the keys three kinds of head read.

    At the query ``t`` (second half), a previous-token head reads ``t - 1``, a
    duplicate-token head the earlier occurrence ``t - T``, and an induction head
    the token after it, ``t - T + 1``: the token that comes next. Returns the ``Figure``.
    """
    fig, ax = _canvas(1.75)
    n, T = len(_REPEATED), len(_REPEATED) // 2
    x0, step, y = 0.7, 0.95, 1.25
    t = T + 2  # the query drawn
    colours = {t: VERMILION, t - 1: GREY, t - T: ORANGE, t - T + 1: GREEN}
    for i, ch in enumerate(_REPEATED):
        _box(ax, x0 + i * step, y, 0.7, 0.6, ch, color=colours.get(i, BLUE))
        ax.text(x0 + i * step, y - 0.5, str(i), ha="center", va="center", fontsize=FS - 1)
    ax.text(x0 + (T - 1) * step / 2, 0.15, f"first half: 0-{T - 1}", ha="center", fontsize=FS)
    ax.text(
        x0 + (T + n - 1) * step / 2, 0.15, f"second half repeats it: {T}-{n - 1}", ha="center", fontsize=FS
    )
    ax.plot([x0 + (T - 0.5) * step] * 2, [0.1, y + 0.4], color="black", lw=0.8, ls=":")
    qx = x0 + t * step
    # the induction head's key, the earlier occurrence, the previous token: arcs above the boxes
    for key, rad in ((t - T + 1, 0.35), (t - T, 0.3), (t - 1, 0.9)):
        _arrow(
            ax,
            (qx, y + 0.32),
            (x0 + key * step, y + 0.32),
            color=colours[key],
            connectionstyle=f"arc3,rad={rad}",
        )
    ax.text(
        5.0,
        3.15,
        # two lines: on one, the text ran past the canvas and the figure was shown smaller
        f"query t = {t}; induction head: t - T + 1 = {t - T + 1}\n"
        f"earlier occurrence: t - T = {t - T}; previous: t - 1 = {t - 1}",
        ha="center",
        va="center",
        fontsize=FS - 1,
    )
    return fig


def _mask_grid(ax, x0, y0, size, allowed, colour):
    """An n x n grid of squares, lower-left corner (x0, y0), filled where ``allowed(row, col)``."""
    from matplotlib.patches import Rectangle

    n = 5
    cell = size / n
    for r in range(n):
        for c in range(n):
            filled = allowed(r, c)
            ax.add_patch(
                Rectangle(
                    (x0 + c * cell, y0 + (n - 1 - r) * cell),
                    cell,
                    cell,
                    facecolor=colour if filled else "white",
                    edgecolor=GREY,
                    linewidth=0.8,
                )
            )


def draw_model_families():
    """The attention masks of an encoder-only, a decoder-only and an encoder-decoder model.

    Rows are queries, columns keys; a filled square may attend. Encoder-only
    (BERT): every token sees every token. Decoder-only (GPT): causal. Encoder-decoder
    (the original Transformer, T5): the encoder's self-attention is full, the
    decoder's causal, and the decoder's cross-attention sees every encoder token.
    Returns the ``Figure``.
    """
    fig, ax = _canvas(1.6)
    size, y0 = 1.3, 0.85
    panels = [
        (0.2, "encoder-only", "self: full", lambda r, c: True, BLUE),
        (2.2, "decoder-only", "self: causal", lambda r, c: c <= r, VERMILION),
        (4.3, "", "encoder: full", lambda r, c: True, BLUE),
        (6.3, "encoder-decoder", "decoder: causal", lambda r, c: c <= r, VERMILION),
        (8.3, "", "cross: full", lambda r, c: True, GREEN),
    ]
    for x, title, label, allowed, colour in panels:
        _mask_grid(ax, x, y0, size, allowed, colour)
        if title:
            ax.text(x + size / 2, y0 + size + 0.25, title, ha="center", fontsize=FS)
        ax.text(x + size / 2, y0 - 0.25, label, ha="center", va="center", fontsize=FS - 1)
    ax.plot([4.35, 9.55], [y0 + size + 0.15] * 2, color=GREY, lw=0.8)
    ax.text(
        5.0, 0.1, "rows: queries, columns: keys; a filled square may attend", ha="center", fontsize=FS - 1
    )
    return fig
