"""The two-worker scheduler of conftest.py (``bash tools/test.sh``; ``COURSE_TEST_WORKERS=1``: none).

Which tests must stay together on one worker, and which units go out first, are decided from
node ids alone; these tests pin both, and check that the units named as the longest still exist
(a renamed test would silently lose its place at the front).
"""

from __future__ import annotations

import ast
import importlib.util
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course)


def test_a_notebook_a_module_and_the_website_each_stay_on_one_worker():
    unit = course.work_unit
    # both float-path copies of a notebook share the files they write: one unit
    assert unit("book/02-additive-attention.ipynb::Cell 13") == unit(
        "book/02-additive-attention.ipynb::Cell 13[default-1thread]"
    )
    assert unit("tests/chapters/test_ch10_transformer.py::test_a") == unit(
        "tests/chapters/test_ch10_transformer.py::test_b[1]"
    )
    assert unit("tests/site/test_links.py::test_x") == "site"
    assert unit("tests/site/test_accessibility.py::test_y[book/index]") == "site"
    # test_binder's tests each build their own environment: one unit each
    a, b = "tests/test_binder.py::test_a", "tests/test_binder.py::test_b"
    assert unit(a) == a and unit(b) == b


def test_the_longest_units_go_first_and_the_rest_keep_their_order():
    others = ["book/00-how-to-use.ipynb", "tests/grader/stories/test_grade.py"]
    queue = OrderedDict((unit, {}) for unit in [others[0], *reversed(course.LONGEST_FIRST), others[1]])
    course.put_longest_first(queue)
    assert list(queue) == [*course.LONGEST_FIRST, *others]
    queue = OrderedDict((unit, {}) for unit in [*others, "site"])  # a run of some tests only
    course.put_longest_first(queue)
    assert list(queue) == ["site", *others]


def test_every_unit_named_as_the_longest_exists():
    for unit in course.LONGEST_FIRST:
        if unit == "site":
            assert (ROOT / course.SITE_TESTS).is_dir()
            continue
        path, _, name = unit.partition("::")
        assert (ROOT / path).is_file(), unit
        if name:
            tree = ast.parse((ROOT / path).read_text())
            names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert name in names, f"{unit}: no such test (renamed? update conftest.LONGEST_FIRST)"
