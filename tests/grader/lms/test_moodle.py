"""Moodle's download (coursetools/grade/lms/moodle.py): a folder per learner, or flat files."""

from __future__ import annotations

import fixtures
from fixtures import STEM, _nb, _zip

from coursetools.grade.lms import intake


def _staged(result: intake.Intake) -> set[str]:
    return {p.name for p in result.folder.iterdir() if not p.name.startswith(".")}  # not the intake's mark


def test_moodle_folders_and_flat_files(tmp_path):
    members = {
        f"Ada Lovelace_12345_assignsubmission_file_/{STEM}.ipynb": _nb(),
        f"Grace Hopper_23456_assignsubmission_file_/work/{STEM}.ipynb": _nb(),
        "Grace Hopper_23456_assignsubmission_file_/work/scratch.ipynb": _nb(fixtures.ZEROS),
        "Alan Turing_34567_assignsubmission_file_/.ipynb_checkpoints/x-checkpoint.ipynb": _nb(),
        f"Alan Turing_34567_assignsubmission_file_/{STEM}.ipynb": _nb(),
        f"Donald Knuth_45678_assignsubmission_file_{STEM}.ipynb": _nb(),
        f"__MACOSX/Ada Lovelace_12345_assignsubmission_file_/._{STEM}.ipynb": b"junk",
    }
    when = {"Grace Hopper_23456_assignsubmission_file_/work/scratch.ipynb": (2026, 11, 3, 0, 0, 0)}
    result = intake.collect(_zip(tmp_path / "moodle.zip", members, when), tmp_path / "staged", STEM)
    by = {e.student: e for e in result.entries}
    assert set(by) == {"ada-lovelace-12345", "grace-hopper-23456", "alan-turing-34567", "donald-knuth-45678"}
    assert by["ada-lovelace-12345"].name == "Ada Lovelace" and by["ada-lovelace-12345"].lms == "moodle"
    grace = by["grace-hopper-23456"]
    # two notebooks: reported; the one named like the assignment is graded, though older
    assert grace.duplicate and grace.file.endswith(f"work/{STEM}.ipynb")
    assert not by["alan-turing-34567"].duplicate  # checkpoints are not submissions
