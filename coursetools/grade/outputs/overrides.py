"""Manual adjustments that survive regrading: ``overrides.csv``.

An instructor who disagrees with the grader writes one row per adjustment::

    student,exercise,points,reason
    lovelaceada-12345,ex-05-2,2,"right idea, off by one in the last row; regraded by hand"

``student`` is the gradebook's key or, when the class came from an LMS, the
student id of ``roster.csv``; ``exercise`` an exercise id of the assignment;
``points`` the exercise's new score (from 0 to the exercise's points);
``reason`` is shown to the learner. The row replaces the automatic score of that
exercise; the rest of the grade is untouched.

The file lives in the output folder (``OUT/overrides.csv``, or any path given
with ``--overrides``, remembered in ``OUT/class.json``) and is never written by the
grader, so a regrade keeps it. This module reads and checks its rows
(:func:`read`, :func:`resolve`); :mod:`coursetools.grade.outputs.scores` applies them,
always to the grader's own records (never to a previous merge, so applying twice
changes nothing), and every output is rendered from the result
(:func:`coursetools.grade.outputs.publish.publish`): the exercise's column, ``total`` and
``adjustments`` of ``grades.csv``, a test per adjustment in ``results.json``, the
learner's feedback (*What your instructor changed*), ``report.html``, the summary
and the LMS exports. :func:`coursetools.grade.commands.apply_overrides`
(``python -m coursetools.grade overrides OUT``) does that without regrading.

Rows that cannot be applied (an unknown student or exercise, points that are
not a number or out of range) are reported and skipped; when a student and
exercise appear twice, the last row wins and the first is reported.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from coursetools.grade.records.escape import terminal
from coursetools.grade.records.record import Record, number
from coursetools.grade.records.roster import ids_to_keys

FILENAME = "overrides.csv"
FIELDS = ("student", "exercise", "points", "reason")


@dataclass
class Override:
    student: str
    exercise: str
    points: float
    reason: str
    line: int


def read(path: Path) -> tuple[list[Override], list[str]]:
    """The rows of an ``overrides.csv`` and what is wrong with the file itself."""
    problems: list[str] = []
    path = Path(path)
    if not path.is_file():
        return [], []
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [f for f in FIELDS[:3] if f not in (reader.fieldnames or [])]
        if missing:
            return [], [f"{path.name}: no column {', '.join(missing)} (expected {', '.join(FIELDS)})"]
        rows = []
        for line, row in enumerate(reader, start=2):
            student = (row.get("student") or "").strip()
            exercise = (row.get("exercise") or "").strip()
            if not student and not exercise:
                continue
            try:
                points = float((row.get("points") or "").strip())
            except ValueError:
                problems.append(f"{path.name} line {line}: points {row.get('points')!r} is not a number")
                continue
            rows.append(Override(student, exercise, points, (row.get("reason") or "").strip(), line))
    return rows, problems


def resolve(
    rows: list[Override], records: dict[str, Record], roster: dict[str, dict] | None = None
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """``{student: {exercise: {"points", "reason", "auto"}}}`` for the rows that apply, and the problems."""
    by_id, shared = ids_to_keys(roster or {})
    chosen: dict[str, dict[str, dict]] = {}
    problems: list[str] = []
    for row in rows:
        student = row.student if row.student in records else by_id.get(row.student)
        where = f"{FILENAME} line {row.line}"
        if student is None and row.student in shared:
            keys = ", ".join(shared[row.student])
            problems.append(
                f"{where}: LMS id {terminal(repr(row.student))} names {len(shared[row.student])} learners "
                f"({terminal(keys, 300)}); not applied: write the key instead"
            )
            continue
        if student is None or student not in records:
            problems.append(f"{where}: no student {terminal(repr(row.student))} in this class")
            continue
        exercise = records[student].exercises.get(row.exercise)
        if exercise is None:
            problems.append(f"{where}: no exercise {terminal(repr(row.exercise))} in this assignment")
            continue
        if not 0 <= row.points <= exercise.points:
            problems.append(f"{where}: {number(row.points)} points is outside 0 .. {number(exercise.points)}")
            continue
        if row.exercise in chosen.get(student, {}):
            problems.append(f"{where}: {student} {row.exercise} adjusted again; this later row counts")
        chosen.setdefault(student, {})[row.exercise] = {
            "points": row.points,
            "reason": row.reason,
            "auto": exercise.score,
        }
    return chosen, problems
