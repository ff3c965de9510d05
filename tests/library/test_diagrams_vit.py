"""attnlib.figures.diagrams_vit: the whole-model diagram of chapter 11 draws in the course style."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from attnlib.figures.diagrams_vit import DIGIT, draw_vit  # noqa: E402
from attnlib.figures.plotting import FIGURE_WIDTH, MIN_FONT_SIZE, smallest_font_size  # noqa: E402


def test_vit_diagram_is_page_wide_readable_and_labelled():
    import matplotlib.pyplot as plt

    fig = draw_vit()
    try:
        width, height = fig.get_size_inches()
        assert width == pytest.approx(FIGURE_WIDTH) and 1.5 <= height <= 6.0
        assert smallest_font_size(fig) >= MIN_FONT_SIZE
        texts = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        for label in ("8x8 image", "tokens", "+ positions", "class token", "Transformer block", "no mask"):
            assert label in texts, f"the diagram lacks {label!r}"
    finally:
        plt.close(fig)


def test_the_drawn_digit_has_sklearns_shape_and_grey_levels():
    assert DIGIT.shape == (8, 8)
    assert DIGIT.min() == 0 and DIGIT.max() == 16
