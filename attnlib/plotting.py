"""Figures shared by the chapters: attention heat maps with token labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
):
    """Draw one attention matrix as a heat map; return the matplotlib ``Axes``.

    Args:
        weights: (L, S) array or tensor; row i holds query i's weights over the keys.
        query_labels: L tick labels for the rows (the query tokens).
        key_labels: S tick labels for the columns (the key tokens).
        title, xlabel, ylabel: text of the figure; every figure in the course has all three.
        ax: the Axes to draw into (a new figure if None).
        annotate: write each weight in its cell (default: when the matrix is at most 12 x 12).
    """
    import matplotlib.pyplot as plt

    w = _as_matrix(weights)
    n_q, n_k = w.shape
    for name, labels, size in (("query_labels", query_labels, n_q), ("key_labels", key_labels, n_k)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} has {len(labels)} labels for {size} {name.split('_')[0]} rows/columns")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.45 * n_k, 0.8 + 0.4 * n_q))
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=max(1e-12, float(w.max())), aspect="auto")
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
                color = "black" if w[i, j] > 0.6 * w.max() else "white"
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7, color=color)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    return ax


def plot_mask(mask, query_labels: Sequence[str], key_labels: Sequence[str], *, title: str, ax=None):
    """Draw a boolean (L, S) mask as a grid, built in chapter 05: light = may attend, dark = blocked.

    Args:
        mask: (L, S) boolean array or tensor, ``True`` where query i may attend to key j.
        query_labels: L tick labels for the rows; key_labels: S tick labels for the columns.
        title: the panel's title.
        ax: the Axes to draw into (a new figure if None).

    Returns:
        The matplotlib ``Axes``. Every cell is also written as "T" or "F", so the figure
        does not rely on colour alone.
    """
    import matplotlib.pyplot as plt

    m = _as_matrix(mask) > 0.5
    n_q, n_k = m.shape
    if len(query_labels) != n_q or len(key_labels) != n_k:
        raise ValueError(f"mask of shape {m.shape} needs {n_q} query and {n_k} key labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.45 * n_k, 0.8 + 0.4 * n_q))
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
                fontsize=8,
                color="black" if m[i, j] else "white",
            )
    return ax
