"""Moodle's download: one folder per learner, or the same names flat.

``Full Name_12345_assignsubmission_file_/`` holds a learner's files (Moodle makes such a
folder for an online-text submission too, then empty); without folders, each file is
``Full Name_12345_assignsubmission_file_05-masks.ipynb``. Moodle's file picker names a
re-upload ``05-masks (1).ipynb``.
"""

from __future__ import annotations

import re

from coursetools.grade.lms.base import Layout, Learner, slug

MOODLE_FOLDER = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_file_(?P<file>.+)$")
MOODLE_REUPLOAD = re.compile(r" \(\d+\)$")  # Moodle's file picker: "05-masks (1).ipynb"


class Moodle(Layout):
    """Moodle's names: a learner per ``Full Name_uid_assignsubmission_`` folder or file."""

    name = "moodle"

    def folder(self, name: str) -> Learner | None:
        return _learner(MOODLE_FOLDER.match(name))

    def file(self, name: str) -> Learner | None:
        return _learner(MOODLE_FILE.match(name))

    def refused(self, top: str, in_folder: bool) -> Learner | None:
        return self.folder(top) if in_folder else self.file(top)

    def prefix(self, name: str) -> re.Match | None:
        return MOODLE_FILE.match(name)

    def unmark(self, stem: str) -> str:
        return MOODLE_REUPLOAD.sub("", stem)


def _learner(match: re.Match | None) -> Learner | None:
    if match is None:
        return None
    person, uid = match["name"].strip(), match["uid"]
    return Learner(f"{slug(person)}-{uid}", uid, person)
