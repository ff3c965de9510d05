"""``OUT/roster.csv`` read back: who each graded key is, and the LMS ids that name one learner.

The intake writes the roster (:mod:`coursetools.grade.lms.roster`), one row per file of the
download: the key, the LMS's id and name, the graded file as the download names it, when it
was stored, and ``upload``, the name the learner gave it. The outputs read it here and never
parse an LMS's naming themselves.
"""

from __future__ import annotations

import csv
from pathlib import Path

from coursetools.grade.records.escape import uncell

ROSTER = "roster.csv"
ROSTER_FIELDS = [
    "student",
    "student_id",
    "name",
    "lms",
    "late",
    "submitted",
    "file",
    "duplicate_of",
    "upload",
]


def read_roster_rows(out: Path) -> list[dict]:
    """Every row of ``OUT/roster.csv`` (empty when there is none), each cell as the intake meant it
    (the formula guards of :func:`~coursetools.grade.records.escape.csv_cell` removed)."""
    path = Path(out) / ROSTER
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as fh:
        return [{k: uncell(v or "") for k, v in r.items() if k} for r in csv.DictReader(fh)]


def read_roster(out: Path) -> dict[str, dict]:
    """``{student: row}`` of the graded files in ``OUT/roster.csv`` (empty when there is none)."""
    return {r["student"]: r for r in read_roster_rows(out) if not r.get("duplicate_of")}


def ids_to_keys(roster: dict[str, dict]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """From the roster's graded rows ``{key: row}``: ``{id: key}`` for the LMS ids that name
    exactly one learner, and ``{id: [keys]}`` for those that name more (never applied)."""
    keys: dict[str, list[str]] = {}
    for key, row in roster.items():
        if row.get("student_id"):
            keys.setdefault(row["student_id"], []).append(key)
    unique = {i: k[0] for i, k in keys.items() if len(k) == 1}
    return unique, {i: sorted(k) for i, k in keys.items() if len(k) > 1}
