"""Written questions: which markdown cells an instructor grades by hand, and a learner's answers.

The vocabulary both sides share: the grader reads a notebook's questions and answers in
its limited reader worker (:mod:`.parse_worker`), the instructor's sheets and scores live
in :mod:`.manual`. A question is a markdown cell whose metadata marks it, with its points::

    {"attnlib": {"manual": "q-01-1", "points": 1}}

(nbgrader's ``{"nbgrader": {"grade": true, "solution": true, "grade_id": ..., "points": ...}}``
is read too).
"""

from __future__ import annotations

import re

QUESTION_ID = re.compile(r"^q-\d{2}-\d+$")
MAX_ANSWER = 20_000
STUB = "YOUR ANSWER HERE"  # coursetools.assign.ANSWER_STUB


def question_of(cell) -> tuple[str, float] | None:
    """``(id, points)`` of a markdown cell graded by hand (None for any other cell)."""
    if cell.get("cell_type") != "markdown":
        return None
    meta = cell.get("metadata", {}) or {}
    own = meta.get("attnlib", {}) if isinstance(meta.get("attnlib"), dict) else {}
    if own.get("manual"):
        points = own.get("points")
        return (str(own["manual"]), float(points)) if isinstance(points, (int, float)) else None
    nbg = meta.get("nbgrader", {}) if isinstance(meta.get("nbgrader"), dict) else {}
    if nbg.get("grade") and nbg.get("solution") and nbg.get("grade_id"):
        points = nbg.get("points")
        return (str(nbg["grade_id"]), float(points)) if isinstance(points, (int, float)) else None
    return None


def questions(nb) -> dict[str, float]:
    """The written questions of a notebook, ``{id: points}``, in notebook order."""
    found: dict[str, float] = {}
    for cell in nb.get("cells", []):
        q = question_of(cell)
        if q is not None and q[1] > 0:
            found.setdefault(*q)
    return found


def answers(nb) -> dict[str, str]:
    """A learner's answer to each written question (the cell carrying its id)."""
    found: dict[str, str] = {}
    for cell in nb.get("cells", []):
        q = question_of(cell)
        if q is not None and q[0] not in found:
            source = cell.get("source", "")
            found[q[0]] = ("".join(source) if isinstance(source, list) else str(source))[:MAX_ANSWER]
    return found
