"""The instructor's commands after grading: change one input of a class, then publish.

This is the only module where "change one input, then render every output"
(:func:`coursetools.grade.outputs.publish.publish`) is written; the modules it calls read
and render, and never publish themselves (``tests/test_layering.py`` holds the
floors). Each command is a :class:`Subcommand` of ``python -m coursetools.grade``:

* ``report OUT``: rewrite ``report.html`` and every output from OUT's records (:func:`write_report`);
* ``overrides OUT``: merge ``overrides.csv`` (and the manual scores, ``late.toml``; :func:`apply_overrides`);
* ``manual OUT``: collect the written answers to score them by hand (:func:`.manual.collect`);
* ``export canvas|moodle OUT [DIR]``: the gradebook and feedback an LMS imports (:func:`.export.export`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursetools.grade.grading.submission import resolve_assignment
from coursetools.grade.lms import export
from coursetools.grade.outputs import manual
from coursetools.grade.outputs.class_report import REPORT
from coursetools.grade.outputs.progress import written_left, written_next
from coursetools.grade.outputs.publish import publish
from coursetools.grade.outputs.scores import ClassInfo, compute, describe
from coursetools.grade.records.escape import terminal
from coursetools.grade.records.paths import ROOT, Out
from coursetools.grade.records.record import AdjustmentKind, number

# --------------------------------------------------------------------------- change, then publish


def write_report(out: Path, assignment_name: str = "", assignment: Path | None = None) -> Path:
    """Write ``OUT/report.html`` and every other output (:func:`.publish.publish`, so the page's
    numbers are the gradebook's); return the page's path. ``assignment`` (the exercise notebook)
    is recorded in ``OUT/class.json`` when the class has none yet."""
    out = Path(out)
    info = ClassInfo.load(out)
    if assignment is not None and not info.notebook:
        info.notebook = str(Path(assignment).resolve())
        info.assignment = info.assignment or assignment_name or Path(assignment).stem
        info.save(out)
    publish(out)
    return out / REPORT


def apply_overrides(out: Path, overrides: Path | None = None) -> list[str]:
    """Merge ``overrides`` (default ``OUT/overrides.csv``) into every output of ``OUT``
    (gradebook, Gradescope results, feedback, report: :func:`.publish.publish`); return the
    problems (empty when every row applied)."""
    return publish(Path(out), overrides_csv=overrides).problems


# --------------------------------------------------------------------------- the subcommands

Argument = tuple[Sequence[str], dict[str, Any]]  # add_argument's names and keywords


@dataclass(frozen=True)
class Subcommand:
    """One ``python -m coursetools.grade NAME ...``: its parser, written once for all of them."""

    name: str
    help: str  # its line in ``python -m coursetools.grade --help``
    description: str
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]
    arguments: tuple[Argument, ...] = field(default=())

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(
            prog=f"python -m coursetools.grade {self.name}", description=self.description
        )
        for names, keywords in self.arguments:
            parser.add_argument(*names, **keywords)
        return parser

    def main(self, argv: list[str] | None = None) -> int:
        parser = self.parser()
        return self.run(parser.parse_args(argv), parser)


def _print_problems(problems: Iterable[str], prefix: str = "problem") -> None:
    for problem in problems:
        print(f"{prefix}: {terminal(problem)}")


OUT: Argument = (("out",), {"type": Path, "help": "the grader's output folder"})


def _report(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    notebook = Path(resolve_assignment(args.assignment, ROOT)) if args.assignment else None
    path = write_report(args.out, notebook.stem if notebook else "", notebook)
    print(f"wrote {path}")
    final = compute(Path(args.out))
    for line in written_next(args.out, written_left(final), len(final.grades)):
        print(line)
    return 0


def _merged(final, kind: AdjustmentKind) -> list[tuple[str, Any]]:
    return [(g.student, a) for g in final.grades for a in g.adjustments if a.kind is kind]


def _overrides(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    final = publish(Path(args.out), overrides_csv=args.overrides)
    applied = _merged(final, AdjustmentKind.OVERRIDE)
    for student, adjustment in applied:
        print(f"applied: {terminal(student)} {terminal(describe(adjustment))}")
    # the written answers scored by hand (OUT/manual/<question>.csv) and the late penalties are
    # merged by the same command: say what was merged, never "0 overrides applied" alone
    scored = _merged(final, AdjustmentKind.MANUAL)
    for student, adjustment in scored:
        print(
            f"merged: {terminal(student)} {terminal(describe(adjustment))} (written answer, graded by hand)"
        )
    late = _merged(final, AdjustmentKind.LATE)
    for student, adjustment in late:
        print(f"merged: {terminal(student)} {terminal(describe(adjustment))}")
    plural = "" if len(applied) == 1 else "s"
    parts = [f"{len(applied)} override{plural} applied"]
    if final.info.manual:
        per_question = ", ".join(
            f"{terminal(q)} {sum(a.exercise == q for _, a in scored)} of {len(final.grades)}"
            for q in final.info.manual
        )
        parts.append(f"{len(scored)} written score{'' if len(scored) == 1 else 's'} merged ({per_question})")
    if late:
        parts.append(f"{len(late)} late penalt{'y' if len(late) == 1 else 'ies'} applied")
    print(f"{'; '.join(parts)}; {len(final.problems)} problem(s) below")
    for line in written_next(args.out, written_left(final), len(final.grades)):
        print(line)
    _print_problems(final.problems, "overrides")
    return 1 if final.problems else 0


def _manual(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    written = manual.collect(args.out, args.anonymise)
    if not written:
        print("this assignment has no written question graded by hand")
        return 0
    for path in written:
        print(f"wrote {path}")
    final = publish(args.out)
    left = written_left(final)
    if left:
        print(
            f"next: fill points and comment in {terminal(str(args.out))}/manual/<question>.csv, then "
            f"python -m coursetools.grade overrides {terminal(str(args.out))}"
        )
    _print_problems(final.problems)
    return 0


def _export(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    layout = Out(args.out)
    if not layout.class_json.is_file() and not list(args.out.glob("*/record.json")):
        parser.error(f"{args.out} holds no graded class")
    try:
        final = publish(args.out)  # every output first, so the feedback files exported are current
        written, problems = export.export(
            args.lms, args.out, args.dir, args.assignment_column, args.moodle_worksheet, final
        )
    except (export.WrongLMS, export.NoLMSIds, export.MaximumGrade, OSError) as exc:
        print(f"error: {terminal(exc)}", file=sys.stderr)
        return 1
    if args.lms == "moodle" and args.moodle_worksheet is None:
        info = ClassInfo.load(args.out)
        total = number(sum(info.points.values()) + sum(info.manual.values()))
        print(
            f"note: Moodle must grade this assignment out of {total} (Settings > Grade > Maximum grade), "
            "not its default 100; --moodle-worksheet checks it"
        )
    for path in written[:3]:
        print(f"wrote {path}")
    if len(written) > 3:
        print(f"... and {len(written) - 3} more files")
    _print_problems(problems)
    return 0


COMMANDS = (
    Subcommand(
        "report",
        "rewrite OUT/report.html and every output from OUT's records, without regrading",
        "Rewrite OUT/report.html (and grades.csv, the feedback, results.json) from OUT's records "
        "and adjustments, without regrading.",
        _report,
        (OUT, (("--assignment",), {"default": None, "help": "the exercise notebook or stem (starter code)"})),
    ),
    Subcommand(
        "overrides",
        "merge OUT/overrides.csv (and manual scores, late.toml) into every output",
        "Merge overrides.csv (and manual scores, the late policy) into every output of OUT "
        "(grades.csv, results.json, feedback, report.html), without regrading.",
        _overrides,
        (OUT, (("--overrides",), {"type": Path, "default": None, "help": "default: OUT/overrides.csv"})),
    ),
    Subcommand(
        "manual",
        "collect the written answers into OUT/manual/ to score them by hand",
        "Collect the answers to the written questions into OUT/manual/ (a review page and a "
        "score sheet per question); fill the sheets' points and comments, then run 'overrides' or 'report'.",
        _manual,
        (
            OUT,
            (("--anonymise",), {"action": "store_true", "help": "answer ids instead of student keys"}),
        ),
    ),
    Subcommand(
        "export",
        "write the gradebook and feedback for Canvas or Moodle: export canvas|moodle OUT_DIR",
        "Write the gradebook and the feedback in the form Canvas or Moodle imports, from the "
        "final scores of OUT (overrides, manual scores and late penalties included).",
        _export,
        (
            (("lms",), {"choices": export.LMS, "help": "the LMS to import into"}),
            OUT,
            (
                ("dir",),
                {
                    "type": Path,
                    "nargs": "?",
                    "default": None,
                    "help": "where to write (default OUT/export/LMS)",
                },
            ),
            (
                ("--assignment-column",),
                {
                    "default": None,
                    "help": "Canvas: the assignment's column as Canvas's export names it, "
                    "e.g. '05 Masks (123456)'",
                },
            ),
            (
                ("--moodle-worksheet",),
                {
                    "type": Path,
                    "default": None,
                    "help": "Moodle: the grading worksheet Moodle gives (Download grading worksheet): "
                    "its Maximum Grade is checked against the notebook's points",
                },
            ),
        ),
    ),
)
