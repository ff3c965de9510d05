"""The roster the intake writes: ``OUT/roster.csv``, one row per file of the download.

Its reader is :mod:`coursetools.grade.records.roster` (the outputs read the learner's upload
name there, never re-derive it from an LMS's naming).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from coursetools.grade.lms.base import Intake
from coursetools.grade.lms.layouts import upload_name
from coursetools.grade.records.escape import csv_cell
from coursetools.grade.records.roster import ROSTER, ROSTER_FIELDS


def write_roster(out: Path, intake: Intake) -> Path:
    """``OUT/roster.csv``: who each graded key is, which file was graded and when it was
    stored, the name the learner gave it (``upload``: the outputs never read an LMS's naming),
    which files were not graded and why (every learner text escaped: :mod:`.escape`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROSTER_FIELDS)
    for e in intake.entries:
        late = "yes" if e.late else ""
        row = [
            e.student,
            e.student_id,
            e.name,
            e.lms,
            late,
            e.submitted,
            e.file,
            "",
            upload_name(e.file, e.lms),
        ]
        writer.writerow([csv_cell(c) for c in row])
        for other, reason in zip(e.others, e.reasons or ["older"] * len(e.others), strict=False):
            row = [e.student, e.student_id, e.name, e.lms, "", "", other, f"not graded ({reason})"]
            row.append(upload_name(other, e.lms))
            writer.writerow([csv_cell(c) for c in row])
    path = Path(out) / ROSTER
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{ROSTER}.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
    return path
