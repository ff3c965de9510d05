"""The grader's one command line: ``python -m coursetools.grade ASSIGNMENT SUBMISSIONS --out OUT``.

SUBMISSIONS is a folder, or an LMS download (a .zip, or a folder with Canvas or Moodle
names) that is staged first (:func:`coursetools.grade.lms.intake.prepare`); the class is graded
(:func:`coursetools.grade.batch.grade`), which ends by rendering every output once
(:func:`coursetools.grade.outputs.publish.publish`). ``--shard K/N`` grades one share of the class
and ``merge`` joins the shares' folders into one (:mod:`.shard`: a class across machines).
``python -m coursetools.grade NAME ...`` runs a
command of :mod:`.commands` (``report``, ``overrides``, ``manual``, ``export``) or builds
Gradescope's archive (``gradescope``). The grading run and the archive import the checks
(and torch), so they are imported when asked for, not to rewrite a report.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from coursetools.grade.commands import COMMANDS
from coursetools.grade.grading.submission import resolve_assignment
from coursetools.grade.lms.intake import prepare
from coursetools.grade.outputs.scores import compute
from coursetools.grade.outputs.shard import MergeError, Shard, merge
from coursetools.grade.records.escape import terminal
from coursetools.grade.records.paths import ROOT


def _gradescope(argv: list[str]) -> int:
    from coursetools.grade import gradescope  # the archive's run grades: imported when asked for

    return gradescope.main(argv)


def _merge(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursetools.grade merge",
        description="Join the output folders of a class graded in shares (--shard K/N, one folder "
        "per share) into one folder, byte for byte what a one-machine run writes.",
    )
    parser.add_argument("shares", nargs="+", type=Path, help="every share's output folder, once each")
    parser.add_argument("--out", type=Path, required=True, help="the merged folder (new or empty)")
    parser.add_argument("--quiet", action="store_true", help="no summary")
    args = parser.parse_args(argv)
    try:
        merged = merge(args.shares, args.out)
    except MergeError as exc:
        print(f"error: {terminal(str(exc), 2000)}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(
            f"merged {len(args.shares)} shares into {terminal(str(args.out))}: {len(merged.grades)} "
            f"learners; {merged.mean_text()}"
        )
    for problem in merged.problems:
        print(f"problem: {terminal(problem)}", file=sys.stderr)
    return 0


# python -m coursetools.grade SUBCOMMAND ...: (its main, one line of help)
SUBCOMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    **{command.name: (command.main, command.help) for command in COMMANDS},
    "gradescope": (_gradescope, "write Gradescope's autograder archive for an assignment"),
    "merge": (_merge, "join the share folders of a class graded with --shard K/N into one"),
}
EPILOG = "subcommands (each has --help):\n" + "\n".join(
    f"  python -m coursetools.grade {name:<11} {text}" for name, (_, text) in SUBCOMMANDS.items()
)


def _shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]][0](argv[1:])
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
    parser.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="K/N",
        help="grade only share K (0 to N-1) of the class, split by learner key; join the N "
        "output folders with `python -m coursetools.grade merge`",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary")
    args = parser.parse_args(argv)
    if not (args.submissions.is_dir() or (args.submissions.is_file() and args.submissions.suffix == ".zip")):
        parser.error(f"{args.submissions} is not a folder or a .zip")
    # the grading run imports the checks (and torch): not needed to rewrite a report
    from coursetools.grade.batch import grade
    from coursetools.grade.grading.runner import Settings

    settings = Settings(
        out=args.out,
        timeout_cell=args.timeout_cell,
        timeout_total=args.timeout_total,
        memory_mb=args.memory_mb,
        isolation=args.isolation,
        hide=tuple(str(p.resolve()) for p in args.hide),
    )
    try:
        notebook = Path(resolve_assignment(args.assignment, ROOT))
        folder = prepare(args.submissions, args.out.resolve(), notebook.stem, args.quiet)
        grade(
            args.assignment,
            folder,
            args.out,
            jobs=args.jobs,
            force=args.force,
            settings=settings,
            quiet=args.quiet,
            show_hidden_inputs=args.show_hidden_inputs,
            overrides_csv=args.overrides,
            shard=args.shard,
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
        for problem in compute(args.out).problems:
            print(f"problem: {terminal(problem)}", file=sys.stderr)
    elif args.shard is not None:
        print(
            f"share {args.shard} graded; the other learners show as not-graded here: join the "
            f"{args.shard.count} share folders with python -m coursetools.grade merge OUT_0 ... --out OUT"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
