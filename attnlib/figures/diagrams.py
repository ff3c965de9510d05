"""Pictures of the course's ideas: the shapes behind the equations, drawn with matplotlib.

Each function draws one diagram in the course's figure style (:mod:`attnlib.figures.plotting`:
5 inches wide, no text under 9 points, so it stays readable on a phone) and returns the
``Figure``. The chapters show them; nothing here is measured, so a diagram is the
same on every machine. Where a diagram shows numbers (the softmax weights of one
query) they are computed here from the formulas the
chapters derive, not typed in.

=============================  =======  ======================================================
function                       chapter  the idea
=============================  =======  ======================================================
:func:`draw_bottleneck`        01       encoder states, one context vector, a decoder
:func:`draw_alignment`         02       each target token's weights over the source tokens
:func:`draw_query_key_value`   03       one query scored against keys; weights; values mixed
:func:`draw_heads`             06       project, split into heads, attend, merge, project
:func:`draw_cross_attention`   07       encoder-decoder, cross attention, where masks go
:func:`draw_tiles`             08       the tile grid, skipped causal tiles, running m and l
:func:`draw_memory_hierarchy`  08       fast small memory beside slow large memory
:func:`draw_norm_placement`    10       post-norm and pre-norm blocks
=============================  =======  ======================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._draw import BLUE, FS, GREEN, GREY, LIGHT, ORANGE, PURPLE, SKY, VERMILION, _arrow, _box, _canvas, _count
from .plotting import MIN_FONT_SIZE


def draw_bottleneck(source_len: int = 4, target_len: int = 4):
    """Chapter 01: an RNN encoder whose last state is the one context vector the decoder sees.

    The context vector starts the decoder and is fed to every decoder step beside the
    previous output, as in Cho et al. (2014) and chapter 01's ``Seq2SeqGRU``.

    Parameters
    ----------
    source_len, target_len : int, optional
        Steps drawn on each side (2 to 6).

    Returns
    -------
    matplotlib.figure.Figure
    """
    source_len = _count("draw_bottleneck", "source_len", source_len, 2, 6)
    target_len = _count("draw_bottleneck", "target_len", target_len, 2, 6)
    fig, ax = _canvas(3.0)
    step = 4.2 / source_len
    xs_enc = [0.6 + step * (i + 0.5) for i in range(source_len)]
    for i, x in enumerate(xs_enc):
        _box(ax, x, 1.0, 0.8 * step, 0.6, f"$x_{i + 1}$", color=GREY, fill="white")
        _box(ax, x, 2.6, 0.8 * step, 0.8, f"$h_{i + 1}$", color=BLUE)
        _arrow(ax, (x, 1.3), (x, 2.2))
        if i:
            _arrow(ax, (xs_enc[i - 1] + 0.4 * step, 2.6), (x - 0.4 * step, 2.6), color=BLUE)
    cx = 5.55
    _box(ax, cx, 2.6, 0.8, 1.5, "$c$", color=VERMILION, fontsize=FS + 2)
    ax.text(cx, 3.95, "one vector\nof $d_h$ numbers", ha="center", va="center", fontsize=MIN_FONT_SIZE)
    _arrow(ax, (xs_enc[-1] + 0.4 * step, 2.6), (cx - 0.4, 2.6), color=VERMILION, lw=2)
    step_d = 3.6 / target_len
    xs_dec = [6.2 + step_d * (i + 0.5) for i in range(target_len)]
    for i, x in enumerate(xs_dec):
        _box(ax, x, 2.6, 0.8 * step_d, 0.8, f"$s_{i + 1}$", color=GREEN)
        _box(ax, x, 4.5, 0.8 * step_d, 0.6, f"$y_{i + 1}$", color=GREY, fill="white")
        _arrow(ax, (x, 3.0), (x, 4.2))
        if i:
            _arrow(ax, (xs_dec[i - 1] + 0.4 * step_d, 2.6), (x - 0.4 * step_d, 2.6), color=GREEN)
            # the previous output is the next input
            _arrow(ax, (xs_dec[i - 1] + 0.2 * step_d, 4.2), (x - 0.2 * step_d, 3.0), color=GREY, lw=0.9)
    _arrow(ax, (cx + 0.4, 2.6), (xs_dec[0] - 0.4 * step_d, 2.6), color=VERMILION, lw=2)
    # ... and c is an input of every decoder step (Cho et al. 2014), not only of the first
    for x in xs_dec:
        _arrow(ax, (cx + 0.2, 1.85), (x, 2.2), color=VERMILION, lw=0.9, connectionstyle="arc3,rad=0.25")
    ax.text(8.0, 1.2, "$c$ also enters every step", ha="center", fontsize=MIN_FONT_SIZE, color=VERMILION)
    ax.text(2.7, 3.6, "encoder (reads the source)", ha="center", fontsize=FS, color=BLUE)
    ax.text(8.0, 5.3, "decoder (writes the target)", ha="center", fontsize=FS, color=GREEN)
    ax.text(2.7, 0.2, "source tokens", ha="center", fontsize=MIN_FONT_SIZE, color="dimgray")
    return fig


def draw_alignment(
    source: Sequence[str] = ("3", "1", "4", "1", "5"),
    target: Sequence[str] = ("5", "1", "4", "1", "3"),
    weights=None,
    aligned: Sequence[int] | None = None,
):
    """Chapter 02: alignment lines from each target token to the source tokens it attends to.

    Parameters
    ----------
    source, target : sequence of str
        The tokens (at most 8 each).
    weights : array_like, optional
        ``(len(target), len(source))`` attention weights, rows summing to 1.
    aligned : sequence of int, optional
        Without ``weights``: for each target token, the source position it copies; the
        drawn weights put 0.8 there and spread the rest evenly (a picture of the idea,
        not a trained model). Default: reversal (target token i copies source token
        ``len(source) - 1 - i``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    n_s, n_t = len(source), len(target)
    if not (1 <= n_s <= 8 and 1 <= n_t <= 8):
        raise ValueError(f"draw_alignment: source and target must have 1 to 8 tokens, got {n_s} and {n_t}")
    if weights is None:
        if aligned is None:
            aligned = [max(0, n_s - 1 - i) for i in range(n_t)]
        if len(aligned) != n_t or not all(0 <= int(j) < n_s for j in aligned):
            raise ValueError(
                f"draw_alignment: aligned must give one source position (0 to {n_s - 1}) per "
                f"target token, {n_t} in all; got {list(aligned)}"
            )
        w = np.full((n_t, n_s), 0.2 / max(n_s - 1, 1))
        for i, j in enumerate(aligned):
            w[i, int(j)] = 0.8 if n_s > 1 else 1.0
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (n_t, n_s):
            raise ValueError(f"draw_alignment: weights must have shape {(n_t, n_s)}, got {w.shape}")
    fig, ax = _canvas(2.6)
    xs_s = np.linspace(1.5, 8.5, n_s) if n_s > 1 else np.array([5.0])
    xs_t = np.linspace(1.5, 8.5, n_t) if n_t > 1 else np.array([5.0])
    for i, xt in enumerate(xs_t):
        for j, xs in enumerate(xs_s):
            ax.plot([xs, xt], [1.25, 3.75], color=BLUE, lw=0.5 + 5 * w[i, j], alpha=0.15 + 0.85 * w[i, j])
    for j, x in enumerate(xs_s):
        _box(ax, x, 0.8, 0.8, 0.8, source[j], color=BLUE)
    for i, x in enumerate(xs_t):
        _box(ax, x, 4.2, 0.8, 0.8, target[i], color=GREEN)
    ax.text(0.1, 0.8, "source", ha="left", va="center", fontsize=MIN_FONT_SIZE, rotation=90, color=BLUE)
    ax.text(0.1, 4.2, "target", ha="left", va="center", fontsize=MIN_FONT_SIZE, rotation=90, color=GREEN)
    return fig


def draw_query_key_value(scores: Sequence[float] = (2.0, 0.5, -1.0, 1.0)):
    """Chapter 03: one query scored against four keys; softmax weights; the values mixed.

    Parameters
    ----------
    scores : sequence of float, optional
        The query's scaled scores against each key (2 to 6 keys); the weights drawn are
        their softmax.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.patches import Rectangle

    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or not 2 <= s.size <= 6:
        raise ValueError(f"draw_query_key_value: scores must be 2 to 6 numbers, got shape {s.shape}")
    weights = np.exp(s - s.max())
    weights /= weights.sum()
    n = s.size
    height = 1.4 + 0.75 * n
    fig, ax = _canvas(height)
    top = 2 * height - 0.6
    ax.text(2.2, top, "keys", ha="center", fontsize=FS, color=BLUE)
    ax.text(
        4.45, top, "score\n$q \\cdot k_j / \\sqrt{d_k}$", ha="center", va="center", fontsize=MIN_FONT_SIZE
    )
    ax.text(6.5, top, "weight", ha="center", fontsize=FS)
    ax.text(8.7, top, "values", ha="center", fontsize=FS, color=GREEN)
    ys = [top - 1.2 - 1.5 * j for j in range(n)]
    _box(ax, 0.6, float(np.mean(ys)), 0.8, 1.0, "$q$", color=ORANGE, fontsize=FS + 2)
    for j, y in enumerate(ys):
        _arrow(ax, (1.0, float(np.mean(ys))), (1.6, y), color=ORANGE, lw=0.9)
        _box(ax, 2.2, y, 1.1, 0.9, f"$k_{j + 1}$", color=BLUE)
        ax.text(4.45, y, f"{s[j]:+.1f}", ha="center", va="center", fontsize=FS)
        bar = 1.6 * weights[j]
        ax.add_patch(Rectangle((5.7, y - 0.35), bar, 0.7, color=GREY))
        ax.text(5.75 + bar, y, f" {weights[j]:.2f}", ha="left", va="center", fontsize=MIN_FONT_SIZE)
        _box(ax, 8.7, y, 1.1, 0.9, f"$v_{j + 1}$", color=GREEN)
    ax.text(
        6.5,
        0.45,
        "output $= \\sum_j \\mathrm{weight}_j\\, v_j$   (weights = softmax of the scores)",
        ha="center",
        va="center",
        fontsize=MIN_FONT_SIZE,
    )
    return fig


def draw_heads(num_heads: int = 4):
    """Chapter 06: project, split the model dimension into heads, attend per head, merge, project.

    Parameters
    ----------
    num_heads : int, optional
        Heads drawn (2 to 6).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.patches import Rectangle

    num_heads = _count("draw_heads", "num_heads", num_heads, 2, 6)
    colors = [BLUE, ORANGE, GREEN, VERMILION, PURPLE, SKY][:num_heads]
    fig, ax = _canvas(3.3)
    h, w = 3.0, 1.2  # a (L, d_model) matrix drawn as a rectangle

    def matrix(x, label, striped):
        for k in range(num_heads if striped else 1):
            width = w / num_heads if striped else w
            color = colors[k] if striped else GREY
            ax.add_patch(
                Rectangle(
                    (x - w / 2 + k * width, 1.6),
                    width,
                    h,
                    facecolor=LIGHT.get(color, "#e5e5e5"),
                    edgecolor=color,
                )
            )
        ax.text(x, 1.1, label, ha="center", va="center", fontsize=FS)

    matrix(0.9, "$X$", False)
    ax.text(0.9, 5.0, "$(L, d)$", ha="center", fontsize=MIN_FONT_SIZE)
    for x, name in ((3.0, "$Q$"), (4.5, "$K$"), (6.0, "$V$")):
        matrix(x, name, True)
    _arrow(ax, (1.5, 3.1), (2.4, 3.1))
    ax.text(1.95, 6.0, "$XW_Q,\\ XW_K,\\ XW_V$", ha="left", fontsize=MIN_FONT_SIZE)
    ax.text(
        4.5, 5.4, f"split $d$ into {num_heads} heads of $d/{num_heads}$", ha="center", fontsize=MIN_FONT_SIZE
    )
    # per-head attention, then concatenation
    head_ys = [5.4 - k * (4.2 / num_heads) - 0.5 for k in range(num_heads)]
    for k, (color, y) in enumerate(zip(colors, head_ys, strict=True)):
        _box(ax, 7.6, y, 1.15, 0.55, f"head {k + 1}", color=color, fontsize=MIN_FONT_SIZE)
    # Q, K and V all enter every head (each head reads its own slice of the three):
    # a line from the top of each, joined into one bus that feeds the heads
    bus_y, bus_x, out_x = 5.0, 6.8, 8.35
    line = dict(color="black", linewidth=1.2, solid_capstyle="butt")
    for x in (3.0, 4.5, 6.0):
        ax.plot([x, x], [4.62, bus_y], **line)
    ax.plot([3.0, bus_x, bus_x], [bus_y, bus_y, head_ys[-1]], **line)
    for y in head_ys:
        _arrow(ax, (bus_x, y), (7.03, y), shrink=0)
        ax.plot([8.17, out_x], [y, y], **line)  # each head's output, concatenated
    ax.plot([out_x, out_x], [head_ys[0], head_ys[-1]], **line)
    matrix(9.1, "concat\n$\\cdot W_O$", True)
    _arrow(ax, (out_x, 3.1), (8.5, 3.1), shrink=0)
    # the layer's output: concat(heads) W_O, (L, d) like X
    _arrow(ax, (9.1, 4.65), (9.1, 5.35))
    ax.text(9.1, 5.5, "output\n$(L, d)$", ha="center", va="bottom", fontsize=MIN_FONT_SIZE)
    ax.text(
        5.0,
        0.45,
        "each head: softmax$(QK^\\top/\\sqrt{d/h})\\,V$ on its slice",
        ha="center",
        fontsize=MIN_FONT_SIZE,
    )
    return fig


def draw_cross_attention():
    """Chapter 07: an encoder-decoder; the decoder's queries attend to the encoder's keys and values.

    Returns the ``Figure`` (as every function here).
    """
    fig, ax = _canvas(4.4)
    # encoder
    ax.text(2.3, 8.2, "encoder (source)", ha="center", fontsize=FS + 1, color=BLUE)
    _box(ax, 2.3, 1.0, 3.2, 0.8, "source tokens + positions", color=GREY, fill="white")
    _box(ax, 2.3, 3.0, 3.6, 1.3, "self-attention\nmask: source padding", color=BLUE)
    _box(ax, 2.3, 5.1, 3.6, 0.9, "feed-forward", color=BLUE)
    _arrow(ax, (2.3, 1.4), (2.3, 2.35))
    _arrow(ax, (2.3, 3.65), (2.3, 4.65))
    _box(ax, 2.3, 6.9, 2.6, 0.8, "memory $(S, d)$", color=BLUE, fill="white")
    _arrow(ax, (2.3, 5.55), (2.3, 6.5))
    # decoder
    ax.text(7.5, 8.2, "decoder (target so far)", ha="center", fontsize=FS + 1, color=GREEN)
    _box(ax, 7.5, 0.75, 4.0, 1.0, "target tokens (shifted)\n+ positions", color=GREY, fill="white")
    _box(ax, 7.5, 2.3, 4.0, 1.3, "masked self-attention\nmask: causal", color=GREEN)
    _box(
        ax,
        7.5,
        4.5,
        4.0,
        1.5,
        "cross-attention\n$Q$ from here, $K, V$ from memory\nmask: source padding",
        color=ORANGE,
    )
    _box(ax, 7.5, 6.4, 4.0, 0.8, "feed-forward", color=GREEN)
    _box(ax, 7.5, 7.5, 2.6, 0.6, "next-token scores", color=GREY, fill="white", fontsize=MIN_FONT_SIZE)
    _arrow(ax, (7.5, 1.25), (7.5, 1.65))
    _arrow(ax, (7.5, 2.95), (7.5, 3.75))
    _arrow(ax, (7.5, 5.25), (7.5, 6.0))
    _arrow(ax, (7.5, 6.8), (7.5, 7.2))
    _arrow(ax, (3.6, 6.9), (5.5, 4.7), color=ORANGE, lw=2, connectionstyle="arc3,rad=-0.2")
    ax.text(4.05, 5.85, "$K, V$", fontsize=FS, color=ORANGE)
    return fig


def draw_tiles(n_query_tiles: int = 4, n_key_tiles: int = 4, causal: bool = True):
    """Chapter 08: the (L, S) score matrix cut into tiles; causal tiles above the diagonal skipped.

    Each row of query tiles keeps, per query, a running maximum ``m``, a running sum of
    exponentials ``ell`` and an unnormalised output ``a`` (chapter 08's notation) while it
    visits the key tiles from left to right; only one tile of scores exists at a time.

    Parameters
    ----------
    n_query_tiles, n_key_tiles : int, optional
        Tiles along each axis (2 to 8).
    causal : bool, optional
        Grey out the tiles a causal mask removes entirely, hatch the diagonal ones.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.patches import Rectangle

    n_query_tiles = _count("draw_tiles", "n_query_tiles", n_query_tiles, 2, 8)
    n_key_tiles = _count("draw_tiles", "n_key_tiles", n_key_tiles, 2, 8)
    fig, ax = _canvas(3.8)
    size = 5.6 / max(n_query_tiles, n_key_tiles)
    x0, y_top = 1.2, 6.6
    for i in range(n_query_tiles):
        for j in range(n_key_tiles):
            # tile (i, j) holds queries [i*b, (i+1)*b) and keys [j*b, (j+1)*b) (equal tile sizes)
            skipped = causal and j > i
            diagonal = causal and j == i
            ax.add_patch(
                Rectangle(
                    (x0 + j * size, y_top - (i + 1) * size),
                    size,
                    size,
                    facecolor="#eeeeee" if skipped else LIGHT[BLUE],
                    edgecolor="white" if skipped else BLUE,
                    hatch="//" if diagonal else None,
                    linewidth=1.2,
                )
            )
        ax.text(
            x0 + n_key_tiles * size + 0.25,
            y_top - (i + 0.5) * size,
            f"$m, \\ell, a$ of tile row {i + 1}",
            va="center",
            fontsize=MIN_FONT_SIZE,
        )
    ax.text(
        x0 + n_key_tiles * size / 2,
        y_top + 0.35,
        "key tiles (visited left to right)",
        ha="center",
        fontsize=FS,
    )
    ax.text(
        x0 - 0.35,
        y_top - n_query_tiles * size / 2,
        "query tiles",
        rotation=90,
        va="center",
        ha="center",
        fontsize=FS,
    )
    if causal:
        ax.text(
            0.2,
            0.35,
            "blue: computed   hatched: partly masked   grey: skipped (all masked)",
            fontsize=MIN_FONT_SIZE,
        )
    return fig


def draw_memory_hierarchy():
    """Chapter 08: small fast memory beside large slow memory, with FlashAttention's A100 figures.

    The numbers are those of Dao et al. (2022), Figure 1 (left): an A100's on-chip SRAM,
    20 MB at 19 TB/s; its HBM, 40 GB at 1.5 TB/s; CPU DRAM, over 1 TB at 12.8 GB/s.

    Returns the ``Figure`` (as every function here).
    """
    levels = (
        ("GPU SRAM", "20 MB", "19 TB/s", 19e12, ORANGE),
        ("GPU HBM", "40 GB", "1.5 TB/s", 1.5e12, BLUE),
        ("CPU DRAM", "> 1 TB", "12.8 GB/s", 12.8e9, GREEN),
    )
    fig, ax = _canvas(3.0, bottom=-0.8)
    for k, (name, size, speed, _bw, color) in enumerate(levels):
        width = 3.2 + 1.3 * k  # wider = larger
        y = 4.2 - 1.45 * k
        _box(ax, 3.2, y, width, 1.0, f"{name}: {size}", color=color)
        ax.text(6.9, y, speed, va="center", fontsize=FS)
    ax.text(6.9, 5.0, "bandwidth", fontsize=MIN_FONT_SIZE, color="dimgray")
    ax.text(
        0.3,
        0.5,
        "tiling keeps the working set in the fast level\n(figures: Dao et al. 2022, Fig. 1, an A100)",
        fontsize=MIN_FONT_SIZE,
        va="top",
    )
    return fig


def draw_norm_placement():
    """Chapter 10: LayerNorm after the residual addition (post-norm) or before the sublayer (pre-norm).

    Returns the ``Figure`` (as every function here).
    """
    fig, ax = _canvas(4.0)

    def column(x, title, steps):
        ax.text(x, 7.55, title, ha="center", fontsize=FS + 1)
        y = 0.5
        _box(ax, x, y, 1.2, 0.5, "$x$", color=GREY, fill="white")
        for label, color in steps:
            y_next = y + 0.95
            if label == "+":
                from matplotlib.patches import Circle

                ax.add_patch(Circle((x, y_next), 0.25, facecolor="white", edgecolor="black"))
                ax.text(x, y_next, "+", ha="center", va="center", fontsize=FS)
                _arrow(ax, (x, y + 0.25), (x, y_next - 0.25))
            else:
                _box(ax, x, y_next, 2.6, 0.55, label, color=color)
                _arrow(ax, (x, y + 0.25), (x, y_next - 0.28))
            y = y_next
        return y

    post = [
        ("self-attention", BLUE),
        ("+", None),
        ("LayerNorm", ORANGE),
        ("feed-forward", GREEN),
        ("+", None),
        ("LayerNorm", ORANGE),
    ]
    pre = [
        ("LayerNorm", ORANGE),
        ("self-attention", BLUE),
        ("+", None),
        ("LayerNorm", ORANGE),
        ("feed-forward", GREEN),
        ("+", None),
    ]
    column(2.5, "post-norm (2017)", post)
    column(7.5, "pre-norm (2018)", pre)

    # residual paths: from the branch point below a sublayer, around it, into its "+"
    def residual(x, y_from, y_to):
        ax.plot([x, x - 1.7, x - 1.7], [y_from, y_from, y_to], color=VERMILION, lw=1.3)
        _arrow(ax, (x - 1.7, y_to), (x - 0.25, y_to), color=VERMILION, lw=1.3, shrink=0.0)

    for x, pairs in ((2.5, ((0.95, 2.4), (3.83, 5.25))), (7.5, ((0.95, 3.35), (3.83, 6.2)))):
        for y_from, y_to in pairs:
            residual(x, y_from, y_to)
    ax.text(5.0, 0.1, "red: the residual path", ha="center", fontsize=MIN_FONT_SIZE, color=VERMILION)
    return fig


__all__ = [
    "draw_alignment",
    "draw_bottleneck",
    "draw_cross_attention",
    "draw_heads",
    "draw_memory_hierarchy",
    "draw_norm_placement",
    "draw_query_key_value",
    "draw_tiles",
]
