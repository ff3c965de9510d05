"""The feedback a learner reads (``OUT/feedback/<student>.md``), rendered from one learner's final
grade: scores, cases, named mistakes and hints, cells named as the learner sees them, and
nothing of a hidden case beyond its verdict (issue 34.3) unless the instructor asks.
Every learner-controlled text goes through :mod:`coursetools.grade.records.escape`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from coursetools.grade.outputs.scores import describe
from coursetools.grade.records.escape import md_block, md_code, visible
from coursetools.grade.records.record import CELL_REF, CaseStatus, Record, Status, number

STATUS_MEANING = {status.value: status.meaning for status in Status}


def upload_name(grade) -> str:
    """The name the learner gave the file that was graded (the roster's ``upload``, recorded by
    the intake)."""
    return grade.roster.get("upload", "")


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
        name = upload_name(grade)
        if upload and name.lower().endswith(".ipynb"):
            lines += [
                f"Your notebook {md_code(name)} could not be read as a notebook (it is damaged, "
                "or not in Jupyter's format): open it in Jupyter, check that it shows your work, save it "
                "and upload it again.",
                "",
            ]
        elif upload:
            lines += [
                f"You uploaded {md_code(name)}; the grader needs your notebook (an `.ipynb` file).",
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
