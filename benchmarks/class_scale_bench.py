"""A whole class at scale: grade N copies of correct and partial submissions, then the class report.

    .venv/bin/python benchmarks/class_scale_bench.py               # N = 1000, 2 jobs
    .venv/bin/python benchmarks/class_scale_bench.py --n 200       # a smaller class, and a projection

The class is chapter 00's exercise (``tests/grader/fixtures.py``): half the
submissions are the correct answer, half a partial one (fixtures's
"partial-3d": wrong only on 4-D inputs, 0.83 of the points with today's
cases), each a full exercise notebook in
its own file, as a Canvas bulk download names them
(``student0001_10001_20001_00-how-to-use.ipynb``). The steps are those an
instructor runs, each timed on its own:

1. intake: stage the folder (:func:`coursetools.grade.lms.intake.collect`);
2. grading: the grader's own function, ``--jobs`` submissions at once, each in
   its sandboxed process (the isolation this machine allows is recorded); it
   ends by rendering every output once (:func:`coursetools.grade.outputs.publish.publish`);
3. publish: 10 rows of ``overrides.csv``, then one
   :func:`~coursetools.grade.outputs.publish.publish` that renders every output from the
   final scores: grades.csv, results.json, the feedback and ``report.html`` with
   its figures and the near-identical-answer search (what ``overrides``,
   ``report`` and the roster's annotation each used to rewrite on its own).

The target is a class of 1,000 on 2 cores in under 5 minutes, all steps
included. With a smaller ``--n`` the JSON also projects the time of 1,000
submissions from the measured seconds per submission (grading and report scale
linearly in N; the start-up is counted once). Other jobs may share the machine:
the load average before and after is recorded, and timings are only as quiet as
the machine was. Output: ``benchmarks/results/class_scale.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "grader"))

import fixtures  # noqa: E402
import nbformat  # noqa: E402

from coursetools.grade import batch  # noqa: E402
from coursetools.grade.grading import runner  # noqa: E402
from coursetools.grade.lms import intake  # noqa: E402
from coursetools.grade.lms.roster import write_roster  # noqa: E402
from coursetools.grade.outputs.publish import publish  # noqa: E402
from coursetools.grade.records.paths import Out  # noqa: E402
from coursetools.grade.sandbox import api as sandbox  # noqa: E402

STEM = "00-how-to-use"
PARTIAL = fixtures.HEADER + (
    "    if a.ndim == 4:\n        return a @ b.T\n    return a @ np.swapaxes(b, -1, -2)\n"
)
TARGET_N = 1000
TARGET_S = 300.0


def write_class(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    correct = nbformat.writes(fixtures.with_answer(fixtures.CORRECT)).encode()
    partial = nbformat.writes(fixtures.with_answer(PARTIAL)).encode()
    for k in range(n):
        data = correct if k % 2 == 0 else partial
        (folder / f"student{k:04d}_{10000 + k}_{20000 + k}_{STEM}.ipynb").write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=TARGET_N, help="submissions in the class (default 1000)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "class_scale.json")
    parser.add_argument("--keep", type=Path, default=None, help="keep the class and its grades here")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="class-scale-")) if args.keep is None else args.keep
    download, out = work / "download", work / "grades"
    for folder in (download, out):
        shutil.rmtree(folder, ignore_errors=True)
    write_class(download, args.n)
    load_before = os.getloadavg()[0]
    phases: dict[str, float] = {}

    start = time.perf_counter()
    staged = intake.collect(download, out / "submissions", STEM)
    write_roster(out, staged)
    phases["intake_s"] = time.perf_counter() - start

    start = time.perf_counter()
    settings = runner.Settings(out=out, isolation="auto")
    records = batch.grade(STEM, staged.folder, out, jobs=args.jobs, settings=settings, quiet=True)
    phases["grading_s"] = time.perf_counter() - start

    layout = Out(out)
    rows = ["student,exercise,points,reason"]
    rows += [f"{e.student_id},ex-00-1,1,regraded by hand" for e in staged.entries[1:20:2]]
    start = time.perf_counter()
    layout.overrides.write_text("\n".join(rows) + "\n", encoding="utf-8")
    problems = publish(out).problems  # every output, once, from the final scores
    phases["publish_s"] = time.perf_counter() - start
    report = layout.report
    load_after = os.getloadavg()[0]

    total = sum(phases.values())
    statuses = Counter(r.get("status") for r in records)
    totals = Counter(r.get("total") for r in records)
    latencies = sorted(float(r.get("seconds") or 0) for r in records)
    per_submission = total / args.n
    projected = total if args.n == TARGET_N else phases["intake_s"] + per_submission * TARGET_N
    result = {
        "benchmark": "class_scale",
        "assignment": STEM,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "isolation": settings.isolation if settings.isolation != "auto" else sandbox.probe(),
        },
        "n": args.n,
        "jobs": args.jobs,
        "phases_s": {k: round(v, 3) for k, v in phases.items()},
        "total_s": round(total, 3),
        "seconds_per_submission": round(per_submission, 4),
        "grading_seconds_per_submission": round(phases["grading_s"] / args.n, 4),
        "median_latency_s": round(latencies[len(latencies) // 2], 3),
        "projected_1000_s": round(projected, 1),
        "projection": "measured" if args.n == TARGET_N else f"linear from n = {args.n}",
        "target_1000_s": TARGET_S,
        "meets_target": projected < TARGET_S,
        "statuses": dict(statuses),
        "totals": {str(k): v for k, v in sorted(totals.items(), key=lambda kv: str(kv[0]))},
        "override_problems": problems,
        "report_bytes": report.stat().st_size,
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
