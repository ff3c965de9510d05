"""attnlib.figures.diagrams: each diagram is in the course style, its numbers it shows follow the formulas."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnlib.figures import diagrams  # noqa: E402
from attnlib.figures.plotting import FIGURE_WIDTH, MIN_FONT_SIZE, smallest_font_size  # noqa: E402

DRAWERS = [name for name in diagrams.__all__ if name.startswith("draw_")]


@pytest.mark.parametrize("name", DRAWERS)
def test_every_diagram_is_page_wide_and_readable(name):
    import matplotlib.pyplot as plt

    fig = getattr(diagrams, name)()
    try:
        width, height = fig.get_size_inches()
        assert width == pytest.approx(FIGURE_WIDTH), f"{name}: {width} in wide, expected {FIGURE_WIDTH}"
        assert 1.5 <= height <= 6.0, f"{name}: {height} in tall"
        smallest = smallest_font_size(fig)
        assert smallest >= MIN_FONT_SIZE, f"{name}: smallest text {smallest} pt < {MIN_FONT_SIZE} pt"
        texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]
        assert texts, f"{name} draws no labels"
    finally:
        plt.close(fig)


def test_query_key_value_draws_the_softmax_of_the_scores():
    import matplotlib.pyplot as plt

    scores = np.array([2.0, 0.5, -1.0, 1.0])
    fig = diagrams.draw_query_key_value(scores)
    shown = {t.get_text().strip() for t in fig.findobj(matplotlib.text.Text)}
    weights = np.exp(scores) / np.exp(scores).sum()
    assert {f"{w:.2f}" for w in weights} <= shown
    plt.close(fig)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: diagrams.draw_bottleneck(source_len=9), "source_len must be an integer from 2 to 6"),
        (lambda: diagrams.draw_heads(num_heads=True), "draw_heads: num_heads must be an integer"),
        (lambda: diagrams.draw_tiles(n_key_tiles=1), "n_key_tiles must be an integer from 2 to 8"),
        (lambda: diagrams.draw_alignment(weights=np.ones((2, 2))), r"weights must have shape \(5, 5\)"),
        (lambda: diagrams.draw_query_key_value([1.0]), "scores must be 2 to 6 numbers"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_non_number_size_is_a_type_error():
    with pytest.raises(TypeError, match="draw_tiles: n_key_tiles"):
        diagrams.draw_tiles(n_key_tiles="4")


def _texts(fig):
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]


def test_bottleneck_feeds_the_context_to_every_decoder_step():
    """Chapter 01's model (and Cho et al. 2014) give c to each decoder step, not only the first."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.patches import FancyArrowPatch

    for target_len in (2, 4, 6):
        fig = diagrams.draw_bottleneck(target_len=target_len)
        red = [
            a
            for a in fig.findobj(FancyArrowPatch)
            if to_rgba(a.get_edgecolor()) == to_rgba(diagrams.VERMILION)
        ]
        # h_S -> c, c -> s_1 (the start state), and c -> every step as an input
        assert len(red) == 2 + target_len, f"{len(red)} context arrows for {target_len} steps"
        plt.close(fig)


def test_alignment_draws_the_copied_token_thickest():
    import matplotlib.pyplot as plt

    source, target, aligned = "932432", "933224", [0, 1, 4, 5, 2, 3]
    fig = diagrams.draw_alignment(source=source, target=target, aligned=aligned)
    xs = np.linspace(1.5, 8.5, 6)
    thickest = {}
    for line in fig.axes[0].lines:
        (x_src, x_tgt), width = line.get_xdata(), line.get_linewidth()
        i, j = int(np.argmin(abs(xs - x_tgt))), int(np.argmin(abs(xs - x_src)))
        if width > thickest.get(i, (0, -1))[0]:
            thickest[i] = (width, j)
    assert [thickest[i][1] for i in range(6)] == aligned
    plt.close(fig)
    with pytest.raises(ValueError, match="aligned must give one source position"):
        diagrams.draw_alignment(source=source, target=target, aligned=[0, 1, 2])
    with pytest.raises(ValueError, match="aligned must give one source position"):
        diagrams.draw_alignment(source=source, target=target, aligned=[0, 1, 4, 5, 2, 6])


def test_heads_diagram_shows_the_layer_output():
    import matplotlib.pyplot as plt

    fig = diagrams.draw_heads()
    assert any(t.startswith("output") for t in _texts(fig))
    plt.close(fig)


def test_tiles_use_the_chapter_notation():
    """Chapter 08 writes the running state m, ell and a (the unnormalised output)."""
    import matplotlib.pyplot as plt

    fig = diagrams.draw_tiles()
    rows = [t for t in _texts(fig) if "of tile row" in t]
    assert rows and all(t.startswith("$m, \\ell, a$") for t in rows), rows
    plt.close(fig)
