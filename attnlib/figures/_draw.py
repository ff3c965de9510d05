"""The drawing helpers the diagram modules share (private): the palette, the canvas, boxes, arrows.

One file so that :mod:`attnlib.figures.diagrams`, :mod:`~attnlib.figures.diagrams_text` and
:mod:`~attnlib.figures.diagrams_vit` draw with the same colours, units and shapes; nothing here
is a figure of its own, and no learner calls it.
"""

from __future__ import annotations

from .._validate import check_integer
from .plotting import FIGURE_WIDTH, MIN_FONT_SIZE, use_course_style

# colours (the Okabe-Ito palette, readable by colour-blind readers)
BLUE, ORANGE, GREEN, VERMILION, PURPLE, SKY, GREY = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#999999",
)
LIGHT = {BLUE: "#cfe3f2", ORANGE: "#fbe7bf", GREEN: "#c4ebdf", VERMILION: "#f6d3bd", PURPLE: "#f2deea"}
FS = MIN_FONT_SIZE + 1  # text inside diagrams


def _count(fn: str, name: str, value, low: int, high: int) -> int:
    """An integer argument from ``low`` to ``high`` (TypeError for a non-integer, ValueError out of range)."""
    value = check_integer(fn, name, value)
    if not low <= value <= high:
        raise ValueError(f"{fn}: {name} must be an integer from {low} to {high}, got {value}")
    return value


def _canvas(height: float, bottom: float = 0.0):
    """A figure of the book's width and ``height`` inches, its axes hidden, in drawing units:
    x from 0 to 10 across the width, y from ``bottom`` up in the same unit (equal aspect)."""
    import matplotlib.pyplot as plt

    use_course_style()
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, height))
    units_per_inch = 10 / FIGURE_WIDTH
    ax.set_xlim(0, 10)
    ax.set_ylim(bottom, bottom + units_per_inch * height)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.99)
    return fig, ax


def _box(ax, x, y, w, h, text="", color=BLUE, fill=None, fontsize=FS, text_color="black", **kw):
    """A rounded box centred at (x, y)."""
    from matplotlib.patches import FancyBboxPatch

    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0.02,rounding_size=0.12",
        linewidth=1.3,
        edgecolor=color,
        facecolor=fill if fill is not None else LIGHT.get(color, "white"),
        **kw,
    )
    ax.add_patch(patch)
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=text_color)
    return patch


def _arrow(ax, start, end, color="black", style="-|>", lw=1.2, ls="-", shrink=2.0, **kw):
    from matplotlib.patches import FancyArrowPatch

    arrow = FancyArrowPatch(
        start,
        end,
        arrowstyle=style,
        mutation_scale=10,
        color=color,
        linewidth=lw,
        linestyle=ls,
        shrinkA=shrink,
        shrinkB=shrink,
        **kw,
    )
    ax.add_patch(arrow)
    return arrow
