"""A learner's ``record.json``: read back, written (last, so it marks the learner finished),
and the record of a learner not graded yet. Every file is written with
:func:`~coursetools.grade.records.paths.atomic_write`."""

from __future__ import annotations

import json
from pathlib import Path

from coursetools.grade.records.paths import Out, atomic_write
from coursetools.grade.records.record import ExerciseResult, Record

RECORD = "record.json"


def load_record(out: Path, student: str) -> dict | None:
    path = Out(Path(out)).record(student)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) and record.get("student") == student else None


def write_record(out: Path, record: Record) -> None:
    """The grader's record as ``record.json`` (written last for a learner: it marks the learner
    finished)."""
    atomic_write(Out(Path(out)).record(record.student), json.dumps(record.to_dict(), indent=1) + "\n")


def pending_record(student: str, file: str, assignment_points: dict[str, float]) -> Record:
    """The record of a learner not graded yet: every exercise unscored (``runs`` is None)."""
    return Record(
        student,
        file,
        exercises={k: ExerciseResult(k, v, None) for k, v in assignment_points.items()},
        max=float(sum(assignment_points.values())),
    )
