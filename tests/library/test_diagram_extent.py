"""Every course diagram stays inside its canvas: the page shows a figure at most as wide as the
text column, so a label that runs past the canvas widens the saved picture and shrinks all of its
text on a phone (chapter 12's induction diagram did: 639 px drawn, its 9 pt labels at 7.7 px)."""

import inspect

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from attnlib.figures import diagrams, diagrams_text, diagrams_vit  # noqa: E402
from attnlib.figures.plotting import FIGURE_WIDTH  # noqa: E402


def _drawings():
    for module in (diagrams, diagrams_text, diagrams_vit):
        for name in module.__all__:
            fn = getattr(module, name)
            if not (name.startswith("draw_") and callable(fn)):
                continue
            required = [
                p
                for p in inspect.signature(fn).parameters.values()
                if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            ]
            if not required:
                yield pytest.param(fn, id=f"{module.__name__.rsplit('.', 1)[1]}.{name}")


DRAWINGS = list(_drawings())


def test_there_are_diagrams_to_check():
    assert len(DRAWINGS) >= 10, DRAWINGS


@pytest.mark.parametrize("draw", DRAWINGS)
def test_the_drawing_fits_the_canvas_width(draw):
    import matplotlib.pyplot as plt

    fig = draw()
    try:
        fig.canvas.draw()
        tight = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, what bbox_inches="tight" saves
        # 2 % for the tight box's padding around text at the canvas edge
        assert tight.width <= FIGURE_WIDTH * 1.02, (
            f"{draw.__name__} draws {tight.width:.2f} in wide on a {FIGURE_WIDTH} in canvas: "
            "wrap or shorten the text that runs past the edge"
        )
    finally:
        plt.close(fig)
