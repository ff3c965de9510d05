"""Canvas's bulk download: one flat folder, every file named after its learner.

``lastfirst_12345_67890_05-masks.ipynb``: the login, the user id, the submission id, then the
name the learner uploaded, which Canvas may suffix ``-1``, ``-2`` on a resubmission;
``lastfirst_LATE_12345_67890_...`` for a late one. Canvas's download has no folders.
"""

from __future__ import annotations

import re

from coursetools.grade.lms.base import Layout, Learner, slug

CANVAS = re.compile(r"^(?P<login>[^_/]+?)_(?P<late>LATE_)?(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
CANVAS_RESUBMISSION = re.compile(r"-\d+$")


class Canvas(Layout):
    """Canvas's names: a learner per ``login_[LATE_]uid_sid_`` prefix, late when it says so."""

    name = "canvas"

    def file(self, name: str) -> Learner | None:
        match = CANVAS.match(name)
        if match is None:
            return None
        login, uid = match["login"], match["uid"]
        return Learner(f"{slug(login)}-{uid}", uid, login, bool(match["late"]), match["sid"])

    def refused(self, top: str, in_folder: bool) -> Learner | None:
        return None if in_folder else self.file(top)

    def prefix(self, name: str) -> re.Match | None:
        return CANVAS.match(name)

    def unmark(self, stem: str) -> str:
        return CANVAS_RESUBMISSION.sub("", stem)
