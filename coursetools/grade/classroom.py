"""A class from download to report: intake, grading, overrides, report, in one call.

``python -m coursetools.grade.classroom ASSIGNMENT DOWNLOAD --out OUT`` takes
the submissions as the LMS hands them over (a folder or a .zip, see
:mod:`.intake`), grades them with the grader, then merges ``overrides.csv``
(:mod:`.overrides`) and writes ``report.html`` (:mod:`.class_report`). The
grader's own command line calls :func:`prepare` and :func:`after_grading` the
same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from coursetools.grade import class_report, intake
from coursetools.grade.escape import terminal
from coursetools.grade.gradescope import grader_module
from coursetools.grade.paths import ROOT

STAGED = "submissions"


def needs_intake(submissions: Path) -> bool:
    """A zip, or a folder with Canvas or Moodle names (the grader reads plain folders itself)."""
    submissions = Path(submissions)
    if submissions.is_file():
        return True
    if not submissions.is_dir():
        return False
    for entry in submissions.iterdir():
        name = entry.name
        try:
            if entry.is_dir() and intake.MOODLE_FOLDER.match(name):
                return True
            if entry.is_file() and (intake.CANVAS.match(name) or intake.MOODLE_FILE.match(name)):
                return True
        except OSError:
            return True  # a name the file system refuses: the intake reports it and goes on
    return False


def prepare(submissions: Path, out: Path, assignment_stem: str, quiet: bool = False) -> Path:
    """The folder to grade: ``submissions`` itself, or ``OUT/submissions`` staged from a download
    (with ``OUT/roster.csv``); duplicates and refused zip members are printed unless ``quiet``."""
    if not needs_intake(submissions):
        return Path(submissions)
    result = intake.collect(submissions, Path(out) / STAGED, assignment_stem)
    intake.write_roster(out, result)
    if not quiet:
        print(
            f"{len(result.entries)} students in {submissions} ({len(result.duplicates)} with several files)",
            file=sys.stderr,
        )
        for problem in result.problems:
            print(f"  {terminal(problem, 600)}", file=sys.stderr)
    return result.folder


def after_grading(
    out: Path, assignment_name: str, assignment: Path | None = None, overrides_csv: Path | None = None
) -> list[str]:
    """Every output rendered from the class's final scores (student ids, overrides, manual
    scores, late policy: :func:`coursetools.grade.publish.publish`); return the problems."""
    from coursetools.grade.publish import publish

    return publish(Path(out), overrides_csv).problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursetools.grade.classroom",
        description="Grade a class from its LMS download: intake, grading, overrides.csv, report.html.",
    )
    parser.add_argument("assignment", help="the exercise notebook, or its stem (e.g. 05-masks)")
    parser.add_argument("submissions", type=Path, help="a folder or a .zip (Canvas, Moodle, plain)")
    parser.add_argument("--out", type=Path, default=Path("grading-out"))
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--force", action="store_true", help="regrade students that are already graded")
    parser.add_argument("--overrides", type=Path, default=None, help="default: OUT/overrides.csv")
    parser.add_argument("--isolation", choices=["auto", "namespaces", "userns", "none"], default="auto")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    submission, runner, batch = grader_module("submission"), grader_module("runner"), grader_module("batch")
    try:
        notebook = Path(submission.resolve_assignment(args.assignment, ROOT))
        out = args.out.resolve()
        folder = prepare(args.submissions, out, notebook.stem, args.quiet)
        settings = runner.Settings(out=out, isolation=args.isolation)
        batch.grade(
            str(notebook),
            folder,
            out,
            args.jobs,
            args.force,
            settings,
            quiet=args.quiet,
            overrides_csv=args.overrides,
        )
    except KeyboardInterrupt:
        print("\ninterrupted: rerun the same command to go on", file=sys.stderr)
        return 130
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = after_grading(out, notebook.stem, notebook, args.overrides)
    for problem in problems:
        print(f"problem: {terminal(problem)}", file=sys.stderr)
    if not args.quiet:
        print(f"report: {out / class_report.REPORT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
