"""Command line: ``python -m coursetools.grade ASSIGNMENT SUBMISSIONS --out OUT``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from coursetools.grade.escape import terminal
from coursetools.grade.runner import Settings

# python -m coursetools.grade SUBCOMMAND ...: (module, one line of help)
SUBCOMMANDS = {
    "report": (
        "class_report",
        "rewrite OUT/report.html and every output from OUT's records, without regrading",
    ),
    "overrides": ("overrides", "merge OUT/overrides.csv (and manual scores, late.toml) into every output"),
    "manual": ("manual", "collect the written answers into OUT/manual/ to score them by hand"),
    "export": (
        "export",
        "write the gradebook and feedback for Canvas or Moodle: export canvas|moodle OUT_DIR",
    ),
    "gradescope": ("gradescope", "write Gradescope's autograder archive for an assignment"),
}
EPILOG = "subcommands (each has --help):\n" + "\n".join(
    f"  python -m coursetools.grade {name:<11} {text}" for name, (_, text) in SUBCOMMANDS.items()
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        import importlib

        module = importlib.import_module(f"coursetools.grade.{SUBCOMMANDS[argv[0]][0]}")
        return module.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m coursetools.grade",
        usage="python -m coursetools.grade ASSIGNMENT SUBMISSIONS [--out OUT] [options]\n"
        "       python -m coursetools.grade {" + ",".join(SUBCOMMANDS) + "} ...",
        description="Grade a class's exercise notebooks, each in its own sandboxed process.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("assignment", help="the exercise notebook, or its stem (e.g. 00-how-to-use)")
    parser.add_argument(
        "submissions",
        type=Path,
        help="folder of <student>.ipynb, nbgrader's <student>/<assignment>/, or an LMS download (.zip)",
    )
    parser.add_argument("--out", type=Path, default=Path("grading-out"), help="output folder")
    parser.add_argument(
        "--jobs", type=int, default=None, help="submissions graded at once (default: min(2, CPUs))"
    )
    parser.add_argument("--force", action="store_true", help="regrade students that are already graded")
    parser.add_argument("--timeout-cell", type=float, default=30.0, help="seconds per cell or case")
    parser.add_argument("--timeout-total", type=float, default=180.0, help="seconds per submission")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space limit per submission")
    parser.add_argument(
        "--isolation",
        choices=["auto", "namespaces", "userns", "none"],
        default="auto",
        help="how submissions are confined (default: the strongest that works here)",
    )
    parser.add_argument(
        "--hide", action="append", default=[], type=Path, help="another folder the submissions must not see"
    )
    parser.add_argument("--overrides", type=Path, default=None, help="manual adjustments (OUT/overrides.csv)")
    parser.add_argument(
        "--show-hidden-inputs",
        action="store_true",
        help="the feedback shows what each hidden case tries and what came back (default: its verdict, "
        "the named mistake and the hint only)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary")
    args = parser.parse_args(argv)
    if not (args.submissions.is_dir() or (args.submissions.is_file() and args.submissions.suffix == ".zip")):
        parser.error(f"{args.submissions} is not a folder or a .zip")
    from coursetools.grade.batch import grade

    settings = Settings(
        out=args.out,
        timeout_cell=args.timeout_cell,
        timeout_total=args.timeout_total,
        memory_mb=args.memory_mb,
        isolation=args.isolation,
        hide=tuple(str(p.resolve()) for p in args.hide),
    )
    from coursetools.grade import classroom
    from coursetools.grade.submission import resolve_assignment

    try:
        notebook = Path(resolve_assignment(args.assignment, classroom.ROOT))
        folder = classroom.prepare(args.submissions, args.out.resolve(), notebook.stem, args.quiet)
        grade(
            args.assignment,
            folder,
            args.out,
            args.jobs,
            args.force,
            settings,
            quiet=args.quiet,
            show_hidden_inputs=args.show_hidden_inputs,
            overrides_csv=args.overrides,
        )
    except KeyboardInterrupt:
        print("\ninterrupted: finished students are saved; rerun the same command to go on", file=sys.stderr)
        return 130
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # grade() ends by rendering every output from the final scores (publish.py); the
    # problems of the adjustments are in its summary, printed again here for --quiet runs
    if args.quiet:
        from coursetools.grade.scores import compute

        for problem in compute(args.out).problems:
            print(f"problem: {terminal(problem)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
