"""Command line: ``python -m coursetools.grade ASSIGNMENT SUBMISSIONS --out OUT``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from coursetools.grade.runner import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursetools.grade",
        description="Grade a class's exercise notebooks, each in its own sandboxed process.",
    )
    parser.add_argument("assignment", help="the exercise notebook, or its stem (e.g. 00-how-to-use)")
    parser.add_argument(
        "submissions", type=Path, help="folder of <student>.ipynb, or nbgrader's <student>/<assignment>/"
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
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    from coursetools.grade.batch import grade

    settings = Settings(
        out=args.out,
        timeout_cell=args.timeout_cell,
        timeout_total=args.timeout_total,
        memory_mb=args.memory_mb,
        isolation=args.isolation,
        hide=[str(p.resolve()) for p in args.hide],
    )
    try:
        grade(args.assignment, args.submissions, args.out, args.jobs, args.force, settings, quiet=args.quiet)
    except KeyboardInterrupt:
        print("\ninterrupted: finished students are saved; rerun the same command to go on", file=sys.stderr)
        return 130
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
