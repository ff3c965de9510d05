"""What the grader writes: the gradebook, feedback, Gradescope results, progress and summary.

Layout of the output folder::

    OUT/grades.csv                 one row per submission, always, exactly once
    OUT/feedback/<student>.md      per exercise and case: expected, got, misconception, hint
    OUT/<student>/results.json     Gradescope's autograder format
    OUT/<student>/record.json      the grader's full record; written last, it marks the student done

Every file is written to a temporary name and moved into place with
:func:`os.replace`, so an interrupted run (even ``kill -9``) leaves either the
old file or the new one, never half of one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

RECORD = "record.json"
FAILED = {"timeout", "kernel-died", "unreadable", "grader-error", "interrupted", "not-graded"}
STATUS_MEANING = {
    "graded": "ran to the end; the scores are final",
    "needs-review": "ran to the end, but something needs a person's eye (see the notes)",
    "timeout": "a cell or the whole notebook ran out of time; blank scores were not judged",
    "kernel-died": "the process died (os._exit, a crash, the memory limit); blank scores were not judged",
    "unreadable": "not a notebook the grader can read; nothing was run",
    "grader-error": "the grader could not run this submission (see the notes)",
    "interrupted": "grading was stopped before this submission finished",
    "not-graded": "not graded yet (rerun the command to finish)",
}


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def number(value: float | None) -> str:
    if value is None:
        return ""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def load_record(out: Path, student: str) -> dict | None:
    path = out / student / RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("student") == student else None


def write_student(out: Path, record: dict, assignment_name: str) -> None:
    """Feedback, Gradescope results, then the record (last: it marks the student finished)."""
    student = record["student"]
    atomic_write(out / "feedback" / f"{student}.md", feedback_markdown(record, assignment_name))
    atomic_write(out / student / "results.json", json.dumps(gradescope(record), indent=2) + "\n")
    atomic_write(out / student / RECORD, json.dumps(record, indent=1) + "\n")


def pending_record(student: str, file: str, assignment_points: dict[str, float]) -> dict:
    return {
        "student": student,
        "file": file,
        "status": "not-graded",
        "exercises": {k: {"points": v, "score": None, "cases": []} for k, v in assignment_points.items()},
        "total": None,
        "max": float(sum(assignment_points.values())),
        "notes": [],
        "review": [],
        "incidents": [],
    }


def short_notes(record: dict) -> str:
    parts = list(record.get("incidents", [])) + list(record.get("review", []))
    if record.get("status") == "unreadable":
        parts += record.get("notes", [])
    return "; ".join(parts)[:300]


def write_csv(out: Path, records: list[dict], exercise_ids: list[str]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", *exercise_ids, "total", "max", "status", "notes"])
    for record in records:
        exercises = record.get("exercises", {})
        scores = [number(exercises.get(ex, {}).get("score")) for ex in exercise_ids]
        writer.writerow(
            [
                record["student"],
                *scores,
                number(record.get("total")),
                number(record.get("max")),
                record.get("status", "not-graded"),
                short_notes(record),
            ]
        )
    atomic_write(out / "grades.csv", buffer.getvalue())


# --------------------------------------------------------------------------- feedback


def _case_line(case: dict) -> list[str]:
    label = case.get("case", "?")
    if case.get("hidden"):
        label = f"{label} (hidden case)"
    status = case.get("status")
    if status == "passed":
        return [f"- **passed**: {label}"]
    if status == "no-verdict":
        return [f"- **not judged**: {label} (the run stopped before this case)"]
    if status == "not-attempted":
        return [f"- **not attempted**: {label}"]
    lines = [f"- **{'failed' if status == 'failed' else 'error'}**: {label}"]
    if case.get("message"):
        lines.append(f"  - what came back: {case['message']}")
    if case.get("misconception"):
        lines.append(f"  - this looks like a known mistake: *{case['misconception']}*")
    if case.get("hint"):
        lines.append(f"  - hint: {case['hint']}")
    return lines


def feedback_markdown(record: dict, assignment_name: str) -> str:
    """The learner's feedback: scores and, per case, what came back and why it is wrong."""
    lines = [f"# Feedback: {assignment_name}", "", f"Student: `{record['student']}`", ""]
    status = record.get("status", "")
    total = number(record.get("total"))
    lines.append(f"Status: **{status}** ({STATUS_MEANING.get(status, '')}).")
    lines.append("")
    lines.append(f"Score: **{total or 'not final'}** out of {number(record.get('max'))}.")
    lines.append("")
    if record.get("incidents"):
        lines.append("## What went wrong while running your notebook")
        lines.append("")
        lines += [f"- {text}" for text in record["incidents"]]
        lines.append("")
    if status == "unreadable":
        lines += ["## Your file could not be read", ""] + [f"- {n}" for n in record.get("notes", [])] + [""]
        return "\n".join(lines)
    for ex_id, ex in record.get("exercises", {}).items():
        score = number(ex.get("score"))
        heading = (
            f"## {ex_id}: `{ex.get('function', '')}()`, {score or 'not judged'} / {number(ex['points'])}"
        )
        lines += [heading, ""]
        cases = ex.get("cases", [])
        if cases and all(c.get("status") == "not-attempted" for c in cases):
            lines += ["Not attempted: the function still raises `NotImplementedError`.", ""]
            continue
        passed = sum(c.get("status") == "passed" for c in cases)
        lines.append(f"{passed} of {len(cases)} cases passed.")
        lines.append("")
        for case in cases:
            lines += _case_line(case)
        named = sorted({c["misconception"] for c in cases if c.get("misconception")})
        if named:
            lines += [
                "",
                "Known mistakes recognised in your outputs: " + "; ".join(f"*{n}*" for n in named) + ".",
            ]
        lines.append("")
    if record.get("cell_errors"):
        lines += ["## Cells that raised an error", ""]
        for err in record["cell_errors"]:
            at = f", line {err['line']}" if err.get("line") else ""
            text = f": {err['text']}" if err.get("text") else ""
            lines.append(f"- cell {err.get('cell')}{at}: `{err.get('etype')}`{text}")
        lines.append("")
    notes = [n for n in record.get("notes", []) if n]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def gradescope(record: dict) -> dict:
    """Gradescope's autograder results: one test per case, worth its share of the exercise."""
    tests = []
    for ex_id, ex in record.get("exercises", {}).items():
        cases = ex.get("cases", [])
        share = ex["points"] / len(cases) if cases else 0.0  # unrounded: the shares add up to the points
        for case in cases:
            status = case.get("status", "no-verdict")
            out = [status]
            for key in ("message", "misconception", "hint"):
                if case.get(key):
                    out.append(f"{key}: {case[key]}")
            tests.append(
                {
                    "name": f"{ex_id}: {case.get('case')}",
                    "score": share if status == "passed" else 0.0,
                    "max_score": share,
                    "output": "\n".join(out),
                    "visibility": "after_published" if case.get("hidden") else "visible",
                }
            )
    scored = [t["score"] for t in tests]
    result = {
        "score": record["total"] if record.get("total") is not None else round(sum(scored), 6),
        "tests": tests,
        "output": f"status: {record.get('status')}. " + short_notes(record),
        "execution_time": record.get("seconds", 0),
    }
    return result


# --------------------------------------------------------------------------- console


class Progress:
    """A one-line progress bar on a terminal, one line per submission otherwise."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()

    def update(self, record: dict, skipped: bool = False) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.start
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        score = number(record.get("total")) or "-"
        what = "kept (already graded)" if skipped else record.get("status", "")
        line = (
            f"[{bar}] {self.done}/{self.total} {elapsed:5.1f}s  "
            f"{record['student']}: {what} {score}/{number(record.get('max'))}"
        )
        if self.tty:
            self.stream.write("\r\x1b[K" + line[:160])
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def summary(records: list[dict], exercise_ids: list[str], isolation: str, seconds: float) -> str:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.get("status", "?")] = counts.get(record.get("status", "?"), 0) + 1
    totals = [r["total"] for r in records if r.get("total") is not None and r.get("status") == "graded"]
    lines = ["", "status        count  meaning"]
    for status in sorted(counts, key=lambda s: (s != "graded", s)):
        lines.append(f"{status:<13} {counts[status]:>5}  {STATUS_MEANING.get(status, '')}")
    lines.append("")
    lines.append(f"{'exercise':<13} {'mean':>6} {'max':>5}  (over submissions with a verdict)")
    for ex in exercise_ids:
        vals = [
            r["exercises"][ex]["score"]
            for r in records
            if r.get("exercises", {}).get(ex, {}).get("score") is not None
        ]
        pts = next((r["exercises"][ex]["points"] for r in records if ex in r.get("exercises", {})), 0)
        mean = number(sum(vals) / len(vals)) if vals else "-"
        lines.append(f"{ex:<13} {mean:>6} {number(pts):>5}")
    if totals:
        lines.append(f"{'total':<13} {number(sum(totals) / len(totals)):>6}  (mean over 'graded')")
    attention = [r for r in records if r.get("status") != "graded"]
    if attention:
        lines.append("")
        lines.append(
            "to look at: " + ", ".join(f"{r['student']} ({r.get('status')})" for r in attention[:30])
        )
        if len(attention) > 30:
            lines.append(f"... and {len(attention) - 30} more (see grades.csv)")
    lines.append("")
    lines.append(f"{len(records)} submissions in {seconds:.1f} s; isolation: {isolation}")
    return "\n".join(lines)
