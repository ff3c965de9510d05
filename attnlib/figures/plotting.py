"""The course's figures: one style sized for the book's page, and attention heat maps.

Every chapter calls :func:`use_course_style` once, after its imports. It sets
matplotlib's defaults so that a figure fits the book's content column and its
text stays readable when a phone shrinks it:

* figures are :data:`FIGURE_WIDTH` inches wide at :data:`FIGURE_DPI` dots per
  inch (550 pixels): narrower than the content column on a laptop (about 760
  CSS px in a 1366 px window), which shows them at their own size, and wide
  enough that a phone's column (about 358 px in a 390 px window) shrinks them
  by no more than a third; panels that would be too narrow side by side are
  stacked (:func:`figure_size` gives the height);
* no text is smaller than :data:`MIN_FONT_SIZE` points (tick labels, legends,
  the numbers written in heat-map cells); labels are :data:`FONT_SIZE`. The
  smallest text is then 9 * 110 / 72 = 13.75 CSS px tall on a laptop and about
  9 * 358 / (72 * 5.1) = 8.8 px on a phone (the inline backend crops each
  figure to its drawing plus a 0.05 in margin).

In Jupyter (the inline backend) every figure shown also records, in its PNG,
its smallest font size and its dpi (text chunks ``attnlib:min-font-pt`` and
``attnlib:dpi``): the website's browser test (tests/site/test_figures.py)
reads them to compute how tall each figure's smallest text is on the screen.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FIGURE_WIDTH = 5.0  # inches: one figure across the book's content column
FIGURE_DPI = 110  # 5 in x 110 dpi = 550 pixels: shown at its own size on a laptop
FONT_SIZE = 10.0  # points: axis labels, titles of panels
MIN_FONT_SIZE = 9.0  # points: the smallest text of any figure (ticks, legends, cell values)

STYLE = {
    "figure.figsize": (FIGURE_WIDTH, 3.4),
    "figure.dpi": FIGURE_DPI,
    "savefig.dpi": "figure",
    "savefig.pad_inches": 0.05,  # the inline backend crops to the drawing plus this margin
    "font.size": FONT_SIZE,
    "axes.titlesize": FONT_SIZE + 1,
    "axes.labelsize": FONT_SIZE,
    "xtick.labelsize": MIN_FONT_SIZE,
    "ytick.labelsize": MIN_FONT_SIZE,
    "legend.fontsize": MIN_FONT_SIZE,
    "legend.title_fontsize": FONT_SIZE,
    "figure.titlesize": FONT_SIZE + 2,
    "figure.labelsize": FONT_SIZE,
}

# PNG text chunks written into every inline figure (read by the website's tests).
MIN_FONT_KEY = "attnlib:min-font-pt"
DPI_KEY = "attnlib:dpi"


def figure_size(height: float = 3.4) -> tuple[float, float]:
    """``(FIGURE_WIDTH, height)`` in inches: the size of a course figure ``height`` inches tall."""
    return (FIGURE_WIDTH, float(height))


def smallest_font_size(fig) -> float:
    """The smallest font size, in points, of the text a figure shows (0.0 when it has none).

    The figure is laid out first (tick labels get their text when drawn); text in
    hidden artists and empty strings do not count.
    """
    from matplotlib.text import Text

    fig.draw_without_rendering()
    sizes = []
    stack = [fig]
    while stack:
        artist = stack.pop()
        if not artist.get_visible():
            continue
        if isinstance(artist, Text) and artist.get_text().strip():
            sizes.append(float(artist.get_fontsize()))
        stack.extend(artist.get_children())
    return min(sizes, default=0.0)


def _png_with_font_record(fig):
    """The inline backend's PNG of ``fig``, with its smallest font size and dpi recorded."""
    from IPython.core.pylabtools import print_figure

    metadata = {MIN_FONT_KEY: f"{smallest_font_size(fig):g}", DPI_KEY: f"{fig.dpi:g}"}
    return print_figure(fig, "png", base64=True, metadata=metadata)


def _record_fonts_in_inline_figures() -> bool:
    """In a Jupyter kernel with the inline backend, tag every shown figure's PNG; else do nothing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    import matplotlib

    if "inline" not in str(matplotlib.rcParams["backend"]):
        return False
    import matplotlib_inline.backend_inline  # noqa: F401 (sets up its own formatters first)
    from matplotlib.figure import Figure

    shell.display_formatter.formatters["image/png"].for_type(Figure, _png_with_font_record)
    return True


def use_course_style() -> None:
    """Draw every later figure in the course's style (see the module's docstring)."""
    import matplotlib

    _record_fonts_in_inline_figures()  # first: loading the inline backend may set rcParams
    matplotlib.rcParams.update(STYLE)


def _matrix_size(n_rows: int, n_cols: int) -> tuple[float, float]:
    """A figure for one (n_rows, n_cols) matrix: about 0.45 in a cell, never wider than the column."""
    width = min(FIGURE_WIDTH, 1.6 + 0.45 * n_cols)
    return (width, min(1.2 * FIGURE_WIDTH, 1.0 + 0.4 * n_rows))


def _as_matrix(weights) -> np.ndarray:
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu().numpy()
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"expected a (queries, keys) matrix of weights, got shape {weights.shape}")
    return weights


def plot_attention(
    weights,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    title: str = "Attention weights",
    xlabel: str = "key (source position)",
    ylabel: str = "query (target position)",
    ax=None,
    annotate: bool | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
    vmax: float | None = None,
):
    """Draw one attention matrix as a heat map; return the matplotlib ``Axes``.

    Parameters
    ----------
    weights
        (L, S) array or tensor; row i holds query i's weights over the keys.
    query_labels
        L tick labels for the rows (the query tokens).
    key_labels
        S tick labels for the columns (the key tokens).
    title, xlabel, ylabel
        text of the figure; every figure in the course has all three.
    ax
        the Axes to draw into (a new figure if None).
    annotate
        write each weight in its cell (default: when the matrix is at most 12 x 12).
    colorbar
        draw the colour scale beside the matrix (panels that share one can leave it out).
    vmax
        the weight drawn brightest (default: the matrix's largest); panels compared
        with one colour scale share it.
    """
    import matplotlib.pyplot as plt

    w = _as_matrix(weights)
    n_q, n_k = w.shape
    for name, labels, size in (("query_labels", query_labels, n_q), ("key_labels", key_labels, n_k)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} has {len(labels)} labels for {size} {name.split('_')[0]} rows/columns")
    if ax is None:
        _, ax = plt.subplots(figsize=_matrix_size(n_q, n_k))
    top = max(1e-12, float(w.max())) if vmax is None else float(vmax)
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=top, aspect="auto")
    ax.set_xticks(range(n_k), labels=[str(t) for t in key_labels] if key_labels is not None else None)
    ax.set_yticks(range(n_q), labels=[str(t) for t in query_labels] if query_labels is not None else None)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if annotate is None:
        annotate = n_q <= 12 and n_k <= 12
    if annotate:
        for i in range(n_q):
            for j in range(n_k):
                color = "black" if w[i, j] > 0.6 * top else "white"
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=MIN_FONT_SIZE, color=color)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    return ax


def plot_mask(mask, query_labels: Sequence[str], key_labels: Sequence[str], *, title: str, ax=None):
    """Draw a boolean (L, S) mask as a grid, built in chapter 05: light = may attend, dark = blocked.

    Parameters
    ----------
    mask
        (L, S) boolean array or tensor, ``True`` where query i may attend to key j.
    query_labels, key_labels
        L tick labels for the rows, S tick labels for the columns.
    title
        the panel's title.
    ax
        the Axes to draw into (a new figure if None).

    Returns
    -------
    matplotlib.axes.Axes
        The matplotlib ``Axes``. Every cell is also written as "T" or "F", so the figure
        does not rely on colour alone.
    """
    import matplotlib.pyplot as plt

    m = _as_matrix(mask) > 0.5
    n_q, n_k = m.shape
    if len(query_labels) != n_q or len(key_labels) != n_k:
        raise ValueError(f"mask of shape {m.shape} needs {n_q} query and {n_k} key labels")
    if ax is None:
        _, ax = plt.subplots(figsize=_matrix_size(n_q, n_k))
    ax.imshow(m.astype(float), cmap="gray", vmin=0, vmax=1.4, aspect="auto")
    ax.set_xticks(range(n_k), labels=[str(t) for t in key_labels], rotation=45)
    ax.set_yticks(range(n_q), labels=[str(t) for t in query_labels])
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    for i in range(n_q):
        for j in range(n_k):
            ax.text(
                j,
                i,
                "T" if m[i, j] else "F",
                ha="center",
                va="center",
                fontsize=MIN_FONT_SIZE,
                color="black" if m[i, j] else "white",
            )
    return ax
