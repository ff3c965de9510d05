"""What the grader writes: the gradebook, feedback, progress and summary, rendered from
the class's final scores (:class:`coursetools.grade.outputs.scores.ClassScores`, the one source
of truth; :mod:`.publish` writes them all).

Layout of the output folder: :mod:`coursetools.grade.records.paths`.

Every file is written to a temporary name and moved into place with
:func:`os.replace`, so an interrupted run (even ``kill -9``) leaves either the
old file or the new one, never half of one. Every learner-controlled text goes
through :mod:`.escape` for where it is read (spreadsheet cells, Markdown, terminal).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from coursetools.grade.outputs.scores import describe
from coursetools.grade.records.escape import csv_cell, md_block, md_code, terminal, visible
from coursetools.grade.records.paths import Out, atomic_write
from coursetools.grade.records.record import CELL_REF, CaseStatus, ExerciseResult, Record, Status, number

RECORD = "record.json"
STATUS_MEANING = {status.value: status.meaning for status in Status}


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


def short_notes(record: Record) -> str:
    """The gradebook's ``notes``: incidents and review reasons, cells named as the learner sees them."""
    early = _before_hidden(record)
    parts = [fixed_incident(str(t), early) for t in record.incidents or []] + list(record.review)
    if record.status is Status.UNREADABLE:
        parts += record.notes
    return "; ".join(relabel(parts, record.cell_labels))[:300]


# --------------------------------------------------------------------------- the gradebook


def _upload(grade) -> str:
    """The name the learner gave the file that was graded (the roster's ``upload``, recorded by
    the intake)."""
    return grade.roster.get("upload", "")


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
            notes = f"not a notebook: {_upload(grade)} (the learner's upload)"
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


# --------------------------------------------------------------------------- feedback


def cell_label(labels: dict, index) -> str:
    """A cell as the learner sees it: ``code cell 3 (`first line`)`` (its number among the
    notebook's code cells, counted from 1), from the labels the grader recorded."""
    label = labels.get(str(index)) if isinstance(labels, dict) else None
    if isinstance(label, dict):
        first = f" ({md_code(label.get('first', ''))})" if label.get("first") else ""
        return f"code cell {label.get('number')}{first}"
    return f"cell {index}"


CELL_LIST = re.compile(r"\bcells \[([\d, ]+)\]")


def relabel(texts: list[str], labels: dict) -> list[str]:
    """The grader's messages with the cells they name as the learner sees them
    (``cell 6: ...`` -> ``code cell 5 (while True:): ...``; ``cells [6, 9]`` -> ``code cells 5, 7``)."""
    labels = labels if isinstance(labels, dict) else {}

    def numbers(match: re.Match) -> str:
        found = [labels.get(n.strip()) for n in match.group(1).split(",")]
        if not all(isinstance(f, dict) for f in found):
            return match.group(0)
        return "code cells " + ", ".join(str(f.get("number")) for f in found if isinstance(f, dict))

    lines = []
    for text in texts:
        match = CELL_REF.match(text)
        if match and str(match.group(1)) in labels:
            label = labels[match.group(1)]
            text = f"code cell {label.get('number')} ({label.get('first', '')})" + text[match.end() :]
        lines.append(CELL_LIST.sub(numbers, text))
    return lines


def _grader_lines(texts: list[str], labels: dict) -> list[str]:
    """The grader's messages (which may quote the learner's output) as one fenced block."""
    lines = relabel(texts, labels)
    return [md_block("\n".join(lines)), ""] if lines else []


# --------------------------------------------------------------------------- hidden cases (issue 34.3)
#
# Without --show-hidden-inputs the learner never reads what a hidden case holds: not its name
# (it describes the inputs), not the text of an error raised after a hidden case was evaluated
# (the learner's code may have recorded the inputs and put them in a message), not the last
# output of a process that died (it may print them). The instructor's files keep everything.

WITHHELD = "the message is shown to your instructor only: it came after hidden cases were evaluated"


def hidden_labels(record: Record) -> list[tuple[str, str, str]]:
    """``[(exercise, hidden case name, label)]``: each hidden case's learner label, "hidden case k",
    numbered as the feedback and Gradescope number them (k counts the exercise's hidden cases)."""
    out = []
    for ex_id, ex in record.exercises.items():
        number_ = 0
        for case in ex.cases:
            if case.hidden:
                number_ += 1
                out.append((ex_id, case.case, f"hidden case {number_}"))
    return out


# After (and during) a hidden case, nothing the learner's code controls reaches the learner
# (issue 43.3): not an exception's type name (a class named after the inputs), nor the line an
# error was raised at, nor a process's exit code or signal, nor the time it took. What the
# learner reads there is a fixed vocabulary: an error, a wrong output, a timeout, a crash.
CRASHED = "the process crashed"
_EXIT = re.compile(r"the process (?:exited with code -?\d+|was killed by [\w ]+|died)\b")
# the verdicts' own words (coursetools.grade.grading.verdict): no learner text in them
_FIXED = re.compile(
    r"did not finish within [\d.e+]+ s|not run: an earlier case of this exercise (?:did not finish|crashed "
    r"the process)|the process died while running this case \(os\._exit, a crash, or the memory limit\)"
    r"|not attempted yet|not allowed: the answer uses [\w., ]+, an existing implementation of what it "
    r"computes \(scores 0[^()]*\)"
)
RAISED = f"raised an error ({WITHHELD})"
WRONG_OUTPUT = f"a wrong output ({WITHHELD})"


def _before_hidden(record: Record) -> set[str]:
    """The incident prefixes (``ex, case 'name'``) of the visible cases that ran before every hidden
    case: only there may an incident keep the process's own words (its exit code, its signal)."""
    late = after_hidden(record)
    return {
        f"{ex_id}, case {case.case!r}"
        for ex_id, ex in record.exercises.items()
        for case in ex.cases
        if not case.hidden and (ex_id, case.case) not in late
    }


def fixed_incident(text: str, early: set[str]) -> str:
    """An incident with the process's exit code or signal replaced by "the process crashed",
    unless it names a visible case in ``early`` (:func:`_before_hidden`)."""
    where = text.split(":", 1)[0]
    if where in early:
        return text
    return _EXIT.sub(CRASHED, text)


def learner_incidents(record: Record, show_hidden_inputs: bool = False) -> list[str]:
    """The record's incidents as the learner may read them (the instructor's are unchanged):
    a hidden case named by its label, a process's last output withheld, and its exit code or
    signal replaced by "the process crashed" wherever it may follow a hidden case."""
    texts = [str(t) for t in record.incidents or []]
    if show_hidden_inputs:
        return texts
    labels = hidden_labels(record)
    early = _before_hidden(record)
    out = []
    for text in texts:
        if text.startswith("last output:"):
            out.append(f"last output: {WITHHELD}")
            continue
        text = fixed_incident(text, early)
        for ex_id, name, label in labels:
            text = text.replace(f"{ex_id}, case {name!r}", f"{ex_id}, {label}")
        for _ex_id, name, _label in sorted(labels, key=lambda x: -len(x[1])):
            if len(name) >= 3:
                text = text.replace(repr(name), "a hidden case").replace(name, "a hidden case")
        out.append(text)
    return out


def after_hidden(record: Record) -> set[tuple[str, str]]:
    """``{(exercise, case)}`` of the cases that come after a hidden case in the record's order (the
    order they ran in: exercises in notebook order, cases in the check's order)."""
    seen, out = False, set()
    for ex_id, ex in record.exercises.items():
        for case in ex.cases:
            if seen:
                out.add((ex_id, case.case))
            seen = seen or case.hidden
    return out


def learner_message(message: str, withheld: bool) -> str:
    """A case's message as the learner reads it. ``withheld`` (a hidden case's, or one evaluated
    after hidden cases): the verdict's own words stay, anything else becomes a fixed phrase (an
    error, a wrong output), without the error's type or text, or the values the output held."""
    if not withheld or not message or _FIXED.fullmatch(message):
        return message
    return RAISED if message.startswith("raised ") else WRONG_OUTPUT


def case_label(case, hidden_number: int, show_hidden_inputs: bool) -> str:
    """A case's name for the learner: a hidden case is "hidden case k", with what it tries
    only when the instructor shows the hidden inputs (never "hidden" twice)."""
    if not case.hidden:
        return case.case
    label = f"hidden case {hidden_number}"
    if show_hidden_inputs:
        name = re.sub(r"^hidden\s*:\s*", "", case.case)
        label = f"{label}: {name}"
    return label


# what the learner reads under a failed case, in this order: the wording of feedback.md and
# results.json, written once (each renderer escapes the text for where it is read)
CASE_DETAILS = (
    ("message", "what came back"),
    ("misconception", "this looks like a known mistake"),
    ("hint", "hint"),
)


def case_details(case, show_message: bool) -> list[tuple[str, str, str]]:
    """``(field, phrase, text)`` for each detail a failed (or errored) case shows the learner
    (:data:`CASE_DETAILS`); none for another status. ``show_message``: the case's message
    (what came back) may be shown (a hidden case's only with ``--show-hidden-inputs``)."""
    if case.status not in (CaseStatus.FAILED, CaseStatus.ERROR):
        return []
    found = []
    for name, phrase in CASE_DETAILS:
        text = getattr(case, name)
        if text and (name != "message" or show_message):
            found.append((name, phrase, text))
    return found


def _case_lines(case, label: str, show_message: bool) -> list[str]:
    if case.status is CaseStatus.PASSED:
        return [f"- **passed**: {label}"]
    if case.status is CaseStatus.NO_VERDICT:
        return [f"- **not judged**: {label} (the run stopped before this case)"]
    if case.status is CaseStatus.NOT_ATTEMPTED:
        return [f"- **not attempted**: {label}"]
    shown: dict[str, Callable[[str], str]] = {
        "message": md_code,
        "misconception": lambda text: f"*{visible(text)}*",
        "hint": visible,
    }
    lines = [f"- **{case.status.word}**: {label}"]
    lines += [f"  - {phrase}: {shown[name](text)}" for name, phrase, text in case_details(case, show_message)]
    return lines


def feedback_markdown(grade, assignment_name: str, show_hidden_inputs: bool = False) -> str:
    """The learner's feedback: the final score, what the instructor changed and why, and per
    case what came back and why it is wrong (a hidden case's inputs only on request)."""
    record = grade.record
    labels = record.cell_labels
    lines = [f"# Feedback: {visible(assignment_name)}", "", f"Student: {md_code(record.student)}", ""]
    status = record.status
    value, _, meaning = grade.status_text().partition(" ")
    lines.append(f"Status: **{value}** {meaning}.")
    lines.append("")
    lines.append(f"Score: **{number(grade.total) or 'not final'}** out of {number(grade.max)}.")
    lines.append("")
    if grade.changes:  # written answers are graded below, not "changed"
        lines += ["## What your instructor changed", ""]
        lines += [f"- {visible(describe(a))}" for a in grade.changes]
        lines.append("")
    upload = grade.roster.get("file", "")
    if record.incidents:
        lines += ["## What went wrong while running your notebook", ""]
        lines += _grader_lines(learner_incidents(record, show_hidden_inputs), labels)
    if status is Status.UNREADABLE:
        lines += ["## Your file could not be read", ""]
        if upload and _upload(grade).lower().endswith(".ipynb"):
            lines += [
                f"Your notebook {md_code(_upload(grade))} could not be read as a notebook (it is damaged, "
                "or not in Jupyter's format): open it in Jupyter, check that it shows your work, save it "
                "and upload it again.",
                "",
            ]
        elif upload:
            lines += [
                f"You uploaded {md_code(_upload(grade))}; the grader needs your notebook (an `.ipynb` file).",
                "",
            ]
        lines += _grader_lines(record.notes, labels)
        return "\n".join(lines)
    late = set() if show_hidden_inputs else after_hidden(record)
    for ex_id, ex in record.exercises.items():
        final = grade.scores.get(ex_id)
        shown = number(final) or "not judged"
        heading = f"## {ex_id}: {md_code(ex.function + '()')}, {shown} / {number(ex.points)}"
        lines += [heading, ""]
        if final != ex.score:
            lines += [
                f"The grader's score was {number(ex.score) or 'not judged'}; "
                "your instructor changed it (see above).",
                "",
            ]
        cases = ex.cases
        if cases and all(c.status is CaseStatus.NOT_ATTEMPTED for c in cases):
            lines += ["Not attempted: the function still raises `NotImplementedError`.", ""]
            continue
        passed = sum(c.passed for c in cases)
        lines.append(f"{passed} of {len(cases)} cases passed.")
        lines.append("")
        hidden = 0
        for case in cases:
            hidden += case.hidden
            label = case_label(case, hidden, show_hidden_inputs)
            if (ex_id, case.case) in late:
                case = replace(case, message=learner_message(case.message or "", True))
            lines += _case_lines(case, label, show_hidden_inputs or not case.hidden)
        named = sorted({c.misconception for c in cases if c.misconception})
        if named:
            lines += [
                "",
                "Known mistakes recognised in your outputs: "
                + "; ".join(f"*{visible(n)}*" for n in named)
                + ".",
            ]
        lines.append("")
    written = [q for q in grade.points if q not in record.exercises]
    if written:
        lines += ["## Written answers, graded by hand", ""]
        comments = {a.exercise: a.reason for a in grade.adjustments if a.exercise in written}
        for q in written:
            score = number(grade.scores.get(q)) or "not graded yet"
            comment = f": {visible(comments[q])}" if comments.get(q) else ""
            lines.append(f"- {q}: {score} / {number(grade.points[q])}{comment}")
        lines.append("")
    if record.cell_errors:
        lines += ["## Cells that raised an error", ""]
        for err in record.cell_errors:
            if err.get("after_hidden") and not show_hidden_inputs:
                # its type, line and text are the learner's code's to choose: none of them is shown
                lines.append(f"- {cell_label(labels, err.get('cell'))}: {RAISED}")
                continue
            at = f", line {err['line']}" if isinstance(err.get("line"), int) else ""
            text = f": {md_code(err['text'])}" if err.get("text") else ""
            lines.append(
                f"- {cell_label(labels, err.get('cell'))}{at}: {md_code(err.get('etype') or '?')}{text}"
            )
        lines.append("")
    if record.notes:
        lines += ["## Notes", ""] + _grader_lines(record.notes, labels)
    return "\n".join(lines)


# --------------------------------------------------------------------------- console


class Progress:
    """A one-line progress bar on a terminal, one line per submission otherwise."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()

    def update(self, record: Record, skipped: bool = False, grade=None) -> None:
        """One more submission; ``grade`` (its :class:`~coursetools.grade.outputs.scores.Grade`) gives the
        final total out of every item's points, as grades.csv and the feedback show it (the
        automatic total beside it when they differ: written answers, overrides, a late penalty)."""
        self.done += 1
        elapsed = time.monotonic() - self.start
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        what = "kept (already graded)" if skipped else record.status.value
        if grade is not None:
            score = f"{number(grade.total) or '-'}/{number(grade.max)}"
            if (grade.total, grade.max) != (record.total, record.max):
                score += f" (automatic {number(record.total) or '-'}/{number(record.max)})"
        else:
            score = f"{number(record.total) or '-'}/{number(record.max)}"
        line = f"[{bar}] {self.done}/{self.total} {elapsed:5.1f}s  {terminal(record.student)}: {what} {score}"
        if self.tty:
            self.stream.write("\r\x1b[K" + line[:160])
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def written_left(scores) -> dict[str, int]:
    """``{question: learners whose answer is not scored yet}`` of the written questions
    graded by hand that still wait for a score (empty when every answer is scored)."""
    left = {q: sum(g.scores.get(q) is None for g in scores.grades) for q in scores.info.manual}
    return {q: n for q, n in left.items() if n}


def written_next(out: Path | str | None, left: dict[str, int], learners: int) -> list[str]:
    """What to run next while written answers wait for their scores (empty when none wait)."""
    if not left:
        return []
    where = terminal(str(out)) if out else "OUT"
    which = ", ".join(f"{terminal(q)} ({n} of {learners})" for q, n in left.items())
    return [
        f"written answers not scored yet: {which}; the totals are not final until they are:",
        f"  1. python -m coursetools.grade manual {where}   (a review page and a score sheet per question)",
        f"  2. fill points and comment in {where}/manual/<question>.csv",
        f"  3. python -m coursetools.grade overrides {where}   (merges them into every output)",
    ]


def summary(scores, isolation: str, seconds: float, out: Path | None = None) -> str:
    """The command line's summary, from the class's final scores (the same as report.html);
    ``out``: the output folder, named in what to run next."""
    counts: dict[Status, int] = {}
    for grade in scores.grades:
        counts[grade.status] = counts.get(grade.status, 0) + 1
    left = written_left(scores)
    lines = ["", "status        count  meaning"]
    for status in sorted(counts, key=list(Status).index):
        meaning = status.meaning
        if status is Status.GRADED and left:  # never "final" while a written answer waits
            meaning = "ran to the end; the total waits for the written answers graded by hand"
        lines.append(f"{status.value:<13} {counts[status]:>5}  {meaning}")
    lines.append("")
    lines.append(f"{'exercise':<13} {'mean':>6} {'max':>5}  (final scores, over submissions with a score)")
    for item in scores.items:
        vals = [g.scores[item] for g in scores.grades if g.scores.get(item) is not None]
        mean = number(sum(vals) / len(vals)) if vals else "-"
        top = scores.info.points.get(item, scores.info.manual.get(item, 0))
        lines.append(f"{terminal(item)[:13]:<13} {mean:>6} {number(top):>5}")
    lines.append("")
    lines.append(scores.mean_text())
    adjusted = [g for g in scores.grades if g.changes]  # a written answer graded is not a change
    if adjusted:
        lines.append(
            f"{len(adjusted)} learners with a score changed by the instructor (grades.csv: adjustments)"
        )
    attention = [g for g in scores.grades if g.status is not Status.GRADED]
    if attention:
        lines.append("")
        lines.append(
            "to look at: " + ", ".join(f"{terminal(g.student)} ({g.status.value})" for g in attention[:30])
        )
        if len(attention) > 30:
            lines.append(f"... and {len(attention) - 30} more (see grades.csv)")
    if scores.info.strays:
        lines.append("")
        lines.append(
            "not submissions (not graded, listed in strays.txt): "
            + ", ".join(terminal(s) for s in scores.info.strays[:20])
        )
    for problem in scores.problems:
        lines.append(f"problem: {terminal(problem)}")
    if left:
        lines.append("")
        lines += written_next(out, left, len(scores.grades))
    lines.append("")
    lines.append(f"{len(scores.grades)} submissions in {seconds:.1f} s; isolation: {terminal(isolation)}")
    return "\n".join(lines)
