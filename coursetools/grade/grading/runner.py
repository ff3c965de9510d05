"""Grade one submission: read it, plan it, run it (again, without a cell or case that hung
or crashed, up to ``max_runs`` times within the per-submission limit), judge it.

:func:`grade_submission` is that flow, one way, one step per function:

1. read: :mod:`.parse_worker` reads the notebook and builds its plan
   (:mod:`.submission`) in a worker process, under a time, CPU and memory limit;
2. plan: the :class:`~coursetools.grade.records.events.RunPlan` with the cases' inputs;
3. run: :mod:`.process` runs one process under the limits
   (:class:`~coursetools.grade.grading.process.Run`), as often as a hang or a crash asks;
4. judge: :mod:`.verdict` judges the reported outputs against the reference in the
   grader's process and completes the record.

The record is a :class:`~coursetools.grade.records.record.Record` (statuses are
:class:`~coursetools.grade.records.record.Status` members), turned into the JSON object of
``record.json`` only where :mod:`coursetools.grade.records.record_io` writes it.
"""

from __future__ import annotations

import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from attnlib.checks.core import Exercise
from coursetools.grade.grading.parse_worker import NotebookReader, ReaderDidNotStart, ReadFailed, Reading
from coursetools.grade.grading.process import OUTPUT_KEEP, JobSlot, Run, _describe_exit, base_env
from coursetools.grade.grading.submission import Assignment, Submission
from coursetools.grade.grading.verdict import finish, judge, one_at_a_time
from coursetools.grade.records.events import (
    CaseEvent,
    CaseKind,
    EventKind,
    RunEnd,
    RunOutcome,
    RunPlan,
    StepKind,
)
from coursetools.grade.records.inputs import ship
from coursetools.grade.records.paths import ROOT
from coursetools.grade.records.record import CELL_REF, Record, Status
from coursetools.grade.sandbox.snapshot import describe

__all__ = ["ROOT", "JobSlot", "RunOutcome", "Settings", "base_env", "grade_submission", "judge"]


# where torch's context decorators (@torch.no_grad(), attnlib.checks.rules.allowed.DECORATORS) keep the
# wrapper that the evaluated name is then bound to
CONTEXT_DECORATOR_FILE = "torch/utils/_contextlib.py"


Isolation = Literal["auto", "namespaces", "userns", "none"]  # "auto": the strongest that works here


@dataclass(frozen=True)
class Settings:
    """Limits and isolation for every submission of a run (frozen: no live processes here;
    the pre-warmed zygote, the memory cgroup and the notebook reader of a job slot come to
    :func:`grade_submission` in its :class:`~coursetools.grade.grading.process.JobSlot`).
    ``timeout_parse``: seconds (wall and CPU) that reading a notebook and building its plan may
    take, within ``timeout_total``."""

    out: Path
    timeout_cell: float = 30.0
    timeout_total: float = 180.0
    timeout_setup: float = 60.0
    timeout_parse: float = 30.0
    memory_mb: int = 2048
    nproc: int = 64
    scratch_mb: int = 64
    fsize_mb: int = 64
    max_runs: int = 4
    isolation: Isolation = "none"
    python: str = sys.executable
    hide: tuple[str, ...] = ()
    zygote: bool = True
    work_dir: Path | None = None  # scratch folders' parent (batch: a fresh folder in the system's temp)
    uid_base: int | None = None  # first sandbox uid of this grader (sandbox.allocate_uids); root only
    group_mb: int | None = None  # a whole submission's memory (a cgroup, where writable); None: memory_mb


@dataclass
class _Runs:
    """What the runs of one submission reported, gathered across its reruns."""

    results: dict[tuple[str, str], CaseEvent] = field(default_factory=dict)  # (exercise, case) -> event
    skip_cells: list[int] = field(default_factory=list)  # cells that hung or crashed a run
    incidents: list[str] = field(default_factory=list)
    defined: dict[str, set[tuple]] = field(default_factory=dict)  # where the evaluated code was defined
    protocol_problems: int = 0
    out_of_order: int = 0
    # exercise -> why it is held: its process changed what the answer reaches (issue 43)
    altered: dict[str, list[str]] = field(default_factory=dict)


def grade_submission(
    sub: Submission,
    assignment: Assignment,
    exercises: dict[str, Exercise],
    settings: Settings,
    slot: JobSlot | None = None,
    stop: threading.Event | None = None,
    reader: NotebookReader | None = None,
) -> Record:
    """Grade one submission in job ``slot``; return its record (``record.json`` is its
    :meth:`~Record.to_dict`).

    ``slot``: the :class:`~coursetools.grade.grading.process.JobSlot` (by default slot 0, without a
    zygote or a memory cgroup); ``reader``, when given, reads the notebook in place of the
    slot's reader. Without either, a :class:`~coursetools.grade.grading.parse_worker.NotebookReader`
    is started for this submission alone.
    """
    slot = slot if slot is not None else JobSlot()
    if reader is not None:
        slot = replace(slot, reader=reader)
    if slot.reader is None:
        with NotebookReader(settings.memory_mb) as own:
            return grade_submission(sub, assignment, exercises, settings, replace(slot, reader=own), stop)
    reader = slot.reader
    stop = stop or threading.Event()
    started = time.monotonic()
    deadline = started + settings.timeout_total
    record = _new_record(sub)
    reading = _read(record, sub, assignment, settings, reader, deadline, stop)
    runs = _Runs()
    if reading is not None:
        plan = _plan(record, reading, assignment, exercises)
        _run(record, runs, plan, assignment, exercises, settings, deadline, stop, slot)
        _check_definitions(
            record,
            plan.cells,
            plan.evaluate_after,
            assignment,
            runs.defined,
            reader,
            min(settings.timeout_parse, deadline - time.monotonic()),  # within --timeout-total
            plan.selected,
        )
        _summarise(record, runs)
    held = {
        ex: list(why) for ex, why in (reading.plan.get("held", {}) if reading is not None else {}).items()
    }
    for ex_id, reasons in runs.altered.items():
        held.setdefault(ex_id, []).extend(r for r in reasons if r not in held[ex_id])
    finish(record, assignment, exercises, runs.results, settings, started, held=held)
    record.memory_group = slot.memory_group.kind if slot.memory_group is not None else None
    record.assignment = assignment.digest
    record.cell_labels = labels_for(record, reading.labels if reading is not None else {})
    return record


def _new_record(sub: Submission) -> Record:
    """A graded record before the first run (``incidents`` stays None until the runs are summed up)."""
    return Record(sub.student, str(sub.path), sub.digest, Status.GRADED, runs=0, incidents=None)


def _read(
    record: Record,
    sub: Submission,
    assignment: Assignment,
    settings: Settings,
    reader,
    deadline: float,
    stop: threading.Event,
) -> Reading | None:
    """Step 1: the notebook read and planned in the slot's worker; None when there is nothing to run
    (the record then says why: ``unreadable``, a grader error when no reader could start, or
    ``interrupted`` when grading was stopped while it read)."""
    try:
        seconds = min(settings.timeout_parse, deadline - time.monotonic())
        reading = reader.read(sub.path, assignment, seconds, deadline=deadline)  # within --timeout-total
    except ReadFailed as exc:
        if stop.is_set():
            status = Status.INTERRUPTED  # not the submission's doing: graded again next time
        elif isinstance(exc, ReaderDidNotStart):
            status = Status.GRADER_ERROR  # the grader's trouble: graded again next time
        else:
            status = Status.UNREADABLE  # fail closed: a notebook the grader could not read scores nothing
        record.status = status
        record.notes.append(f"{exc}: nothing was run")
        return None
    if reading.unreadable is not None:
        record.status = Status.UNREADABLE
        record.notes.append(reading.unreadable)
        return None
    return reading


def _plan(
    record: Record, reading: Reading, assignment: Assignment, exercises: dict[str, Exercise]
) -> RunPlan:
    """Step 2: the run plan, with the cases' inputs made here (the sandbox never holds the answer key)."""
    plan_data = reading.plan
    with one_at_a_time():
        shipped = ship({ex_id: exercises[ex_id] for ex_id in assignment.points})
    if plan_data.get("forbidden"):  # read by the grader only, never trusted from the sandbox
        record.forbidden = plan_data["forbidden"]
    record.notes += reading.notes
    record.review += reading.review
    return RunPlan(
        plan_data["cells"],
        plan_data["evaluate_after"],
        plan_data["evaluate_at_end"],
        list(assignment.points),
        inputs=shipped,
        selected=plan_data.get("selected") or {},
    )


def _run(
    record: Record,
    runs: _Runs,
    plan: RunPlan,
    assignment: Assignment,
    exercises: dict[str, Exercise],
    settings: Settings,
    deadline: float,
    stop: threading.Event,
    slot: JobSlot,
) -> None:
    """Step 3: run the plan in job ``slot`` until it ends, without what hung or crashed the
    previous run."""
    # under the system's temporary folder, not the output folder: an output folder below a
    # folder of mode 0700 stays gradable (the sandbox uid must reach its scratch folder)
    scratch = (settings.work_dir or settings.out / ".work") / record.student
    while (record.runs or 0) < settings.max_runs:
        if record.runs and time.monotonic() >= deadline:  # no rerun starts past --timeout-total
            record.status = Status.TIMEOUT
            runs.incidents.append("the time limit for the whole submission was reached before a rerun")
            break
        record.runs = (record.runs or 0) + 1
        plan.skip_cells = list(runs.skip_cells)
        plan.skip_cases = list(runs.results)
        run = Run(plan, settings, scratch, slot, deadline, stop)
        try:
            outcome = run.execute()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        _collect(record, runs, run, exercises)
        if _ended(record, runs, run, outcome, assignment, exercises):
            break


def _collect(record: Record, runs: _Runs, run: Run, exercises: dict[str, Exercise]) -> None:
    """What one run reported: its output, the cases' events, the cells' errors."""
    runs.protocol_problems += run.bad_lines
    runs.out_of_order += run.out_of_order + run.forged
    runs.incidents += run.cleanup
    record.output = {
        "bytes": run.output_bytes,
        "head": run.head.decode("utf-8", "replace"),
        "tail": run.tail.decode("utf-8", "replace") if run.output_bytes > OUTPUT_KEEP else "",
    }
    first_answer = _first_answer_cell(run.plan)
    hidden_seen = False  # a hidden case was evaluated earlier in this run (issue 34.3)
    for event in run.events:
        data = event.data
        if event.kind is EventKind.HELLO and record.isolation is None:
            record.isolation = data.get("isolation")
        elif event.kind is EventKind.CASE:
            key = (str(data.get("ex")), str(data.get("case")))
            case_event = CaseEvent.from_event(data)
            if key[0] in exercises and case_event is not None:
                runs.results[key] = case_event
                hidden_seen = hidden_seen or _is_hidden(exercises[key[0]], key[1])
                if isinstance(data.get("defined"), list):
                    runs.defined.setdefault(key[0], set()).add(tuple(data["defined"][:2]))
        elif event.kind is EventKind.ALTERED:
            ex_id = str(data.get("ex"))
            reasons = data.get("reasons")
            if ex_id in exercises:
                why = describe(
                    [str(r) for r in reasons] if isinstance(reasons, list) else ["made a change"],
                    ex_id,
                    str(data.get("case")),
                    "after" if data.get("when") == "after" else "before",
                )
                if why not in runs.altered.setdefault(ex_id, []):
                    runs.altered[ex_id].append(why)
        elif event.kind is EventKind.CELL_ERROR:
            error = {k: data.get(k) for k in ("cell", "etype", "text", "line")}
            cell = data.get("cell")
            late = hidden_seen or (isinstance(cell, int) and first_answer is not None and cell > first_answer)
            if late:
                # its text may quote inputs the learner's code recorded: the learner reads its type only
                error["after_hidden"] = True
            if error not in record.cell_errors:
                record.cell_errors.append(error)


def _is_hidden(exercise: Exercise, name: str) -> bool:
    return any(c.hidden for c in exercise.cases if c.name == name)


def _first_answer_cell(plan) -> int | None:
    """The first cell after which cases are evaluated: every cell after it runs after hidden cases."""
    cells = [int(k) for k in getattr(plan, "evaluate_after", {}) or {} if str(k).lstrip("-").isdigit()]
    return min(cells) if cells else None


def _ended(
    record: Record,
    runs: _Runs,
    run: Run,
    outcome: RunOutcome,
    assignment: Assignment,
    exercises: dict[str, Exercise],
) -> bool:
    """Whether grading ends after this run; otherwise what hung or crashed is skipped next time."""
    end, step = outcome.end, outcome.step
    if end is RunEnd.DONE:
        expected = {(ex, c.name) for ex in assignment.points for c in exercises[ex].cases}
        if expected - set(runs.results):
            record.review.append("the run ended before every case was evaluated")
        return True
    if end is RunEnd.STOPPED:
        record.status = Status.INTERRUPTED
        return True
    if end is RunEnd.FLOOD:
        record.review.append(outcome.message)
        return True
    if end is RunEnd.FATAL:
        record.status = Status.GRADER_ERROR
        runs.incidents.append(outcome.message)
        return True
    where = "while starting" if step is None else step.where()
    if end in (RunEnd.STEP_TIMEOUT, RunEnd.DEADLINE):
        record.status = Status.TIMEOUT
        runs.incidents.append(f"{where}: {outcome.message}")
    else:
        if record.status is not Status.TIMEOUT:
            record.status = Status.KERNEL_DIED
        runs.incidents.append(f"{where}: {_describe_exit(outcome.returncode)}")
        if step is None:
            tail = (run.tail or run.head).decode("utf-8", "replace").strip().splitlines()[-3:]
            if tail:
                runs.incidents.append("last output: " + " | ".join(tail)[:400])
    if end is RunEnd.DEADLINE or step is None:
        return True
    if step.kind is StepKind.CELL:
        if step.cell is not None:  # a cell step always names its cell
            runs.skip_cells.append(step.cell)
    else:
        key = (str(step.ex), str(step.case))
        if key in runs.results or key[0] not in exercises:
            return True  # a forged step message: do not loop on it
        hung = end is RunEnd.STEP_TIMEOUT
        runs.results[key] = CaseEvent(CaseKind.TIMEOUT if hung else CaseKind.DIED)
        # the function hung or crashed once: its other cases are not tried again
        skipped = CaseKind.TIMEOUT_SKIPPED if hung else CaseKind.DIED_SKIPPED
        for case in exercises[key[0]].cases:
            runs.results.setdefault((key[0], case.name), CaseEvent(skipped))
    return _all_judged(runs.results, assignment, exercises)  # a rerun could not change the grade


def _summarise(record: Record, runs: _Runs) -> None:
    """What the runs leave in the record besides the cases: skipped cells, the channel's problems."""
    if runs.skip_cells:
        record.notes.append(f"cells {runs.skip_cells} were skipped after they hung or crashed the process")
    if runs.protocol_problems:
        record.review.append(f"{runs.protocol_problems} malformed messages on the grader's channel")
    if runs.out_of_order:
        record.review.append(
            f"{runs.out_of_order} messages on the grader's channel came where the harness sends none "
            "(written by the submission's code): ignored"
        )
    record.incidents = runs.incidents


def _check_definitions(
    record: Record,
    cells: list,
    evaluate_after: dict,
    assignment: Assignment,
    defined: dict,
    reader: NotebookReader | None = None,
    seconds: float = 30.0,
    selected: dict | None = None,
) -> None:
    """Check the code that actually defined each evaluated function (issue 24).

    The learner's process reports, with each case, the file name and first line of
    the evaluated function's code object. A function defined in another cell than
    the one the plan checked (a later redefinition, moved metadata) has that cell
    read by the forbidden-call check too, in the notebook reader (``reader``; by
    default one started for this check), within ``seconds``; one whose code was not
    written in a cell (``exec`` of a string, a library's function bound to the name,
    a code object built at run time) is flagged for review. A cell among the exercise's
    ``selected`` units (what its own process ran, issue 43) was read when the plan was built.
    """
    checked = record.forbidden
    for ex_id, places in defined.items():
        names = assignment.forbidden.get(ex_id, ())
        for filename, _line in sorted(places, key=str):
            match = re.fullmatch(r"<cell (\d+)>", str(filename))
            if match is None and str(filename).endswith(CONTEXT_DECORATOR_FILE):
                continue  # @torch.no_grad(): the decorator and the def were read by the allow-list rule
            if match is None:
                record.review.append(
                    f"{ex_id}: the evaluated function's code was not written in a cell ({str(filename)[:80]})"
                )
                continue
            index = int(match.group(1))
            if ex_id in evaluate_after.get(str(index), []):
                continue  # the answer cell: read when the plan was built
            chosen = (selected or {}).get(ex_id, {})
            if any(i == index for i, _ in chosen.get("learner", [])):
                continue  # a unit of the exercise's own process: read when the plan was built
            if names and any(i == index for i, _ in cells):
                found = _forbidden_at(record, reader, cells, index, names, ex_id, seconds)
                if found:
                    checked[ex_id] = sorted(set(checked.get(ex_id, [])) | set(found))


def _forbidden_at(record: Record, reader, cells: list, index: int, names, ex_id: str, seconds: float) -> list:
    """The forbidden names cell ``index`` uses, read in the worker; a failed read asks for review."""
    if reader is None:
        with NotebookReader() as own:
            return _forbidden_at(record, own, cells, index, names, ex_id, seconds)
    try:
        found, review = reader.forbidden_at(cells, index, names, ex_id, seconds)
    except ReadFailed as exc:
        record.review.append(
            f"{ex_id}: the forbidden-call check could not read the cells up to cell {index} ({exc}): "
            "read them"
        )
        return []
    record.review += review
    return found


def labels_for(record: Record, labels: dict[str, dict]) -> dict[str, dict]:
    """The entries of ``labels`` (:attr:`~coursetools.grade.grading.parse_worker.Reading.labels`) for the
    cells that ``record`` names (:func:`named_cells`), in notebook order."""
    wanted = named_cells(record)
    return {index: label for index, label in labels.items() if index in wanted}


def named_cells(record: Record) -> set[str]:
    """The notebook indices of the cells ``record`` names: its cell errors, and the cells its
    incidents and notes refer to (``cell 4: ...``, ``cells [4, 7] were skipped``)."""
    wanted = {str(e.get("cell")) for e in record.cell_errors}
    for text in list(record.incidents or []) + list(record.notes):
        wanted.update(CELL_REF.findall(str(text)))
        wanted.update(n for group in re.findall(r"cells \[([\d, ]+)\]", str(text)) for n in group.split(", "))
    wanted.discard("None")
    return wanted


def _all_judged(results: dict, assignment: Assignment, exercises: dict[str, Exercise]) -> bool:
    """True when every case has a verdict that a later redefinition could not improve."""
    for ex_id in assignment.points:
        for case in exercises[ex_id].cases:
            event = results.get((ex_id, case.name))
            if event is None or event.kind in (CaseKind.NOT_ATTEMPTED, CaseKind.MISSING):
                return False
    return True
