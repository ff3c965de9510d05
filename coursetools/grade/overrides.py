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
with ``--overrides``) and is never written by the grader, so a regrade keeps
it: :func:`apply` runs after every grading and merges it, from the grader's
records (never from a previous merge, so applying twice changes nothing), into

* ``OUT/grades.csv``: the exercise's column, ``total``, and an ``adjustments``
  column that says what changed and why;
* ``OUT/<student>/results.json`` (Gradescope's format): a test per adjustment,
  ``max_score`` 0, whose score is the difference, and the top-level ``score``.

Rows that cannot be applied (an unknown student or exercise, points that are
not a number or out of range) are reported and skipped; when a student and
exercise appear twice, the last row wins and the first is reported.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

FILENAME = "overrides.csv"
FIELDS = ("student", "exercise", "points", "reason")
ADJUSTED = ": adjusted by your instructor"


@dataclass
class Override:
    student: str
    exercise: str
    points: float
    reason: str
    line: int


def number(value: float | None) -> str:
    if value is None:
        return ""
    text = f"{float(value):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def load_records(out: Path) -> dict[str, dict]:
    """``{student: record}`` of the grader's records under ``out``."""
    records = {}
    for path in sorted(Path(out).glob("*/record.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("student"), str):
            records[record["student"]] = record
    return records


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
    rows: list[Override], records: dict[str, dict], roster: dict[str, dict] | None = None
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """``{student: {exercise: {"points", "reason", "auto"}}}`` for the rows that apply, and the problems."""
    by_id = {}
    for key, row in (roster or {}).items():
        if row.get("student_id"):
            by_id.setdefault(row["student_id"], key)
    chosen: dict[str, dict[str, dict]] = {}
    problems: list[str] = []
    for row in rows:
        student = row.student if row.student in records else by_id.get(row.student)
        where = f"{FILENAME} line {row.line}"
        if student is None:
            problems.append(f"{where}: no student {row.student!r} in this class")
            continue
        exercise = records[student].get("exercises", {}).get(row.exercise)
        if exercise is None:
            problems.append(f"{where}: no exercise {row.exercise!r} in this assignment")
            continue
        if not 0 <= row.points <= float(exercise.get("points", 0)):
            problems.append(
                f"{where}: {number(row.points)} points is outside 0 .. {number(exercise.get('points'))}"
            )
            continue
        if row.exercise in chosen.get(student, {}):
            problems.append(f"{where}: {student} {row.exercise} adjusted again; this later row counts")
        chosen.setdefault(student, {})[row.exercise] = {
            "points": row.points,
            "reason": row.reason,
            "auto": exercise.get("score"),
        }
    return chosen, problems


def adjusted_total(record: dict, adjustments: dict[str, dict]) -> float | None:
    """The record's total with the adjusted exercises' scores replaced (None: not every exercise judged)."""
    total = 0.0
    for ex_id, ex in record.get("exercises", {}).items():
        if ex_id in adjustments:
            total += float(adjustments[ex_id]["points"])
        elif ex.get("score") is None:
            return None
        else:
            total += float(ex["score"])
    return round(total, 6)


def describe(adjustments: dict[str, dict]) -> str:
    parts = []
    for ex_id, adj in adjustments.items():
        auto = number(adj["auto"]) or "not judged"
        text = f"{ex_id}: {auto} -> {number(adj['points'])}"
        parts.append(f"{text} ({adj['reason']})" if adj["reason"] else text)
    return "; ".join(parts)


def merge_results(results: dict, record: dict, adjustments: dict[str, dict]) -> dict:
    """Gradescope results with the adjustments merged (earlier merges removed first)."""
    tests = [t for t in results.get("tests", []) if not str(t.get("name", "")).endswith(ADJUSTED)]
    automatic = record.get("total")
    if automatic is None:
        automatic = sum(float(t.get("score", 0)) for t in tests)
    score = float(automatic)
    for ex_id, adj in adjustments.items():
        delta = float(adj["points"]) - float(adj["auto"] or 0.0)
        score += delta
        tests.append(
            {
                "name": f"{ex_id}{ADJUSTED}",
                "score": round(delta, 6),
                "max_score": 0.0,
                "status": "passed",
                "output": describe({ex_id: adj}),
                "visibility": "visible",
            }
        )
    merged = dict(results)
    merged["tests"] = tests
    merged["score"] = round(score, 6)
    return merged


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def apply(out: Path, overrides: Path | None = None, roster: dict[str, dict] | None = None) -> list[str]:
    """Merge ``overrides`` (default ``OUT/overrides.csv``) into ``OUT/grades.csv`` and every
    ``OUT/<student>/results.json``; return the problems (empty when all rows applied)."""
    out = Path(out)
    path = Path(overrides) if overrides is not None else out / FILENAME
    records = load_records(out)
    rows, problems = read(path)
    if roster is None:
        try:
            from coursetools.grade.intake import read_roster

            roster = read_roster(out)
        except ImportError:
            roster = {}
    chosen, more = resolve(rows, records, roster)
    problems += more
    for student, record in records.items():
        results_path = out / student / "results.json"
        if not results_path.is_file():
            continue
        try:
            results = json.loads(results_path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        adjustments = chosen.get(student, {})
        already = any(str(t.get("name", "")).endswith(ADJUSTED) for t in results.get("tests", []))
        if adjustments or already:
            merged = merge_results(results, record, adjustments)
            _write(results_path, json.dumps(merged, indent=2) + "\n")
    grades = out / "grades.csv"
    if grades.is_file():
        with open(grades, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            table = list(reader)
        if "adjustments" not in header:
            header.append("adjustments")
        for row in table:
            record = records.get(row.get("student", ""))
            adjustments = chosen.get(row.get("student", ""), {})
            row["adjustments"] = describe(adjustments)
            if record is None:
                continue
            for ex_id, ex in record.get("exercises", {}).items():
                if ex_id in row:
                    row[ex_id] = number(
                        adjustments[ex_id]["points"] if ex_id in adjustments else ex.get("score")
                    )
            if "total" in row:
                row["total"] = number(adjusted_total(record, adjustments))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
        _write(grades, buffer.getvalue())
    return problems


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m coursetools.grade.overrides",
        description="Merge overrides.csv into OUT/grades.csv and the Gradescope results, without regrading.",
    )
    parser.add_argument("out", type=Path, help="the grader's output folder")
    parser.add_argument("--overrides", type=Path, default=None, help="default: OUT/overrides.csv")
    args = parser.parse_args(argv)
    problems = apply(args.out, args.overrides)
    for problem in problems:
        print(f"overrides: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
