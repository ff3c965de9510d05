"""The grader's vocabulary: what a run plans, what the harness reports, how a run ends.

The harness sends one JSON object per line (see :mod:`coursetools.grade.harness`):
``{"t": <event kind>, "k": <the run's secret>, ...}``. The grader parses each line
into an :class:`Event`; a ``step`` event becomes the :class:`Step` in progress, a
``case`` event a :class:`CaseEvent`; the run ends with a :class:`RunOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

EventKind = Literal["hello", "step", "case", "cell-error", "cell-done", "done", "fatal"]
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

    def to_wire(self) -> dict:
        return {
            "cells": self.cells,
            "evaluate_after": self.evaluate_after,
            "evaluate_at_end": self.evaluate_at_end,
            "exercises": self.exercises,
            "skip_cells": list(self.skip_cells),
            "skip_cases": [list(k) for k in self.skip_cases],
        }
