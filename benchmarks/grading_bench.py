"""Throughput of the instructor's grader: seconds per submission on a mixed class.

    .venv/bin/python benchmarks/grading_bench.py                 # 6 copies of 10 normal submissions
    .venv/bin/python benchmarks/grading_bench.py --copies 2 --hostile   # adds hanging and crashing ones
    .venv/bin/python benchmarks/grading_bench.py --no-zygote     # a fresh interpreter per submission

The class is built from ``tests/grading/fake_class.py`` (chapter 00): correct,
not attempted, each misconception, partial credit, a syntax error, a NumPy
monkeypatch, an nbformat v3 notebook, magics, a deleted check cell. ``--hostile``
adds an endless loop, a fork bomb, ``os._exit`` and a segmentation fault, whose
cost is set by the time limits rather than by the grader. Each configuration
grades ``copies`` copies of the set with ``python -m attnlib.grade``'s own
function, in a fresh output folder, and reports the wall time divided by the
number of submissions (start-up included), the mean time per submission as
the grader records it, and the load average (other jobs may share the
machine). It writes ``benchmarks/results/grading.json``.

``--nbgrader PYTHON`` also times ``nbgrader autograde`` from the Python of a
throwaway environment where nbgrader is installed (never the course's), on the
same number of correct submissions, for comparison.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "grading"))

import fake_class  # noqa: E402
import nbformat  # noqa: E402

from attnlib.grade import batch, sandbox  # noqa: E402
from attnlib.grade.runner import Settings  # noqa: E402

NORMAL = [
    "correct",
    "stub",
    "mis-transposed",
    "mis-batch-transpose",
    "partial-3d",
    "syntax-error",
    "monkeypatch-numpy-only",
    "old-format-v3",
    "magics",
    "check-deleted",
]
HOSTILE = ["loop-after", "fork-bomb", "os-exit", "segfault-in-function"]


def write_class(folder: Path, names: list[str], copies: int, canary: Path) -> int:
    subs = fake_class.notebooks(canary)
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for k in range(copies):
        for name in names:
            nb, _ = subs[name]
            data = nb if isinstance(nb, bytes) else nbformat.writes(nb).encode()
            (folder / f"{name}-{k:03d}.ipynb").write_bytes(data)
            count += 1
    return count


def run_config(label: str, names: list[str], copies: int, jobs: int, zygote: bool, work: Path) -> dict:
    top = work / label
    count = write_class(top / "subs", names, copies, work / "canary.txt")
    out = top / "out"
    settings = Settings(out=out, timeout_cell=5, timeout_total=40, isolation="auto", zygote=zygote)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    records = batch.grade("00-how-to-use", top / "subs", out, jobs=jobs, settings=settings, quiet=True)
    wall = time.perf_counter() - start
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    per_sub = [r.get("seconds", 0.0) for r in records if r.get("seconds")]
    return {
        "label": label,
        "submissions": count,
        "jobs": jobs,
        "zygote": zygote,
        "wall_s": round(wall, 3),
        "seconds_per_submission": round(wall / count, 3),
        "mean_latency_s": round(sum(per_sub) / len(per_sub), 3) if per_sub else None,
        "statuses": statuses,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--hostile", action="store_true", help="add hanging and crashing submissions")
    parser.add_argument("--no-zygote", action="store_true", help="also time a fresh interpreter per run")
    parser.add_argument("--nbgrader", default=None, help="python of a throwaway env with nbgrader")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "grading.json")
    args = parser.parse_args(argv)
    jobs = args.jobs or min(2, os.cpu_count() or 1)
    results = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "isolation": sandbox.probe(),
        },
        "runs": [],
    }
    work = Path(tempfile.mkdtemp(prefix="grading-bench-"))
    (work / "canary.txt").write_text("canary\n")
    try:
        configs = [("normal", NORMAL, True)]
        if args.no_zygote:
            configs.append(("normal-fresh-interpreter", NORMAL, False))
        if args.hostile:
            configs.append(("mixed-with-hostile", NORMAL + HOSTILE, True))
        for label, names, zygote in configs:
            result = run_config(label, names, args.copies, jobs, zygote, work)
            results["runs"].append(result)
            print(json.dumps(result), flush=True)
        if args.nbgrader:
            from nbgrader_compare import time_nbgrader  # noqa: PLC0415

            result = time_nbgrader(args.nbgrader, len(NORMAL) * args.copies, work / "nbgrader")
            results["runs"].append(result)
            print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
