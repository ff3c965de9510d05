"""One source of truth for a class's scores.

:func:`compute` reads, from an output folder,

* the grader's records (``OUT/<student>/record.json``: the automatic scores),
* the class (``OUT/class.json``: which students, which assignment, its points),
* the roster of an LMS download (``OUT/roster.csv``: ids, names, late marks),
* the instructor's overrides (``OUT/overrides.csv``, :mod:`.overrides`),
* the scores of written answers graded by hand (``OUT/manual/<question>.csv``, :mod:`.manual`),
* the late policy (``OUT/late.toml``, :mod:`.late`),

and applies them in one place, in this order: overrides replace an exercise's
automatic score, manual scores fill the written questions, then the late penalty
is taken off the total. The result, a :class:`ClassScores`, is what every output
is rendered from (:mod:`.publish`): ``grades.csv``, ``results.json``, each learner's
feedback, ``report.html``, the summary and the LMS exports. Nothing of it is read
back from a rendered file, so rerunning the grader, the report or the overrides in
any order gives the same files.

The **class mean** is defined here once (:meth:`ClassScores.mean`): the mean final
total over the submissions that have a total (every exercise judged), after every
adjustment; every output names it "class mean ... over N submissions with a total".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coursetools.grade.outputs import late, manual, overrides
from coursetools.grade.records.paths import Out
from coursetools.grade.records.record import Adjustment, AdjustmentKind, Record, Status, number
from coursetools.grade.records.roster import ids_to_keys, read_roster_rows
from coursetools.grade.records.store import ClassInfo, load_records

MEAN_NAME = "class mean"


# --------------------------------------------------------------------------- the class


# --------------------------------------------------------------------------- one learner


@dataclass
class Grade:
    """One learner's final grade: the grader's record with every adjustment applied."""

    record: Record
    points: dict[str, float]  # every graded item (exercises, then written questions): its points
    scores: dict[str, float | None]  # final score of each item (None: not judged)
    automatic: dict[str, float | None]  # the grader's own score of each exercise
    total: float | None
    max: float
    adjustments: list[Adjustment] = field(default_factory=list)
    roster: dict[str, str] = field(default_factory=dict)  # the LMS's row: student_id, name, late, ...
    files: int = 0  # files the learner uploaded (several: a duplicate)

    @property
    def student(self) -> str:
        return self.record.student

    @property
    def status(self) -> Status:
        return self.record.status

    @property
    def changes(self) -> list[Adjustment]:
        """The adjustments that changed a score the grader gave (overrides, late penalties): a
        written answer's score is its grading by hand, not a change of the instructor's."""
        return [a for a in self.adjustments if a.kind is not AdjustmentKind.MANUAL]

    def status_text(self) -> str:
        """``graded (ran to the end; the scores are final)``, never "final" beside a total that
        is not (a written answer not graded yet, an exercise not judged)."""
        status = self.status
        if self.total is None and status is Status.GRADED:
            return f"{status.value} (ran to the end; the total is not final yet: a part is left to grade)"
        return f"{status.value} ({status.meaning})"

    def describe_adjustments(self) -> str:
        return "; ".join(describe(a) for a in self.adjustments)


def describe(adjustment: Adjustment) -> str:
    """What an instructor changed, in one phrase: ``ex-05-2: 0 -> 0.5 (reason)``."""
    what = adjustment.exercise or "total"
    if adjustment.kind is AdjustmentKind.LATE:
        what = "late penalty on the total"
    before = number(adjustment.before) or "not judged"
    text = f"{what}: {before} -> {number(adjustment.after)}"
    return f"{text} ({adjustment.reason})" if adjustment.reason else text


@dataclass
class ClassScores:
    """Every learner's final grade, and what could not be applied."""

    info: ClassInfo
    grades: list[Grade]
    problems: list[str]
    adjustable: bool  # an overrides file, a manual score sheet or a late policy exists

    @property
    def items(self) -> list[str]:
        """The gradebook's score columns: the exercises, then the written questions."""
        return list(self.info.points) + list(self.info.manual)

    def mean(self) -> tuple[float | None, int]:
        """The class mean: the mean final total over the submissions that have one, and how many."""
        totals = [g.total for g in self.grades if g.total is not None]
        return (sum(totals) / len(totals) if totals else None), len(totals)

    def mean_text(self) -> str:
        value, n = self.mean()
        shown = number(round(value, 2)) if value is not None else "-"
        plural = "" if n == 1 else "s"
        return f"{MEAN_NAME} {shown} of {number(self.max_total)} (over {n} submission{plural} with a total)"

    @property
    def max_total(self) -> float:
        return float(sum(self.info.points.values()) + sum(self.info.manual.values()))

    def by_student(self) -> dict[str, Grade]:
        return {g.student: g for g in self.grades}


# --------------------------------------------------------------------------- computing


def pending(student: str, file: str, points: dict[str, float]) -> Record:
    """The record of a learner not graded yet."""
    return Record.from_dict(
        {
            "student": student,
            "file": file,
            "status": Status.NOT_GRADED.value,
            "exercises": {k: {"points": v, "score": None, "cases": []} for k, v in points.items()},
            "total": None,
            "max": float(sum(points.values())),
        }
    )


def read_roster(out: Path) -> tuple[dict[str, dict], dict[str, int]]:
    """The roster's graded rows ``{student: row}`` and the number of files of each student."""
    rows = read_roster_rows(out)
    graded = {r["student"]: r for r in rows if not r.get("duplicate_of")}
    files: dict[str, int] = {}
    for r in rows:
        files[r["student"]] = files.get(r["student"], 0) + 1
    return graded, files


@dataclass
class Sources:
    """Everything besides the records that a final score depends on (read once per run)."""

    roster: dict[str, dict]
    files: dict[str, int]
    overrides: list[overrides.Override]
    manual: dict[str, dict[str, manual.ManualScore]]
    policy: late.Policy | None
    problems: list[str]
    adjustable: bool

    @classmethod
    def load(cls, out: Path, info: ClassInfo, overrides_csv: Path | None = None) -> Sources:
        out = Path(out)
        layout = Out(out)
        roster, files = read_roster(out)
        path = (
            Path(overrides_csv)
            if overrides_csv
            else Path(info.overrides)
            if info.overrides
            else layout.overrides
        )
        rows, problems = overrides.read(path)
        sheets, more = manual.read_scores(layout.manual, info.manual)
        problems += more
        policy, more = late.read_policy(layout.late)
        problems += more
        adjustable = path.is_file() or bool(info.manual) or policy is not None
        return cls(roster, files, rows, sheets, policy, problems, adjustable)


def compute(
    out: Path, overrides_csv: Path | None = None, records: dict[str, Record] | None = None
) -> ClassScores:
    """The class's final scores, from the files of ``out`` (see the module's docstring)."""
    out = Path(out)
    info = ClassInfo.load(out)
    sources = Sources.load(out, info, overrides_csv)
    return build(info, records if records is not None else load_records(out), sources)


def build(info: ClassInfo, records: dict[str, Record], sources: Sources) -> ClassScores:
    """Apply every adjustment of ``sources`` to ``records``, for the students of ``info``."""
    students = list(info.students) or sorted(records)
    problems = list(sources.problems)
    points = dict(info.points)
    if not points:  # a folder graded before class.json existed: take the points from the records
        for record in records.values():
            for ex_id, ex in record.exercises.items():
                points.setdefault(ex_id, ex.points)
    class_records = {s: records.get(s) or pending(s, "", points) for s in students}
    chosen, more = overrides.resolve(sources.overrides, class_records, sources.roster)
    problems += more
    by_id, shared = ids_to_keys(sources.roster)
    manual_scores, more = manual.resolve(sources.manual, class_records, by_id, shared)
    problems += more
    grades = []
    for student in students:
        record = class_records[student]
        roster = sources.roster.get(student, {})
        automatic = {ex: (record.exercises[ex].score if ex in record.exercises else None) for ex in points}
        scores: dict[str, float | None] = dict(automatic)
        adjustments: list[Adjustment] = []
        for ex_id, adj in chosen.get(student, {}).items():
            scores[ex_id] = adj["points"]
            adjustments.append(
                Adjustment(AdjustmentKind.OVERRIDE, ex_id, automatic.get(ex_id), adj["points"], adj["reason"])
            )
        item_points = dict(points)
        for question, qpoints in info.manual.items():
            item_points[question] = qpoints
            given = manual_scores.get(student, {}).get(question)
            scores[question] = None if given is None else given.points
            if given is not None:
                adjustments.append(
                    Adjustment(AdjustmentKind.MANUAL, question, None, given.points, given.comment)
                )
        # every item has a final score (an unreadable upload graded by hand through overrides counts)
        item_scores = [scores[k] for k in item_points]
        total: float | None = None
        if all(v is not None for v in item_scores):
            total = round(sum(float(v) for v in item_scores if v is not None), 6)
        if total is not None and sources.policy is not None:
            penalty, reason = sources.policy.penalty(roster, sum(item_points.values()))
            if penalty > 0:
                after = round(max(0.0, total - penalty), 6)
                adjustments.append(Adjustment(AdjustmentKind.LATE, None, total, after, reason))
                total = after
        grades.append(
            Grade(
                record,
                item_points,
                scores,
                automatic,
                total,
                float(sum(item_points.values())),
                adjustments,
                roster,
                sources.files.get(student, 0),
            )
        )
    return ClassScores(info, grades, problems, sources.adjustable)
