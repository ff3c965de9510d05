"""The grader's typed vocabulary: a submission's :class:`Status`, a
case's :class:`CaseStatus`, the :class:`Record` of one submission, and what an instructor
changed (:class:`Adjustment`).

A record is stored as ``OUT/<student>/record.json`` (a JSON object): the running side
(runner, verdict, batch) builds a :class:`Record`, :meth:`Record.to_dict` writes it, and
:meth:`Record.from_dict` reads it back (keys this module does not know are kept in
``extra``). Every status of the grader (runner, gradebook, feedback, results.json, report,
summary, exports) is one of these members: no other module spells a status as a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

# a grader message about one cell starts "cell N" (the index the record's cell_labels map)
CELL_REF = re.compile(r"^cell (\d+)\b")


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
    """The verdict of one case, as the grader recorded it.

    ``misconception`` is None when the verdict named no known mistake (the stored
    object's ``null``). A case without a verdict (:attr:`CaseStatus.NO_VERDICT`) is
    stored with its name, status and hidden flag only.
    """

    case: str
    status: CaseStatus
    hidden: bool = False
    message: str = ""
    misconception: str | None = None
    hint: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> Case:
        misconception = data.get("misconception")
        return cls(
            str(data.get("case", "?")),
            CaseStatus.parse(data.get("status")),
            bool(data.get("hidden")),
            str(data.get("message") or ""),
            None if misconception is None else str(misconception),
            str(data.get("hint") or ""),
        )

    def to_dict(self) -> dict:
        """The stored object (the key order of the grader's verdicts)."""
        if self.status is CaseStatus.NO_VERDICT:
            return {"case": self.case, "status": self.status.value, "hidden": self.hidden}
        return {
            "case": self.case,
            "status": self.status.value,
            "message": self.message,
            "misconception": self.misconception,
            "hint": self.hint,
            "hidden": self.hidden,
        }

    @property
    def passed(self) -> bool:
        return self.status is CaseStatus.PASSED


@dataclass(frozen=True)
class ExerciseResult:
    """One exercise of a record: its points, its automatic score (None: not judged), its cases.

    ``function`` is "" in a pending record (the stored object then has no ``function`` key).
    """

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

    def to_dict(self) -> dict:
        stored: dict[str, Any] = {"function": self.function} if self.function else {}
        stored.update(points=self.points, score=self.score, cases=[c.to_dict() for c in self.cases])
        return stored


@dataclass
class Record:
    """What the grader recorded for one submission (``OUT/<student>/record.json``): built by the
    running side (:mod:`.runner`, :mod:`.verdict`), read by the writing side.

    A record has one of two shapes, and :meth:`to_dict` writes each in its own key order:

    * a **pending** record (``runs`` is None: nothing was run; :func:`.record_io.pending_record`):
      student, file, status, exercises, total, max, notes, review, incidents, then ``digest``
      when one is set (a submission the grader failed on);
    * a **graded** record (``runs`` is a count, 0 when the notebook could not be read):
      student, file, digest, status, notes, review, cell_errors, exercises, isolation, runs,
      output, forbidden (only when a forbidden call was found), incidents (only when the
      notebook was read: None otherwise), total, max, seconds, memory_group, assignment,
      cell_labels.

    Keys this module does not know (from another version of the grader) are kept in
    ``extra`` and written last.

    Attributes
    ----------
    digest : str or None
        The submission file's fingerprint (None: not known, not written).
    notes, review : list of str
        What the learner reads about the run; the reasons a person should look (non-empty
        turns ``graded`` into ``needs-review``).
    cell_errors : list of dict
        ``{"cell", "etype", "text", "line"}`` of each cell that raised, once each.
    exercises : dict of str to ExerciseResult
        In the assignment's order.
    isolation : dict or None
        The sandbox the harness reported in its hello (mode, network, the paths it sees; None:
        it never said hello).
    runs : int or None
        Processes started for this submission (None: a pending record).
    output : dict
        ``{"bytes", "head", "tail"}`` of the last run's standard output ({}: no run).
    forbidden : dict of str to list of str
        The forbidden calls found, per exercise (those exercises score 0).
    incidents : list of str or None
        What went wrong in the runs (timeouts, crashes, cleanup); None when the notebook was
        not read (the key is not written).
    total, max : float
        The automatic total (None: not every case was judged) and the assignment's points.
    seconds : float or None
        Wall time of the grading.
    memory_group : str or None
        The kind of memory cgroup the job slot had.
    assignment : str or None
        The assignment's fingerprint the record was graded against.
    cell_labels : dict
        ``{notebook index: {"number", "first"}}`` of the cells the record names.
    """

    student: str
    file: str = ""
    digest: str | None = None
    status: Status = Status.NOT_GRADED
    notes: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    cell_errors: list[dict] = field(default_factory=list)
    exercises: dict[str, ExerciseResult] = field(default_factory=dict)
    isolation: dict | None = None
    runs: int | None = None
    output: dict = field(default_factory=dict)
    forbidden: dict[str, list[str]] = field(default_factory=dict)
    incidents: list[str] | None = field(default_factory=list)
    total: float | None = None
    max: float = 0.0
    seconds: float | None = None
    memory_group: str | None = None
    assignment: str | None = None
    cell_labels: dict[str, dict] = field(default_factory=dict)
    extra: dict = field(default_factory=dict, repr=False)  # keys of another grader version, kept

    @classmethod
    def from_dict(cls, data: dict) -> Record:
        exercises = data.get("exercises") or {}
        seconds = data.get("seconds")
        runs = data.get("runs")
        forbidden = data.get("forbidden")
        incidents = data.get("incidents")
        return cls(
            student=str(data["student"]),
            file=str(data.get("file") or ""),
            digest=None if data.get("digest") is None else str(data["digest"]),
            status=Status.parse(data.get("status", Status.NOT_GRADED.value)),
            notes=[str(n) for n in data.get("notes") or [] if n],
            review=[str(n) for n in data.get("review") or [] if n],
            cell_errors=[e for e in data.get("cell_errors") or [] if isinstance(e, dict)],
            exercises={
                str(k): ExerciseResult.from_dict(str(k), v)
                for k, v in exercises.items()
                if isinstance(v, dict)
            },
            isolation=dict(data["isolation"]) if isinstance(data.get("isolation"), dict) else None,
            runs=runs if isinstance(runs, int) and not isinstance(runs, bool) else None,
            output=dict(data["output"]) if isinstance(data.get("output"), dict) else {},
            forbidden=(
                {str(k): [str(n) for n in v] for k, v in forbidden.items() if isinstance(v, list)}
                if isinstance(forbidden, dict)
                else {}
            ),
            incidents=None if incidents is None else [str(n) for n in incidents or [] if n],
            total=None if data.get("total") is None else float(data["total"]),
            max=float(data.get("max") or 0.0),
            seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
            memory_group=None if data.get("memory_group") is None else str(data["memory_group"]),
            assignment=None if data.get("assignment") is None else str(data["assignment"]),
            cell_labels=dict(data["cell_labels"]) if isinstance(data.get("cell_labels"), dict) else {},
            extra={k: v for k, v in data.items() if k not in _RECORD_KEYS},
        )

    def to_dict(self) -> dict:
        """The stored object (``record.json``), in the key order of the record's shape."""
        exercises = {k: v.to_dict() for k, v in self.exercises.items()}
        if self.runs is None:
            stored: dict[str, Any] = {
                "student": self.student,
                "file": self.file,
                "status": self.status.value,
                "exercises": exercises,
                "total": self.total,
                "max": self.max,
                "notes": list(self.notes),
                "review": list(self.review),
                "incidents": list(self.incidents or []),
            }
            if self.digest is not None:
                stored["digest"] = self.digest
            return stored | self.extra
        stored = {
            "student": self.student,
            "file": self.file,
            "digest": self.digest,
            "status": self.status.value,
            "notes": list(self.notes),
            "review": list(self.review),
            "cell_errors": [dict(e) for e in self.cell_errors],
            "exercises": exercises,
            "isolation": self.isolation,
            "runs": self.runs,
            "output": dict(self.output),
        }
        if self.forbidden:
            stored["forbidden"] = {k: list(v) for k, v in self.forbidden.items()}
        if self.incidents is not None:
            stored["incidents"] = list(self.incidents)
        stored.update(
            total=self.total,
            max=self.max,
            seconds=self.seconds,
            memory_group=self.memory_group,
            assignment=self.assignment,
            cell_labels=dict(self.cell_labels),
        )
        return stored | self.extra


_RECORD_KEYS = frozenset(f for f in Record.__dataclass_fields__ if f != "extra")


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
