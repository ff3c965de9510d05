"""CONTRIBUTING.md's layout map is the tree's (issue 47): every folder it names exists, every
folder that holds Python is named, and the map is what ``tools/layout_map.py`` generates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import layout_map  # noqa: E402

TEXT = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
REGENERATE = "run: python tools/layout_map.py --write"


def test_every_folder_the_map_names_exists():
    named = layout_map.named_folders(TEXT)
    assert named, "the map names no folder: the reader below found nothing"
    gone = [folder for folder in named if not (ROOT / folder).is_dir()]
    assert not gone, f"the map names folders that are gone: {gone}; {REGENERATE}"


def test_every_folder_that_holds_python_is_named():
    missing = sorted(set(layout_map.folders()) - set(layout_map.named_folders(TEXT)))
    assert not missing, f"folders not in the map: {missing}; {REGENERATE}"
    assert {"coursetools/grade/sandbox", "tests/grader/stories"} <= set(layout_map.named_folders(TEXT))


def test_the_map_is_current():
    assert layout_map.current_block(TEXT) == layout_map.block(), REGENERATE


def _tree(root: Path, files: list[str]) -> None:
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text('"""A folder of the synthetic tree."""\n', encoding="utf-8")


@pytest.mark.parametrize("planted", ["coursetools/grade/helpers/__init__.py", "attnlib/newroom/__init__.py"])
def test_a_new_folder_is_missing_from_an_old_map_and_a_gone_one_is_named(tmp_path, planted):
    """The checks themselves, on a synthetic tree: a folder saved after the map was written is
    missing from it; a folder the map names that is deleted is named as gone."""
    base = ["attnlib/__init__.py", "coursetools/__init__.py", "coursetools/grade/__init__.py", "tools/x.py"]
    base += ["tests/test_x.py", "benchmarks/b.py"]
    _tree(tmp_path, base)
    for room in ("book", "solutions", "exercises"):
        (tmp_path / room).mkdir()
    old = layout_map.block(tmp_path)
    _tree(tmp_path, [planted])
    new_folder = str(Path(planted).parent.as_posix())
    assert new_folder in set(layout_map.folders(tmp_path)) - set(layout_map.named_folders(old))
    assert new_folder in layout_map.named_folders(layout_map.block(tmp_path))
    (tmp_path / "tools" / "x.py").unlink()
    (tmp_path / "tools").rmdir()
    assert not (tmp_path / "tools").is_dir() and "tools" in layout_map.named_folders(old)


def test_a_folder_that_says_nothing_of_itself_is_refused(tmp_path):
    (tmp_path / "attnlib" / "quiet").mkdir(parents=True)
    (tmp_path / "attnlib" / "quiet" / "__init__.py").write_text("", encoding="utf-8")
    with pytest.raises(LookupError, match="attnlib/quiet/ says nothing of itself"):
        layout_map.describe("attnlib/quiet", tmp_path)
