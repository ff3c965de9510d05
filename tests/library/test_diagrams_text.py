"""attnlib.figures.diagrams_text: chapter 12's pictures draw in the course style and show what they say."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from attnlib.figures.diagrams_text import draw_induction, draw_model_families  # noqa: E402
from attnlib.figures.plotting import FIGURE_WIDTH, MIN_FONT_SIZE, smallest_font_size  # noqa: E402


@pytest.mark.parametrize(
    ("draw", "labels"),
    [
        (draw_induction, ("first half: 0-4", "second half repeats it: 5-9", "t - T + 1 = 3", "t - T = 2")),
        (
            draw_model_families,
            ("encoder-only", "decoder-only", "encoder-decoder", "cross: full", "self: causal"),
        ),
    ],
)
def test_diagram_is_page_wide_readable_and_labelled(draw, labels):
    import matplotlib.pyplot as plt

    fig = draw()
    try:
        width, height = fig.get_size_inches()
        assert width == pytest.approx(FIGURE_WIDTH) and 1.0 <= height <= 6.0
        assert smallest_font_size(fig) >= MIN_FONT_SIZE
        texts = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        for label in labels:
            assert label in texts, f"the diagram lacks {label!r}"
    finally:
        plt.close(fig)


def test_the_masks_drawn_are_full_causal_and_full():
    """Encoder-only: 25 filled squares; decoder-only: 15 (the lower triangle of 5 x 5)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig = draw_model_families()
    try:
        squares = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
        filled = [p.get_facecolor() != matplotlib.colors.to_rgba("white") for p in squares]
        per_panel = [sum(filled[i : i + 25]) for i in range(0, len(filled), 25)]
        assert per_panel == [25, 15, 25, 15, 25]
    finally:
        plt.close(fig)
