"""Grade one submission: run its notebook (again, without a cell or case that hung or
crashed, up to ``max_runs`` times within the per-submission limit) and judge it.

The steps live in their own modules: :mod:`.submission` reads the notebook and
builds the :class:`~coursetools.grade.events.RunPlan`; :mod:`.process` runs one
process under the limits (:class:`~coursetools.grade.process.Run`); :mod:`.verdict`
judges the reported outputs against the reference in the grader's process.
"""

from __future__ import annotations

import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from attnlib.checks.core import Exercise
from coursetools.grade.events import CaseEvent, CaseKind, RunOutcome, RunPlan, Step
from coursetools.grade.inputs import ship
from coursetools.grade.process import OUTPUT_KEEP, ROOT, Run, _describe_exit, base_env
from coursetools.grade.submission import (
    Assignment,
    Submission,
    Unreadable,
    build_plan,
    forbidden_at,
    read_notebook,
)
from coursetools.grade.verdict import finish, judge, one_at_a_time

__all__ = ["ROOT", "RunOutcome", "Settings", "base_env", "grade_submission", "judge"]


@dataclass(frozen=True)
class Settings:
    """Limits and isolation for every submission of a run (frozen: no live processes here;
    the pre-warmed zygotes are passed to :func:`grade_submission` on their own)."""

    out: Path
    timeout_cell: float = 30.0
    timeout_total: float = 180.0
    timeout_setup: float = 60.0
    memory_mb: int = 2048
    nproc: int = 64
    scratch_mb: int = 64
    fsize_mb: int = 64
    max_runs: int = 4
    isolation: Literal["auto", "namespaces", "userns", "none"] = "none"
    python: str = sys.executable
    hide: tuple[str, ...] = ()
    zygote: bool = True
    work_dir: Path | None = None  # scratch folders' parent (batch: a fresh folder in the system's temp)
    uid_base: int | None = None  # first sandbox uid of this grader (sandbox.allocate_uids); root only
    group_mb: int | None = None  # a whole submission's memory (a cgroup, where writable); None: memory_mb


def grade_submission(
    sub: Submission,
    assignment: Assignment,
    exercises: dict[str, Exercise],
    settings: Settings,
    slot: int = 0,
    stop: threading.Event | None = None,
    zygotes: list | None = None,
    memory_group=None,
) -> dict:
    """Grade one submission; return its record (see :mod:`coursetools.grade.report`)."""
    stop = stop or threading.Event()
    started = time.monotonic()
    record: dict = {
        "student": sub.student,
        "file": str(sub.path),
        "digest": sub.digest,
        "status": "graded",
        "notes": [],
        "review": [],
        "cell_errors": [],
        "exercises": {},
        "isolation": None,
        "runs": 0,
        "output": {},
    }
    try:
        nb = read_notebook(sub.path)
    except Unreadable as exc:
        record["status"] = "unreadable"
        record["notes"].append(str(exc))
        return finish(record, assignment, exercises, {}, settings, started)
    plan_data, notes, review = build_plan(nb, assignment)
    forbidden = plan_data.pop("forbidden", {})
    with one_at_a_time():  # the cases' inputs, made here: the sandbox never holds the answer key
        shipped = ship({ex_id: exercises[ex_id] for ex_id in assignment.points})
    plan = RunPlan(
        plan_data["cells"],
        plan_data["evaluate_after"],
        plan_data["evaluate_at_end"],
        list(assignment.points),
        inputs=shipped,
    )
    if forbidden:
        record["forbidden"] = forbidden
    record["notes"] += notes
    record["review"] += review

    results: dict[tuple[str, str], CaseEvent] = {}
    skip_cells: list[int] = []
    incidents: list[str] = []
    deadline = started + settings.timeout_total
    # under the system's temporary folder, not the output folder: an output folder below a
    # folder of mode 0700 stays gradable (the sandbox uid must reach its scratch folder)
    scratch = (settings.work_dir or settings.out / ".work") / f"{sub.student}"
    protocol_problems = 0
    out_of_order = 0
    defined: dict[str, set[tuple]] = {}  # where the evaluated functions' code was defined
    while record["runs"] < settings.max_runs:
        record["runs"] += 1
        plan.skip_cells = list(skip_cells)
        plan.skip_cases = list(results)
        run = Run(plan, settings, scratch, slot, deadline, stop, zygotes, memory_group)
        try:
            outcome = run.execute()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        protocol_problems += run.bad_lines
        out_of_order += run.out_of_order + run.forged
        incidents += run.cleanup
        record["output"] = {
            "bytes": run.output_bytes,
            "head": run.head.decode("utf-8", "replace"),
            "tail": run.tail.decode("utf-8", "replace") if run.output_bytes > OUTPUT_KEEP else "",
        }
        for event in run.events:
            data = event.data
            if event.kind == "hello" and record["isolation"] is None:
                record["isolation"] = data.get("isolation")
            elif event.kind == "case":
                key = (str(data.get("ex")), str(data.get("case")))
                case_event = CaseEvent.from_event(data)
                if key[0] in exercises and case_event is not None:
                    results[key] = case_event
                    if isinstance(data.get("defined"), list):
                        defined.setdefault(key[0], set()).add(tuple(data["defined"][:2]))
            elif event.kind == "cell-error":
                error = {k: data.get(k) for k in ("cell", "etype", "text", "line")}
                if error not in record["cell_errors"]:
                    record["cell_errors"].append(error)
        step = outcome.step
        if outcome.end == "done":
            expected = {(ex, c.name) for ex in assignment.points for c in exercises[ex].cases}
            if expected - set(results):
                record["review"].append("the run ended before every case was evaluated")
            break
        if outcome.end == "stopped":
            record["status"] = "interrupted"
            break
        if outcome.end == "flood":
            record["review"].append(outcome.message)
            break
        if outcome.end == "fatal":
            record["status"] = "grader-error"
            incidents.append(outcome.message)
            break
        where = _where(step)
        if outcome.end in ("step-timeout", "deadline"):
            record["status"] = "timeout"
            incidents.append(f"{where}: {outcome.message}")
        else:
            if record["status"] != "timeout":
                record["status"] = "kernel-died"
            incidents.append(f"{where}: {_describe_exit(outcome.returncode)}")
            if step is None:
                tail = (run.tail or run.head).decode("utf-8", "replace").strip().splitlines()[-3:]
                if tail:
                    incidents.append("last output: " + " | ".join(tail)[:400])
        if outcome.end == "deadline" or step is None:
            break
        if step.kind == "cell":
            skip_cells.append(step.cell)
        else:
            key = (str(step.ex), str(step.case))
            if key in results or key[0] not in exercises:
                break  # a forged step message: do not loop on it
            kind = "timeout" if outcome.end == "step-timeout" else "died"
            results[key] = CaseEvent(kind)
            # the function hung or crashed once: its other cases are not tried again
            skipped: CaseKind = "timeout-skipped" if kind == "timeout" else "died-skipped"
            for case in exercises[key[0]].cases:
                results.setdefault((key[0], case.name), CaseEvent(skipped))
        if _all_judged(results, assignment, exercises):
            break  # every case already has a verdict: a rerun cannot change the grade
    _check_definitions(record, plan_data["cells"], plan_data["evaluate_after"], assignment, defined)
    if skip_cells:
        record["notes"].append(f"cells {skip_cells} were skipped after they hung or crashed the process")
    if protocol_problems:
        record["review"].append(f"{protocol_problems} malformed messages on the grader's channel")
    if out_of_order:
        record["review"].append(
            f"{out_of_order} messages on the grader's channel came where the harness sends none "
            "(written by the submission's code): ignored"
        )
    record["incidents"] = incidents
    return finish(record, assignment, exercises, results, settings, started)


def _check_definitions(
    record: dict, cells: list, evaluate_after: dict, assignment: Assignment, defined: dict
) -> None:
    """Check the code that actually defined each evaluated function (issue 24).

    The learner's process reports, with each case, the file name and first line of
    the evaluated function's code object. A function defined in another cell than
    the one the plan checked (a later redefinition, moved metadata) has that cell
    read by the forbidden-call check too; one whose code was not written in a
    cell (``exec`` of a string, a library's function bound to the name, a code
    object built at run time) is flagged for review.
    """
    checked = record.setdefault("forbidden", {})
    for ex_id, places in defined.items():
        names = assignment.forbidden.get(ex_id, ())
        for filename, _line in sorted(places, key=str):
            match = re.fullmatch(r"<cell (\d+)>", str(filename))
            if match is None:
                record["review"].append(
                    f"{ex_id}: the evaluated function's code was not written in a cell ({str(filename)[:80]})"
                )
                continue
            index = int(match.group(1))
            if ex_id in evaluate_after.get(str(index), []):
                continue  # the answer cell: read when the plan was built
            if names and any(i == index for i, _ in cells):
                found = forbidden_at(cells, index, names, record["review"], ex_id)
                if found:
                    checked[ex_id] = sorted(set(checked.get(ex_id, [])) | set(found))
    if not checked:
        record.pop("forbidden")


def _all_judged(results: dict, assignment: Assignment, exercises: dict[str, Exercise]) -> bool:
    """True when every case has a verdict that a later redefinition could not improve."""
    for ex_id in assignment.points:
        for case in exercises[ex_id].cases:
            event = results.get((ex_id, case.name))
            if event is None or event.kind in ("not-attempted", "missing"):
                return False
    return True


def _where(step: Step | None) -> str:
    return "while starting" if step is None else step.where()


# Verdicts compute references in the grader's process, from several job threads. A
# reference or a case may draw from (or seed) a global random generator, or import a
# part of torch lazily (two threads doing that at once fail): one verdict at a time, with
