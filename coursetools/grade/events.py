"""The grader's vocabulary: what a run plans, what the harness reports, how a run ends.

The harness sends one JSON object per line (see :mod:`coursetools.grade.harness`):
``{"t": <event kind>, "k": <the run's secret>, ...}``. The grader parses each line
into an :class:`Event`; a ``step`` event becomes the :class:`Step` in progress, a
``case`` event a :class:`CaseEvent`; the run ends with a :class:`RunOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

EventKind = Literal["hello", "step", "case", "cell-error", "cell-done", "done", "fatal", "flood"]
StepKind = Literal["cell", "case"]
# how one run of a submission's process ends
RunEnd = Literal["done", "step-timeout", "died", "deadline", "fatal", "stopped", "flood"]
# what is known about one case: an output, an error, or why there is none
CaseKind = Literal[
    "value", "not-attempted", "missing", "error", "timeout", "died", "timeout-skipped", "died-skipped"
]
EVENT_KINDS = frozenset(get_args(EventKind))
CASE_KINDS = frozenset(get_args(CaseKind))


@dataclass(frozen=True)
class Step:
    """The cell or case that the harness is running (for time limits and restarts)."""

    kind: StepKind
    cell: int | None = None
    ex: str | None = None
    case: str | None = None

    @classmethod
    def from_event(cls, data: dict) -> Step | None:
        kind = data.get("kind")
        if kind == "cell":
            try:
                return cls("cell", cell=int(data.get("cell", -1)))
            except (TypeError, ValueError):
                return None
        if kind == "case":
            return cls("case", ex=str(data.get("ex")), case=str(data.get("case")))
        return None

    def where(self) -> str:
        return f"cell {self.cell}" if self.kind == "cell" else f"{self.ex}, case {self.case!r}"


@dataclass(frozen=True)
class Event:
    """One message of the harness, with its kind checked and its secret removed."""

    kind: EventKind
    data: dict

    @classmethod
    def parse(cls, data: Any, token: str) -> Event | None:
        """The event in a decoded JSON line, or None when it is not one of this run's events."""
        if not isinstance(data, dict) or data.get("k") != token or data.get("t") not in EVENT_KINDS:
            return None
        body = {k: v for k, v in data.items() if k not in ("k", "t")}
        return cls(data["t"], body)


@dataclass(frozen=True)
class CaseEvent:
    """What the grader knows about one case before judging it."""

    kind: CaseKind
    value: Any = None  # the wire-encoded output, for kind "value"
    etype: str = ""
    text: str = ""

    @classmethod
    def from_event(cls, data: dict) -> CaseEvent | None:
        kind = data.get("kind")
        if kind not in CASE_KINDS:
            return None
        return cls(kind, data.get("value"), str(data.get("etype", ""))[:80], str(data.get("text", ""))[:300])


@dataclass
class RunOutcome:
    """How one run ended: ``end``, the step in progress, a message, the exit code."""

    end: RunEnd
    step: Step | None = None
    message: str = ""
    returncode: int | None = None


@dataclass
class RunPlan:
    """What one run of the harness executes; sent to it as JSON (:meth:`to_wire`)."""

    cells: list[list]  # [[cell index, source], ...], check cells dropped, IPython syntax transformed
    evaluate_after: dict[str, list[str]]  # cell index (str) -> exercises evaluated right after it
    evaluate_at_end: list[str]
    exercises: list[str]
    skip_cells: list[int] = field(default_factory=list)
    skip_cases: list[tuple[str, str]] = field(default_factory=list)
    inputs: str = ""  # the cases' inputs, made by the grader (coursetools.grade.inputs.ship)

    def to_wire(self) -> dict:
        return {
            "cells": self.cells,
            "evaluate_after": self.evaluate_after,
            "evaluate_at_end": self.evaluate_at_end,
            "exercises": self.exercises,
            "skip_cells": list(self.skip_cells),
            "skip_cases": [list(k) for k in self.skip_cases],
            "inputs": self.inputs,
        }


class Transcript:
    """The order in which the harness sends its events; an event that does not fit was not sent by it.

    The harness sends ``hello`` (or ``fatal``) first, before any learner code runs;
    then, for each cell of the plan in order, ``step`` (cell), at most one
    ``cell-error`` and ``cell-done``; for each case it evaluates, ``step`` (case)
    and one ``case``; ``done`` last (or ``flood``, when the learner's
    process floods its socket). Since issue 24 every event is written
    by the sandbox's trusted parent, never by the learner's process (which has
    no access to the channel); this check stays as a second line: an event out
    of order is refused and the submission flagged for review.
    """

    def __init__(self, plan: RunPlan):
        skipped = set(plan.skip_cells)
        self._cells = [int(index) for index, _ in plan.cells if index not in skipped]
        self._exercises = set(plan.exercises)
        self._count = 0
        self._position = 0  # cells of the plan already started
        self._open: Step | None = None
        self._cell_error = False
        self._started = False

    def accept(self, event: Event) -> bool:
        """True when ``event`` comes where the harness would send it (and advance); False otherwise."""
        first = self._count == 0
        self._count += 1
        kind, data = event.kind, event.data
        if kind in ("hello", "fatal"):
            self._started = self._started or (first and kind == "hello")
            return first
        if not self._started:
            return False
        step = self._open
        if kind == "step":
            new = Step.from_event(data)
            if new is None or step is not None:
                return False
            if new.kind == "cell":
                if new.cell not in self._cells[self._position :]:
                    return False
                self._position = self._cells.index(new.cell, self._position) + 1
            elif new.ex not in self._exercises:
                return False
            self._open, self._cell_error = new, False
            return True
        if kind in ("cell-error", "cell-done"):
            if step is None or step.kind != "cell" or data.get("cell") != step.cell:
                return False
            if kind == "cell-error":
                fits, self._cell_error = not self._cell_error, True
                return fits
            self._open = None
            return True
        if kind == "case":
            if (
                step is None
                or step.kind != "case"
                or (data.get("ex"), data.get("case")) != (step.ex, step.case)
            ):
                return False
            self._open = None
            return True
        if kind == "done":
            return step is None
        if kind == "flood":  # the trusted parent stops a learner that floods its socket (a thread
            return True  # of the learner may do it between steps, while a function is looked up)
        return False
