"""Grades and feedback back into the LMS: ``python -m coursetools.grade export canvas|moodle OUT [DIR]``.

Every number comes from the class's final scores (:mod:`.scores`: overrides, manual
scores and late penalties applied), the same as ``grades.csv``; learners are matched by
the ids of the download (``OUT/roster.csv``). The files are written into ``DIR``
(default ``OUT/export/<lms>/``).

**Canvas** (Grades > Import): ``canvas-gradebook.csv``, the columns of Canvas's own
gradebook export, ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``,
then one column for the assignment, named ``--assignment-column`` (write it as
Canvas's export names it, ``Title (123456)``, so that the import updates that
assignment instead of making a new one), with a ``Points Possible`` row first. Canvas
matches each row by ``ID``, the Canvas user id of the download's file names
(``lastfirst_12345_...``). ``canvas-feedback/<login>_<ID>_<attachment>_feedback-<assignment>.md``:
each learner's feedback, named with the prefix of the graded file in the download (login,
``LATE_`` for a late one, user id, attachment id: :func:`canvas_feedback_name`), so that a
bulk upload that reads those ids finds each submission, or an instructor attaches it to the
learner's submission comment in SpeedGrader.

**Moodle** (Assignment > View all submissions > Upload grading worksheet, with "offline
grading worksheet" and "feedback comments" enabled): ``moodle-grading-worksheet.csv``
with the columns of Moodle's own worksheet, ``Identifier`` (``Participant 12345``),
``Full name``, ``Email address``, ``Status``, ``Grade``, ``Maximum Grade``, ``Grade can
be changed``, ``Last modified (submission)``, ``Last modified (grade)``, ``Feedback
comments``; Moodle's importer needs ``Identifier``, ``Grade`` and ``Last modified
(grade)`` (``mod/assign/feedback/offline/importgradeslib.php``). And
``moodle-feedback-files.zip`` (Upload multiple feedback files in a zip): one folder per
learner named as in the download, ``Full Name_12345_assignsubmission_file_``, holding
``feedback-<assignment>.md`` (Moodle's importer reads the participant id from the
second ``_`` field of the folder: ``mod/assign/feedback/file/importziplib.php``).

Learners without an LMS id (a plain folder) cannot be matched and are listed, never
guessed; so are the learners of an id that several keys carry (:func:`_matched`: no row is
written for it). A class from the other LMS's download is refused before anything is
written (:class:`WrongLMS`), and Moodle's own worksheet, when given, must say the
notebook's points as the assignment's maximum grade (:func:`check_moodle_maximum`).
"""

from __future__ import annotations

import csv
import html
import io
import re
import zipfile
from pathlib import Path

from coursetools.grade.lms.canvas import CANVAS
from coursetools.grade.outputs.late import parse_time
from coursetools.grade.outputs.scores import ClassScores, Grade, compute, describe
from coursetools.grade.records.escape import csv_cell, terminal, visible
from coursetools.grade.records.paths import Out
from coursetools.grade.records.record import AdjustmentKind, Status, number
from coursetools.grade.records.roster import ids_to_keys

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = [
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
]
MOODLE_PARTICIPANT = "Participant "
MOODLE_FOLDER = "{name}_{uid}_assignsubmission_file_"
LMS = ("canvas", "moodle")


def _csv(rows: list[list]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([[csv_cell(c) for c in row] for row in rows])
    return buffer.getvalue()


class WrongLMS(ValueError):
    """The class came from another LMS's download: its ids mean nothing to this one."""


class NoLMSIds(ValueError):
    """No learner of the class carries an id the LMS can match (a class graded from a plain
    folder): an export would be an empty gradebook."""


DOWNLOADS = {
    "canvas": "Canvas's 'Download Submissions' zip",
    "moodle": "Moodle's 'Download all submissions' zip",
}


def _nothing_to_match(scores: ClassScores, lms: str, grades: list[Grade]) -> NoLMSIds | None:
    """Why no row can be exported (None when one can)."""
    if grades or not scores.grades:
        return None
    ids = [g for g in scores.grades if g.roster.get("student_id")]
    if ids:
        why = f"every LMS id of this class is carried by several learners ({len(ids)} learners)"
    else:
        why = (
            f"this class was graded from a plain folder: none of its {len(scores.grades)} learners "
            f"carries a {lms.capitalize()} id, so {lms.capitalize()} could match no row"
        )
    return NoLMSIds(
        f"nothing exported: {why}. Grade {DOWNLOADS[lms]} instead (python -m coursetools.grade "
        f"{scores.info.assignment or 'ASSIGNMENT'} download.zip --out OUT; the grades already given are kept "
        "for unchanged notebooks), then export that OUT; or enter the scores of OUT/grades.csv by hand"
    )


def _matched(scores: ClassScores, lms: str) -> tuple[list[Grade], list[str]]:
    """The learners the LMS can match (they came from its download, with an id that names
    them alone), and the problems of the others (no id; an id several learners carry: no
    row is written for it, never one learner's score under another's id)."""
    _, shared = ids_to_keys({g.student: g.roster for g in scores.grades})
    kinds = {g.roster.get("lms") or "" for g in scores.grades if g.roster.get("student_id")}
    if kinds and lms not in kinds:
        other = ", ".join(sorted(k.capitalize() for k in kinds if k))
        raise WrongLMS(
            f"this class came from a {other} download: its ids are not {lms.capitalize()}'s; "
            f"export it with 'export {sorted(kinds)[0]}'"
        )
    grades, unmatched = [], []
    name = "Canvas's download (no Canvas ID)" if lms == "canvas" else "Moodle's download (no participant id)"
    for grade in scores.grades:
        uid = grade.roster.get("student_id")
        if uid and uid in shared:
            unmatched.append(
                f"not exported: LMS id {terminal(uid, 40)} is carried by {len(shared[uid])} learners "
                f"({terminal(', '.join(shared[uid]), 300)}): {terminal(grade.student)}"
            )
        elif uid and grade.roster.get("lms") in (lms, ""):
            grades.append(grade)
        else:
            unmatched.append(f"not in {name}: {terminal(grade.student)}")
    return grades, unmatched


def _summary(grade: Grade, scores: ClassScores) -> str:
    """One paragraph for an LMS's comment box: the score, what was changed, where the rest is."""
    total = number(grade.total) or "not final"
    parts = [f"{scores.info.assignment}: {total} out of {number(grade.max)} ({grade.status.value})."]
    parts += [
        f"Changed by your instructor: {describe(a)}."
        for a in grade.adjustments
        if a.kind is not AdjustmentKind.MANUAL  # a written answer's score is its grading, not a change
    ]
    parts.append(f"Your full feedback is in the attached file feedback-{scores.info.assignment}.md.")
    return " ".join(visible(p) for p in parts)


def _feedback_text(out: Path, grade: Grade) -> str:
    path = Out(out).feedback(grade.student)
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _safe_part(text: str) -> str:
    """A name as one part of a path: no separator, no ``_`` (Moodle splits folder names on it)."""
    return re.sub(r"[\\/_\x00-\x1f]+", " ", visible(text)).strip(" .") or "learner"


def canvas(
    out: Path, scores: ClassScores, folder: Path, column: str | None = None
) -> tuple[list[Path], list[str]]:
    """Canvas's gradebook CSV and the per-learner feedback files; return them and the problems."""
    grades, unmatched = _matched(scores, "canvas")
    column = column or scores.info.assignment
    rows = [CANVAS_COLUMNS + [column], ["Points Possible", "", "", "", "", number(scores.max_total)]]
    feedback = folder / "canvas-feedback"
    feedback.mkdir(parents=True, exist_ok=True)
    written = []
    for grade in grades:
        r = grade.roster
        rows.append([r.get("name", ""), r["student_id"], "", "", "", number(grade.total)])
        path = feedback / canvas_feedback_name(r, grade.student, scores.info.assignment)
        path.write_text(_feedback_text(out, grade), encoding="utf-8")
        written.append(path)
    gradebook = folder / "canvas-gradebook.csv"
    gradebook.write_text(_csv(rows), encoding="utf-8")
    return [gradebook, *written], unmatched


def canvas_feedback_name(roster_row: dict, student: str, assignment: str) -> str:
    """A feedback file named like the download's file it answers: ``login_12345_67890_feedback-
    <assignment>.md`` (``login_LATE_...`` for a late one): Canvas's login, user id and the
    attachment id of the graded file, as the download carried them, so that a bulk re-upload
    (which reads the ids from that prefix) finds the submission."""
    graded = Path(roster_row.get("file", "")).name
    match = CANVAS.match(graded)
    who = _safe_part(roster_row.get("name", student)).replace(" ", "")
    uid = roster_row["student_id"]
    if match and match["uid"] == uid:
        late = "LATE_" if match["late"] else ""
        return f"{who}_{late}{uid}_{match['sid']}_feedback-{assignment}.md"
    return f"{who}_{uid}_feedback-{assignment}.md"  # no attachment (not a Canvas file): the ids known


def _moodle_time(iso: str) -> str:
    """A time as Moodle's worksheet writes it: ``Monday, 2 November 2026, 12:00 PM``."""
    when = parse_time(iso) if iso else None
    if when is None:
        return ""
    return f"{when:%A}, {when.day} {when:%B %Y}, {when:%I:%M %p}".replace(", 0", ", ")


def moodle(out: Path, scores: ClassScores, folder: Path) -> tuple[list[Path], list[str]]:
    """Moodle's grading worksheet and its feedback-files zip; return them and the problems."""
    grades, unmatched = _matched(scores, "moodle")
    rows = [MOODLE_COLUMNS]
    bundle = folder / "moodle-feedback-files.zip"
    with zipfile.ZipFile(bundle, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for grade in grades:
            r = grade.roster
            graded = grade.status is not Status.NOT_GRADED
            rows.append(
                [
                    f"{MOODLE_PARTICIPANT}{r['student_id']}",
                    r.get("name", ""),
                    "",
                    "Submitted for grading" if graded else "No submission",
                    number(grade.total),
                    number(scores.max_total),
                    "Yes",
                    _moodle_time(r.get("submitted", "")),
                    "",
                    html.escape(_summary(grade, scores), quote=False),
                ]
            )
            name = MOODLE_FOLDER.format(name=_safe_part(r.get("name", grade.student)), uid=r["student_id"])
            info = zipfile.ZipInfo(
                f"{name}/feedback-{scores.info.assignment}.md", date_time=(2020, 1, 1, 0, 0, 0)
            )
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, _feedback_text(out, grade))
    worksheet = folder / "moodle-grading-worksheet.csv"
    worksheet.write_text(_csv(rows), encoding="utf-8")
    return [worksheet, bundle], unmatched


class MaximumGrade(ValueError):
    """Moodle's assignment is graded out of another maximum than the notebook's points."""


def check_moodle_maximum(worksheet: Path, max_total: float) -> None:
    """Moodle's own grading worksheet (downloaded from the assignment) says the assignment's
    maximum grade in ``Maximum Grade``: it must be the notebook's points (Moodle's default of
    100 would take 7.2 as 7.2 out of 100). Raises :class:`MaximumGrade` otherwise."""
    with open(worksheet, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    maxima = {(r.get("Maximum Grade") or "").strip() for r in rows} - {""}
    if not maxima:
        raise MaximumGrade(f"{worksheet} has no 'Maximum Grade' column: is it Moodle's grading worksheet?")
    for value in maxima:
        try:
            moodle_max = float(value.replace(",", "."))
        except ValueError:
            raise MaximumGrade(f"{worksheet}: Maximum Grade {terminal(value)!r} is not a number") from None
        if abs(moodle_max - max_total) > 1e-9:
            raise MaximumGrade(
                f"Moodle grades this assignment out of {number(moodle_max)}, the notebook out of "
                f"{number(max_total)}: set the assignment's Maximum grade to {number(max_total)} "
                "(Settings > Grade > Maximum grade), download the worksheet again, and export again"
            )


def export(
    lms: str,
    out: Path,
    folder: Path | None = None,
    column: str | None = None,
    moodle_worksheet: Path | None = None,
    scores: ClassScores | None = None,
) -> tuple[list[Path], list[str]]:
    """Write the files ``lms`` imports from the final scores of ``out`` (``scores``, else computed
    from ``out``); return the files and the problems. It reads the feedback files as they are:
    the ``export`` command publishes every output first (:mod:`coursetools.grade.commands`).
    Raises :class:`WrongLMS` for a class from the other LMS's download (nothing is written),
    :class:`NoLMSIds` for a class none of whose learners the LMS can match (a plain folder:
    nothing is written), :class:`MaximumGrade` when ``moodle_worksheet`` (Moodle's own)
    says another maximum."""
    if lms not in LMS:
        raise ValueError(f"lms must be one of {', '.join(LMS)}, not {lms!r}")
    out = Path(out)
    scores = scores if scores is not None else compute(out)
    grades, _ = _matched(scores, lms)  # refuse a class of the other LMS before any file is written
    refusal = _nothing_to_match(scores, lms, grades)
    if refusal is not None:  # an empty gradebook would import nothing: say what to do instead
        raise refusal
    if lms == "moodle" and moodle_worksheet is not None:
        check_moodle_maximum(Path(moodle_worksheet), scores.max_total)
    folder = Path(folder) if folder is not None else Out(out).export / lms
    folder.mkdir(parents=True, exist_ok=True)
    written, problems = (
        canvas(out, scores, folder, column) if lms == "canvas" else moodle(out, scores, folder)
    )
    return written, scores.problems + problems
