"""attnlib.utils.show_source: the code a page shows fits its column, comments moved, code kept."""

from attnlib.utils import _fit_comments, show_source


def test_a_long_trailing_comment_moves_above_its_line():
    source = "def f(x):\n    y = x + 1  # " + "why " * 30 + "\n    return y  # short\n"
    shown = _fit_comments(source, 80)
    assert max(len(line) for line in shown.splitlines()) <= 80
    lines = shown.splitlines()
    code_at = lines.index("    y = x + 1")
    assert lines[code_at - 1].startswith("    # why")
    assert "    return y  # short" in lines  # a comment that fits stays where it is
    # the words of the comment are all kept, in order
    moved = " ".join(line.strip()[2:] for line in lines[1:code_at])
    assert moved.split() == ["why"] * 30


def test_a_hash_inside_a_string_is_not_a_comment():
    source = "s = '#' * 100 + 'x' * 90\n"
    assert _fit_comments(source, 80) == source


def test_show_source_keeps_the_code_and_fits_80_columns():
    def example(a):
        return a * 2  # a comment long enough to push this line past the page's eighty columns, surely

    shown = show_source(example).data
    assert "return a * 2\n" in shown
    assert all(len(line) <= 80 for line in shown.splitlines())
