"""The grader's vocabulary: what a run plans, what the harness reports, how a run ends.

This module is the protocol of both ends of the channel. The harness (see
:mod:`coursetools.grade.sandbox.harness`) sends one JSON object per line,
``{"k": <the run's secret>, "t": <event kind>, ...}``, built by one function per
event kind (:func:`hello`, :func:`cell_step`, :func:`case_outcome`, ...). The
grader parses each line into an :class:`Event`; a ``step`` event becomes the
:class:`Step` in progress, a ``case`` event a :class:`CaseEvent`; the run ends
with a :class:`RunOutcome`. The words of the harness's private socketpair with
the learner's process (:class:`Request`, :class:`LookupState`) are here too.
Every word is a member of a ``str`` Enum that compares equal to its wire word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class _Word(str, Enum):
    """A member that is its wire word: it compares equal to, and prints as, that string."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def read(cls, value: Any) -> Any:
        """The member whose word is ``value``; None for anything else (a reply is never trusted).

        Unlike ``cls(value)``, this neither raises nor hashes a value that is not a
        string (a decoded JSON list or object).
        """
        if not isinstance(value, str):
            return None
        try:
            return cls(value)
        except ValueError:
            return None


class EventKind(_Word):
    """The ``"t"`` of a message on the channel (what the sandbox's trusted parent reports)."""

    HELLO = "hello"
    STEP = "step"
    CASE = "case"
    CELL_ERROR = "cell-error"
    CELL_DONE = "cell-done"
    DONE = "done"
    FATAL = "fatal"
    FLOOD = "flood"
    ALTERED = "altered"  # an exercise's process changed what its answer reaches (snapshot): held


class StepKind(_Word):
    """What a ``step`` message starts: a cell of the plan or a case of an exercise."""

    CELL = "cell"
    CASE = "case"


class RunEnd(_Word):
    """How one run of a submission's process ends."""

    DONE = "done"
    STEP_TIMEOUT = "step-timeout"
    DIED = "died"
    DEADLINE = "deadline"
    FATAL = "fatal"
    STOPPED = "stopped"
    FLOOD = "flood"


class CaseKind(_Word):
    """What is known about one case: an output, an error, or why there is none."""

    VALUE = "value"
    NOT_ATTEMPTED = "not-attempted"
    MISSING = "missing"
    ERROR = "error"
    TIMEOUT = "timeout"
    DIED = "died"
    TIMEOUT_SKIPPED = "timeout-skipped"
    DIED_SKIPPED = "died-skipped"

    @property
    def ran(self) -> bool:
        """The learner's function was called for this case (it returned or raised)."""
        return self in (CaseKind.VALUE, CaseKind.ERROR)

    @property
    def by_grader(self) -> bool:
        """A kind only the grader records (the run hung or died): never read from the channel."""
        return self in (CaseKind.TIMEOUT, CaseKind.DIED, CaseKind.TIMEOUT_SKIPPED, CaseKind.DIED_SKIPPED)


class Phase(_Word):
    """Where a ``case`` message's exercise was evaluated: right after its cell, or at the end."""

    CELL = "cell"
    END = "end"


class LookupState(_Word):
    """What the learner's process found under an exercise's function name (its ``lookup`` reply)."""

    MISSING = "missing"
    OK = "ok"
    NOT_CALLABLE = "not-callable"


class Request(_Word):
    """What the trusted parent asks the learner's process (the ``op`` of a request on their socketpair)."""

    CELL = "cell"  # run cell ``cell``; the reply may hold an ``error``
    LOOKUP = "lookup"  # look up exercise ``ex``'s function; the reply holds a LookupState
    CASE = "case"  # call it on case ``case`` (after the snapshot's check: ``altered``); a CaseKind
    FLUSH = "flush"  # flush stdout and stderr
    SNAPSHOT = "snapshot"  # record what the answer may reach (after the handed-out cells)
    GUARD = "guard"  # compare with the snapshot (after the last case); the reply holds ``altered``


ETYPE_CHARS = 80  # an exception's type name, as the harness sends it and the grader reads it
TEXT_CHARS = 300  # an exception's first line, likewise


# The messages of the channel, one function per event kind: the harness (the sandbox's
# trusted parent) sends what they return, after the run's secret ("k"); the grader reads
# them back with Event.parse, Step.from_event and CaseEvent.from_event below.


def hello(isolation: dict, pid: int) -> dict:
    """The first message: the learner's process confined itself (``isolation``: its report)."""
    return {"t": EventKind.HELLO, "isolation": isolation, "pid": pid}


def fatal(message: str) -> dict:
    """The harness could not start (imports, the sandbox, the cases' inputs): no learner code ran."""
    return {"t": EventKind.FATAL, "message": message}


def flood(message: str) -> dict:
    """The learner's process sent too much to the trusted parent: the run stops here."""
    return {"t": EventKind.FLOOD, "message": message}


def cell_step(cell: int) -> dict:
    """Cell ``cell`` of the plan starts."""
    return {"t": EventKind.STEP, "kind": StepKind.CELL, "cell": cell}


def case_step(ex: str, case: str) -> dict:
    """Case ``case`` of exercise ``ex`` starts."""
    return {"t": EventKind.STEP, "kind": StepKind.CASE, "ex": ex, "case": case}


def cell_error(cell: int, etype: Any, text: Any, line: Any) -> dict:
    """Cell ``cell`` raised (``line``: the cell's line, None when unknown or not an int)."""
    return {
        "t": EventKind.CELL_ERROR,
        "cell": cell,
        "etype": str(etype)[:ETYPE_CHARS],
        "text": str(text)[:TEXT_CHARS],
        "line": line if isinstance(line, int) else None,
    }


def cell_done(cell: int, seconds: float) -> dict:
    """Cell ``cell`` ended (after at most one ``cell-error``)."""
    return {"t": EventKind.CELL_DONE, "cell": cell, "seconds": seconds}


def case_outcome(
    ex: str,
    case: str,
    phase: Phase,
    kind: CaseKind,
    seconds: float,
    *,
    value: Any = None,
    etype: Any = "",
    text: Any = "",
    defined: list | None = None,
) -> dict:
    """What case ``case`` of exercise ``ex`` gave: its ``value`` (wire-encoded), an error, or neither.

    ``value`` is sent for kind ``value`` only, ``etype`` and ``text`` for kinds
    ``error`` and ``missing``; ``defined`` is ``[file name, first line]`` of the
    code object that defines the function, when the learner's process reported one.
    Only the grader records the kinds of a run that hung or died (``CaseKind.by_grader``).
    """
    kind = CaseKind(kind)
    if kind.by_grader:
        raise ValueError(f"kind: {kind} is recorded by the grader, never sent by the harness")
    message: dict = {"t": EventKind.CASE, "ex": ex, "case": case, "phase": Phase(phase), "kind": kind}
    if kind is CaseKind.VALUE:
        message["value"] = value
    elif kind in (CaseKind.ERROR, CaseKind.MISSING):
        message.update(etype=str(etype)[:ETYPE_CHARS], text=str(text)[:TEXT_CHARS])
    if defined is not None:
        message["defined"] = defined
    message["seconds"] = seconds
    return message


def altered(ex: str, case: str, when: str, reasons: Any) -> dict:
    """Exercise ``ex``'s process changed what its answer reaches (its snapshot,
    :mod:`coursetools.grade.sandbox.snapshot`), found ``when`` (``before``/``after``) case ``case``:
    the exercise is held for review, never scored."""
    kept = [str(r)[:TEXT_CHARS] for r in reasons[:5]] if isinstance(reasons, list) else ["a change"]
    return {"t": EventKind.ALTERED, "ex": ex, "case": case, "when": when, "reasons": kept}


def done(forged: int) -> dict:
    """The last message: the run is over (``forged``: replies of the learner's process dropped)."""
    return {"t": EventKind.DONE, "forged": forged}


@dataclass(frozen=True)
class Step:
    """The cell or case that the harness is running (for time limits and restarts)."""

    kind: StepKind
    cell: int | None = None
    ex: str | None = None
    case: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", StepKind(self.kind))  # a wire word becomes its member

    @classmethod
    def from_event(cls, data: dict) -> Step | None:
        kind = data.get("kind")
        if kind == StepKind.CELL:
            try:
                return cls(StepKind.CELL, cell=int(data.get("cell", -1)))
            except (TypeError, ValueError):
                return None
        if kind == StepKind.CASE:
            return cls(StepKind.CASE, ex=str(data.get("ex")), case=str(data.get("case")))
        return None

    def where(self) -> str:
        return f"cell {self.cell}" if self.kind is StepKind.CELL else f"{self.ex}, case {self.case!r}"


@dataclass(frozen=True)
class Event:
    """One message of the harness, with its kind checked and its secret removed."""

    kind: EventKind
    data: dict

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EventKind(self.kind))  # a wire word becomes its member

    @classmethod
    def parse(cls, data: Any, token: str) -> Event | None:
        """The event in a decoded JSON line, or None when it is not one of this run's events."""
        if not isinstance(data, dict) or data.get("k") != token:
            return None
        kind = EventKind.read(data.get("t"))
        if kind is None:
            return None
        return cls(kind, {k: v for k, v in data.items() if k not in ("k", "t")})


@dataclass(frozen=True)
class CaseEvent:
    """What the grader knows about one case before judging it."""

    kind: CaseKind
    value: Any = None  # the wire-encoded output, for kind "value"
    etype: str = ""
    text: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", CaseKind(self.kind))  # a wire word becomes its member

    @classmethod
    def from_event(cls, data: dict) -> CaseEvent | None:
        kind = CaseKind.read(data.get("kind"))
        if kind is None:
            return None
        etype, text = str(data.get("etype", ""))[:ETYPE_CHARS], str(data.get("text", ""))[:TEXT_CHARS]
        return cls(kind, data.get("value"), etype, text)


@dataclass
class RunOutcome:
    """How one run ended: ``end``, the step in progress, a message, the exit code."""

    end: RunEnd
    step: Step | None = None
    message: str = ""
    returncode: int | None = None

    def __post_init__(self) -> None:
        self.end = RunEnd(self.end)  # a wire word becomes its member


@dataclass
class RunPlan:
    """What one run of the harness executes; sent to it as JSON (:meth:`to_wire`), read back
    there once (:meth:`from_wire`)."""

    cells: list[list]  # [[cell index, source], ...], check cells dropped, IPython syntax transformed
    evaluate_after: dict[str, list[str]]  # cell index (str) -> exercises evaluated right after it
    evaluate_at_end: list[str]
    exercises: list[str]
    skip_cells: list[int] = field(default_factory=list)
    skip_cases: list[tuple[str, str]] = field(default_factory=list)
    inputs: str = ""  # the cases' inputs, made by the grader (coursetools.grade.records.inputs.ship)
    # per exercise, what its own process runs (coursetools.grade.grading.selection): {"handed_out":
    # [[index, source], ...], "learner": [[index, source], ...]}; an exercise missing here runs
    # every cell of ``cells`` as learner code (a plan written before issue 43)
    selected: dict[str, dict[str, list[list]]] = field(default_factory=dict)

    def units(self, ex_id: str) -> tuple[list[list], list[list]]:
        """Exercise ``ex_id``'s handed-out cells and learner units, in the order they run."""
        chosen = self.selected.get(ex_id)
        if chosen is None:
            return [], [list(c) for c in self.cells]
        return [list(c) for c in chosen.get("handed_out", [])], [list(c) for c in chosen.get("learner", [])]

    def to_wire(self) -> dict:
        return {
            "cells": self.cells,
            "evaluate_after": self.evaluate_after,
            "evaluate_at_end": self.evaluate_at_end,
            "exercises": self.exercises,
            "skip_cells": list(self.skip_cells),
            "skip_cases": [list(k) for k in self.skip_cases],
            "inputs": self.inputs,
            "selected": self.selected,
        }

    @classmethod
    def from_wire(cls, data: dict) -> RunPlan:
        """The plan :meth:`to_wire` wrote, as the harness reads it (a missing ``cells`` raises
        KeyError); keys the run adds beside it (``fd``, ``token``, ``env``, ``sandbox``) are not its."""
        return cls(
            cells=[[int(index), str(source)] for index, source in data["cells"]],
            evaluate_after={
                str(k): [str(ex) for ex in v] for k, v in (data.get("evaluate_after") or {}).items()
            },
            evaluate_at_end=[str(ex) for ex in data.get("evaluate_at_end") or ()],
            exercises=[str(ex) for ex in data.get("exercises") or ()],
            skip_cells=[int(index) for index in data.get("skip_cells") or ()],
            skip_cases=[(str(ex), str(case)) for ex, case in data.get("skip_cases") or ()],
            inputs=str(data.get("inputs") or ""),
            selected={
                str(ex): {
                    str(part): [[int(index), str(source)] for index, source in units]
                    for part, units in (chosen or {}).items()
                }
                for ex, chosen in (data.get("selected") or {}).items()
            },
        )


class Transcript:
    """The order in which the harness sends its events; an event that does not fit was not sent by it.

    The harness sends ``hello`` (or ``fatal``) first, before any learner code runs;
    then, for each exercise in the plan's order (each in its own process, issue 43), for
    each cell it runs (:meth:`RunPlan.units`), ``step`` (cell), at most one
    ``cell-error`` and ``cell-done``; for each case it evaluates, ``step`` (case)
    and one ``case``, with ``altered`` when the snapshot found a change; ``done`` last
    (or ``flood``, when the learner's process floods its socket). Since issue 24 every event is written
    by the sandbox's trusted parent, never by the learner's process (which has
    no access to the channel); this check stays as a second line: an event out
    of order is refused and the submission flagged for review.
    """

    def __init__(self, plan: RunPlan):
        skipped = set(plan.skip_cells)
        order: list[int] = []
        for ex_id in plan.exercises:
            handed, learner = plan.units(ex_id)
            order += [int(index) for index, _ in [*handed, *learner]]
        self._cells = [index for index in order if index not in skipped]
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
        if kind in (EventKind.HELLO, EventKind.FATAL):
            self._started = self._started or (first and kind is EventKind.HELLO)
            return first
        if not self._started:
            return False
        step = self._open
        if kind is EventKind.STEP:
            new = Step.from_event(data)
            if new is None or step is not None:
                return False
            if new.kind is StepKind.CELL:
                if new.cell not in self._cells[self._position :]:
                    return False
                self._position = self._cells.index(new.cell, self._position) + 1
            elif new.ex not in self._exercises:
                return False
            self._open, self._cell_error = new, False
            return True
        if kind in (EventKind.CELL_ERROR, EventKind.CELL_DONE):
            if step is None or step.kind is not StepKind.CELL or data.get("cell") != step.cell:
                return False
            if kind is EventKind.CELL_ERROR:
                fits, self._cell_error = not self._cell_error, True
                return fits
            self._open = None
            return True
        if kind is EventKind.CASE:
            if (
                step is None
                or step.kind is not StepKind.CASE
                or (data.get("ex"), data.get("case")) != (step.ex, step.case)
            ):
                return False
            self._open = None
            return True
        if kind is EventKind.DONE:
            return step is None
        if kind is EventKind.ALTERED:  # before a case's outcome, or after the last case
            return data.get("ex") in self._exercises
        if kind is EventKind.FLOOD:  # the trusted parent stops a learner that floods its socket (a thread
            return True  # of the learner may do it between steps, while a function is looked up)
        return False
