"""Written answers graded by hand.

A written question is a markdown answer cell of the exercise notebook whose metadata
marks it as graded by hand, with its points::

    {"attnlib": {"manual": "q-01-1", "points": 1}}

(nbgrader's convention, ``{"nbgrader": {"grade": true, "solution": true, "grade_id":
"q-01-1", "points": 1}}`` on a markdown cell, is read too). In the solution notebook
the model answer sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
:mod:`coursetools.assign` hands out the cell with ``YOUR ANSWER HERE`` instead.

``python -m coursetools.grade manual OUT`` collects every learner's answer to each
question (the learner's cell with the same metadata id) into

* ``OUT/manual/<question>.md``: one review page, every answer in a fenced block;
* ``OUT/manual/<question>.csv``: the score sheet, ``student,points,comment`` (with
  ``--anonymise``, ``answer`` ids instead of keys; the key of each id is kept in
  ``OUT/manual/.<question>-keys.json``, which the instructor does not need to open).

The instructor fills ``points`` and ``comment``; every later command
(``overrides``, ``report``, a regrade) merges them through
:mod:`coursetools.grade.outputs.scores`. Collecting again keeps the scores already entered.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from coursetools.grade.grading.parse_worker import read_record_answers
from coursetools.grade.records.escape import csv_cell, md_block, terminal, uncell
from coursetools.grade.records.paths import Out, atomic_write
from coursetools.grade.records.record import Record, number
from coursetools.grade.records.store import ClassInfo, load_records

# the questions of a notebook and a learner's answers live on the vocabulary floor (:mod:`.written`,
# which the reader worker uses too); their names stay importable from here
from coursetools.grade.records.written import MAX_ANSWER as MAX_ANSWER
from coursetools.grade.records.written import QUESTION_ID as QUESTION_ID
from coursetools.grade.records.written import STUB
from coursetools.grade.records.written import answers as answers
from coursetools.grade.records.written import question_of as question_of
from coursetools.grade.records.written import questions as questions

FIELDS = ("student", "points", "comment")
ANON_FIELDS = ("answer", "points", "comment")


@dataclass(frozen=True)
class ManualScore:
    points: float
    comment: str


def _keys_file(folder: Path, question: str) -> Path:
    return Path(folder) / f".{question}-keys.json"


def read_scores(
    folder: Path, wanted: dict[str, float]
) -> tuple[dict[str, dict[str, ManualScore]], list[str]]:
    """``{question: {student key or answer id: ManualScore}}`` of the score sheets that are
    filled in, and the rows that cannot be read."""
    sheets: dict[str, dict[str, ManualScore]] = {}
    problems: list[str] = []
    for question, points in wanted.items():
        path = Path(folder) / f"{question}.csv"
        if not path.is_file():
            continue
        keys: dict[str, str] = {}
        if _keys_file(folder, question).is_file():
            keys = json.loads(_keys_file(folder, question).read_text(encoding="utf-8"))
        with open(path, encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.DictReader(fh))
        sheet: dict[str, ManualScore] = {}
        for line, row in enumerate(rows, start=2):
            who = uncell((row.get("student") or "").strip()) or keys.get(
                (row.get("answer") or "").strip(), ""
            )
            given = (row.get("points") or "").strip()
            if not given:
                continue  # not scored yet
            where = f"manual/{question}.csv line {line}"
            try:
                value = float(given.lstrip("'"))
            except ValueError:
                problems.append(f"{where}: points {terminal(repr(given))} is not a number")
                continue
            if not 0 <= value <= points:
                problems.append(f"{where}: {number(value)} points is outside 0 .. {number(points)}")
                continue
            if not who:
                problems.append(f"{where}: no student or answer id")
                continue
            # the sheet as the grader wrote it: a comment "=..." was guarded "'=..." (csv_cell)
            sheet[who] = ManualScore(value, uncell((row.get("comment") or "").strip()))
        sheets[question] = sheet
    return sheets, problems


def resolve(
    sheets: dict[str, dict[str, ManualScore]],
    records: dict[str, Record],
    by_id: dict[str, str],
    shared: dict[str, list[str]] | None = None,
) -> tuple[dict[str, dict[str, ManualScore]], list[str]]:
    """``{student: {question: ManualScore}}`` for the rows whose learner is in the class.
    ``by_id`` maps the LMS ids that name one learner to its key; a row by an id of ``shared``
    (one that names several learners) is refused, never applied to one of them."""
    chosen: dict[str, dict[str, ManualScore]] = {}
    problems: list[str] = []
    shared = shared or {}
    for question, sheet in sheets.items():
        for who, score in sheet.items():
            student = who if who in records else by_id.get(who)
            if student is None and who in shared:
                problems.append(
                    f"manual/{question}.csv: LMS id {terminal(repr(who))} names {len(shared[who])} learners "
                    f"({terminal(', '.join(shared[who]), 300)}); not applied: write the key instead"
                )
                continue
            if student is None or student not in records:
                problems.append(f"manual/{question}.csv: no student {terminal(repr(who))} in this class")
                continue
            chosen.setdefault(student, {})[question] = score
    return chosen, problems


def collect(out: Path, anonymise: bool = False) -> list[Path]:
    """Write every question's review page and score sheet (keeping scores already entered)."""
    import hashlib

    layout = Out(Path(out))
    info = ClassInfo.load(layout.root)
    records = load_records(layout.root)
    folder = layout.manual
    written = []
    texts: dict[str, dict[str, str]] = {}
    students = info.students or sorted(records)
    # the learners' notebooks are read again in the limited reader worker, only those the grader
    # read (never an unreadable record's file), never through a symbolic link, and only while
    # the file is the one graded (its digest): parse_worker.read_record_answers
    found_all: dict[str, dict] = {}
    if info.manual:
        listed = [r for s in students if (r := records.get(s)) is not None]
        found_all, skipped = read_record_answers(listed, {}, list(info.manual), out=layout.root)
        for line in skipped:
            print(f"manual: {terminal(line)}")
    for student in students:
        texts[student] = found_all.get(student, {}).get("written", {})
    for question, points in info.manual.items():
        old, _ = read_scores(folder, {question: points})
        old_keys = {}
        if _keys_file(folder, question).is_file():
            old_keys = json.loads(_keys_file(folder, question).read_text(encoding="utf-8"))
        entered = old.get(question, {})
        page = [f"# {question}: the answers ({number(points)} point{'s' if points != 1 else ''})", ""]
        sheet = io.StringIO()
        writer = csv.writer(sheet, lineterminator="\n")
        writer.writerow(ANON_FIELDS if anonymise else FIELDS)
        keys: dict[str, str] = {}
        for student, found in sorted(
            texts.items(), key=lambda kv: hashlib.sha256(kv[0].encode()).hexdigest() if anonymise else kv[0]
        ):
            label = f"answer-{len(keys) + 1:03d}" if anonymise else student
            keys[label] = student
            previous = entered.get(student) or next(
                (entered[a] for a, s in old_keys.items() if s == student and a in entered), None
            )
            text = found.get(question, "").strip()
            if text.replace(STUB, "").strip() == "":
                text = ""  # the handed-out stub, untouched
            page += [f"## {label}", "", md_block(text) if text else "*(no answer)*", ""]
            writer.writerow(
                [
                    label,
                    number(previous.points) if previous else "",
                    csv_cell(previous.comment) if previous else "",
                ]
            )
        atomic_write(folder / f"{question}.md", "\n".join(page))
        atomic_write(folder / f"{question}.csv", sheet.getvalue())
        if anonymise:
            atomic_write(_keys_file(folder, question), json.dumps(keys, indent=1) + "\n")
        else:
            _keys_file(folder, question).unlink(missing_ok=True)
        written += [folder / f"{question}.md", folder / f"{question}.csv"]
    return written
