"""The grader's typed vocabulary on the writing side: a submission's :class:`Status`, a
case's :class:`CaseStatus`, the :class:`Record` of one submission, and what an instructor
changed (:class:`Adjustment`).

A record is stored as ``OUT/<student>/record.json`` (a JSON object, written by the
grader); :meth:`Record.from_dict` reads it and :meth:`Record.to_dict` gives the same
object back (keys this module does not know are kept in ``extra``). Every status of the
writing side (gradebook, feedback, results.json, report, summary, exports) is one of
these members: no other module spells a status as a string.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


def number(value: float | None) -> str:
    """A score as every output writes it: at most 4 decimals, no trailing zeros ("" for None)."""
    if value is None:
        return ""
    text = f"{float(value):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


class Status(str, Enum):
    """How a submission's grading ended (the gradebook's ``status`` column)."""

    GRADED = "graded"
    NEEDS_REVIEW = "needs-review"
    TIMEOUT = "timeout"
    KERNEL_DIED = "kernel-died"
    UNREADABLE = "unreadable"
    GRADER_ERROR = "grader-error"
    INTERRUPTED = "interrupted"
    NOT_GRADED = "not-graded"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Any) -> Status:
        """The member named ``value``; an unknown value is a grader error (never a grade)."""
        try:
            return cls(value)
        except ValueError:
            return cls.GRADER_ERROR

    @property
    def meaning(self) -> str:
        return _MEANING[self]

    @property
    def failed(self) -> bool:
        """The run did not end normally: blank scores were not judged."""
        return self not in (Status.GRADED, Status.NEEDS_REVIEW)

    @property
    def final(self) -> bool:
        """A finished record that a rerun keeps (interrupted and grader errors are retried)."""
        return self not in (Status.INTERRUPTED, Status.GRADER_ERROR, Status.NOT_GRADED)


_MEANING = {
    Status.GRADED: "ran to the end; the scores are final",
    Status.NEEDS_REVIEW: "ran to the end, but something needs a person's eye (see the notes)",
    Status.TIMEOUT: "a cell or the whole notebook ran out of time; blank scores were not judged",
    Status.KERNEL_DIED: (
        "the process died (os._exit, a crash, the memory limit); blank scores were not judged"
    ),
    Status.UNREADABLE: "not a notebook the grader can read; nothing was run",
    Status.GRADER_ERROR: "the grader could not run this submission (see the notes)",
    Status.INTERRUPTED: "grading was stopped before this submission finished",
    Status.NOT_GRADED: "not graded yet (rerun the command to finish)",
}
STATUS_ORDER = list(Status)


class CaseStatus(str, Enum):
    """The verdict of one case."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NOT_ATTEMPTED = "not-attempted"
    NO_VERDICT = "no-verdict"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Any) -> CaseStatus:
        try:
            return cls(value)
        except ValueError:
            return cls.ERROR

    @property
    def word(self) -> str:
        return _CASE_WORD[self]


_CASE_WORD = {
    CaseStatus.PASSED: "passed",
    CaseStatus.FAILED: "failed",
    CaseStatus.ERROR: "error",
    CaseStatus.NOT_ATTEMPTED: "not attempted",
    CaseStatus.NO_VERDICT: "not judged",
}


class AdjustmentKind(str, Enum):
    """Who changed a score, and how: an override row, a manually graded answer, a late penalty."""

    OVERRIDE = "override"
    MANUAL = "manual"
    LATE = "late"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Case:
    """The verdict of one case, as the grader recorded it."""

    case: str
    status: CaseStatus
    hidden: bool = False
    message: str = ""
    misconception: str = ""
    hint: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> Case:
        return cls(
            str(data.get("case", "?")),
            CaseStatus.parse(data.get("status")),
            bool(data.get("hidden")),
            str(data.get("message") or ""),
            str(data.get("misconception") or ""),
            str(data.get("hint") or ""),
        )

    @property
    def passed(self) -> bool:
        return self.status is CaseStatus.PASSED


@dataclass(frozen=True)
class ExerciseResult:
    """One exercise of a record: its points, its automatic score (None: not judged), its cases."""

    exercise: str
    points: float
    score: float | None
    function: str = ""
    cases: tuple[Case, ...] = ()

    @classmethod
    def from_dict(cls, exercise: str, data: dict) -> ExerciseResult:
        score = data.get("score")
        return cls(
            exercise,
            float(data.get("points") or 0.0),
            None if score is None else float(score),
            str(data.get("function") or ""),
            tuple(Case.from_dict(c) for c in data.get("cases", []) if isinstance(c, dict)),
        )


@dataclass
class Record:
    """What the grader recorded for one submission (``OUT/<student>/record.json``)."""

    student: str
    file: str = ""
    status: Status = Status.NOT_GRADED
    exercises: dict[str, ExerciseResult] = field(default_factory=dict)
    total: float | None = None
    max: float = 0.0
    notes: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)
    cell_errors: list[dict] = field(default_factory=list)
    seconds: float | None = None
    raw: dict = field(default_factory=dict, repr=False)  # the stored object, for what is not typed here

    @classmethod
    def from_dict(cls, data: dict) -> Record:
        exercises = data.get("exercises") or {}
        seconds = data.get("seconds")
        return cls(
            student=str(data["student"]),
            file=str(data.get("file") or ""),
            status=Status.parse(data.get("status", Status.NOT_GRADED.value)),
            exercises={
                str(k): ExerciseResult.from_dict(str(k), v)
                for k, v in exercises.items()
                if isinstance(v, dict)
            },
            total=None if data.get("total") is None else float(data["total"]),
            max=float(data.get("max") or 0.0),
            notes=[str(n) for n in data.get("notes") or [] if n],
            review=[str(n) for n in data.get("review") or [] if n],
            incidents=[str(n) for n in data.get("incidents") or [] if n],
            cell_errors=[e for e in data.get("cell_errors") or [] if isinstance(e, dict)],
            seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
            raw=dict(data),
        )

    def to_dict(self) -> dict:
        """The stored object (the grader's own keys included)."""
        return dict(self.raw) if self.raw else {"student": self.student, "status": self.status.value}


@dataclass(frozen=True)
class Adjustment:
    """A change an instructor made to a learner's score, with the reason the learner reads.

    ``exercise`` is None for a change of the total (a late penalty); ``before`` and
    ``after`` are the exercise's (or the total's) score before and after it.
    """

    kind: AdjustmentKind
    exercise: str | None
    before: float | None
    after: float | None
    reason: str = ""
