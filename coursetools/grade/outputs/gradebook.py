"""``OUT/grades.csv``, the gradebook: one row per learner from the class's final scores
(:class:`coursetools.grade.outputs.scores.ClassScores`), learner text escaped for spreadsheets
(:mod:`coursetools.grade.records.escape`), written atomically."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from coursetools.grade.outputs.feedback import _before_hidden, fixed_incident, relabel, upload_name
from coursetools.grade.records.escape import csv_cell
from coursetools.grade.records.paths import Out, atomic_write
from coursetools.grade.records.record import Record, Status, number


def short_notes(record: Record) -> str:
    """The gradebook's ``notes``: incidents and review reasons, cells named as the learner sees them."""
    early = _before_hidden(record)
    parts = [fixed_incident(str(t), early) for t in record.incidents or []] + list(record.review)
    if record.status is Status.UNREADABLE:
        parts += record.notes
    return "; ".join(relabel(parts, record.cell_labels))[:300]


ROSTER_COLUMNS = ["student_id", "name", "late", "duplicates"]


def gradebook_rows(scores) -> list[list[str]]:
    """``grades.csv`` as rows of text: the header, then one row per learner (escaped cells)."""
    with_roster = any(g.roster for g in scores.grades)
    items = scores.items
    header = ["student", *(ROSTER_COLUMNS if with_roster else []), *items, "total", "max", "status", "notes"]
    if scores.adjustable:
        header.append("adjustments")
    rows = [header]
    for grade in scores.grades:
        roster = (
            [
                grade.roster.get("student_id", ""),
                grade.roster.get("name", ""),
                grade.roster.get("late", ""),
                str(grade.files) if grade.files > 1 else "",
            ]
            if with_roster
            else []
        )
        notes = short_notes(grade.record)
        upload = grade.roster.get("file", "")
        if grade.status is Status.UNREADABLE and upload and not upload.endswith(".ipynb"):
            notes = f"not a notebook: {upload_name(grade)} (the learner's upload)"
        row = [
            grade.student,
            *roster,
            *(number(grade.scores.get(item)) for item in items),
            number(grade.total),
            number(grade.max),
            grade.status.value,
            notes,
        ]
        if scores.adjustable:
            row.append(grade.describe_adjustments())
        rows.append([csv_cell(cell) for cell in row])
    return rows


def write_gradebook(out: Path, scores) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(gradebook_rows(scores))
    atomic_write(Out(Path(out)).grades, buffer.getvalue())
