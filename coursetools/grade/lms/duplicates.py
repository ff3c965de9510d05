"""A learner with two or more files (a duplicate): which one is graded, and why the others are not.

A notebook is preferred to any other file, a notebook named like the assignment to other
notebooks (a re-upload ``05-masks (1).ipynb`` or ``05-masks-1.ipynb`` is named like it), then
the newest file (the latest modification time, recorded in the zip or on disk; on equal times
the larger Canvas submission number, then the name).
"""

from __future__ import annotations

from coursetools.grade.lms.base import Candidate, Entry
from coursetools.grade.lms.layouts import upload_name


def _rank(entry: Entry, candidate: Candidate, assignment_stem: str) -> tuple:
    original = upload_name(candidate.source, entry.lms)
    notebook = original.endswith(".ipynb")
    named = notebook and original[: -len(".ipynb")] == assignment_stem
    return (notebook, named, candidate.mtime, candidate.number, candidate.source)


def choose(entry: Entry, assignment_stem: str) -> Candidate | None:
    """The file to grade: a notebook before anything else, one named like the assignment
    before other notebooks (a re-upload ``05-masks (1).ipynb`` or ``05-masks-1.ipynb`` is
    named like it), then the newest."""
    if not entry.candidates:
        return None
    return max(entry.candidates, key=lambda c: _rank(entry, c, assignment_stem))


def why_not(entry: Entry, pick: Candidate, other: Candidate, assignment_stem: str) -> str:
    """Why ``other`` was not graded, in the words of the roster and the message."""
    mine, theirs = _rank(entry, pick, assignment_stem), _rank(entry, other, assignment_stem)
    if mine[0] and not theirs[0]:
        return "not a notebook"
    if mine[1] and not theirs[1]:
        newer = " though newer" if other.mtime > pick.mtime else ""
        return f"not named like the assignment{newer}"
    return "older"


def why_graded(entry: Entry, pick: Candidate, assignment_stem: str) -> str:
    """Why ``pick`` was graded among a duplicate's files."""
    rank = _rank(entry, pick, assignment_stem)
    others = [_rank(entry, c, assignment_stem) for c in entry.candidates if c is not pick]
    newest = all(rank[2:4] >= o[2:4] for o in others)
    if rank[1]:
        kind = (
            "the newest notebook named like the assignment"
            if newest
            else "the notebook named like the assignment"
        )
        return kind if newest or any(o[1] for o in others) else f"{kind}, though older"
    if rank[0]:
        return "the newest notebook" if newest else "a notebook"
    return "the newest file (no notebook)"
