"""Canvas's bulk download (coursetools/grade/lms/canvas.py): ids, late, resubmissions."""

from __future__ import annotations

import fixtures
from fixtures import STEM, _nb, _zip

from coursetools.grade.lms import intake


def _staged(result: intake.Intake) -> set[str]:
    return {p.name for p in result.folder.iterdir() if not p.name.startswith(".")}  # not the intake's mark


def test_canvas_names_ids_late_and_duplicates(tmp_path):
    members = {
        f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(),
        f"hoppergrace_LATE_23456_78901_{STEM}.ipynb": _nb(),
        f"turingalan_34567_11111_{STEM}.ipynb": _nb(fixtures.ZEROS),
        f"turingalan_34567_22222_{STEM}-1.ipynb": _nb(),
        "knuthdonald_45678_33333_answers.pdf": b"%PDF-1.4",
    }
    when = {f"turingalan_34567_22222_{STEM}-1.ipynb": (2026, 11, 2, 9, 0, 0)}
    result = intake.collect(_zip(tmp_path / "canvas.zip", members, when), tmp_path / "staged", STEM)
    by = {e.student: e for e in result.entries}
    assert set(by) == {"lovelaceada-12345", "hoppergrace-23456", "turingalan-34567", "knuthdonald-45678"}
    assert by["lovelaceada-12345"].student_id == "12345" and by["lovelaceada-12345"].lms == "canvas"
    assert by["hoppergrace-23456"].late and not by["lovelaceada-12345"].late
    turing = by["turingalan-34567"]
    assert turing.duplicate and turing.file.endswith("22222_00-how-to-use-1.ipynb")
    assert [e.student for e in result.duplicates] == ["turingalan-34567"]
    assert any("turingalan-34567: 2 files" in p for p in result.problems)
    assert _staged(result) == {
        "lovelaceada-12345.ipynb",
        "hoppergrace-23456.ipynb",
        "turingalan-34567.ipynb",
        "knuthdonald-45678",  # not a notebook: the grader reports it unreadable
    }
    assert (result.folder / "turingalan-34567.ipynb").read_bytes() == _nb()  # the newest, not the zeros


def test_on_equal_times_the_larger_canvas_number_is_newest(tmp_path):
    members = {
        f"turingalan_34567_22222_{STEM}.ipynb": _nb(),
        f"turingalan_34567_11111_{STEM}.ipynb": _nb(fixtures.ZEROS),
    }
    result = intake.collect(_zip(tmp_path / "c.zip", members), tmp_path / "staged", STEM)
    assert result.entries[0].file.startswith("turingalan_34567_22222")
