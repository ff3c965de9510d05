"""The layouts read a member's name (coursetools/grade/lms/layouts.py and its classes)."""

from __future__ import annotations

import pytest
from fixtures import STEM

from coursetools.grade.lms.layouts import LAYOUTS, layout, names_a_learner, refused_name, upload_name

CANVAS_NAME = f"lovelaceada_LATE_12345_67890_{STEM}-2.ipynb"
MOODLE_NAME = f"Ada Lovelace_12345_assignsubmission_file_{STEM} (1).ipynb"
MOODLE_FOLDER = "Ada Lovelace_12345_assignsubmission_file_"


@pytest.mark.parametrize(
    ("lms", "source", "upload"),
    [
        ("canvas", CANVAS_NAME, f"{STEM}.ipynb"),  # prefix and resubmission mark dropped
        ("canvas", "knuthdonald_45678_33333_answers.pdf", "answers.pdf"),
        ("canvas", MOODLE_NAME, MOODLE_NAME),  # no Canvas prefix: the name as it is
        ("moodle", MOODLE_NAME, f"{STEM}.ipynb"),  # prefix and re-upload mark dropped
        ("moodle", f"{MOODLE_FOLDER}/work/{STEM} (2).ipynb", f"{STEM}.ipynb"),
        ("moodle", CANVAS_NAME, CANVAS_NAME),
        ("folder", f"ada/{STEM} (1).ipynb", f"{STEM} (1).ipynb"),  # no mark is read in a plain folder
        ("folder", CANVAS_NAME, CANVAS_NAME),
        ("folder", MOODLE_NAME, f"{STEM} (1).ipynb"),  # Moodle's prefix, and only it, dropped
    ],
)
def test_the_upload_name_is_the_name_the_learner_gave(lms, source, upload):
    assert upload_name(source, lms) == upload


def test_each_layout_names_its_own_learners():
    canvas, moodle, folder = LAYOUTS["canvas"], LAYOUTS["moodle"], LAYOUTS["folder"]
    learner = canvas.file(CANVAS_NAME)
    assert (learner.key, learner.uid, learner.person, learner.late, learner.number) == (
        "lovelaceada-12345",
        "12345",
        "lovelaceada",
        True,
        67890,
    )
    assert canvas.folder(MOODLE_FOLDER) is None and canvas.refused(CANVAS_NAME, in_folder=True) is None
    assert moodle.folder(MOODLE_FOLDER).key == moodle.file(MOODLE_NAME).key == "ada-lovelace-12345"
    assert moodle.file(MOODLE_NAME).number == 0 and not moodle.file(MOODLE_NAME).late
    assert moodle.refused(MOODLE_FOLDER, in_folder=True).uid == "12345"
    assert all(folder.file(n) is None and folder.folder(n) is None for n in (CANVAS_NAME, MOODLE_FOLDER))
    assert layout("anything else") is folder
    assert names_a_learner(MOODLE_FOLDER, is_dir=True) and not names_a_learner(MOODLE_FOLDER, is_dir=False)
    assert names_a_learner(CANVAS_NAME, is_dir=False) and not names_a_learner(f"{STEM}.ipynb", is_dir=False)


def test_a_refused_member_is_named_by_the_part_that_carries_its_id():
    assert refused_name(f"../{CANVAS_NAME}") == (CANVAS_NAME, False)
    assert refused_name(f"{MOODLE_FOLDER}/sub/x.ipynb") == (MOODLE_FOLDER, True)
    assert refused_name("C:\\class\\notes.txt") == ("notes.txt", True)
    assert refused_name("..") == ("", False)
