"""Throughput of the instructor's grader: seconds per submission on a mixed class.

    .venv/bin/python benchmarks/grading_bench.py                 # 6 copies of 10 normal submissions
    .venv/bin/python benchmarks/grading_bench.py --copies 2 --hostile   # adds hanging and crashing ones
    .venv/bin/python benchmarks/grading_bench.py --no-zygote     # a fresh interpreter per submission

The class is built from ``tests/grader/fixtures.py`` (chapter 00): correct,
not attempted, each misconception, partial credit, a syntax error, a NumPy
monkeypatch, an nbformat v3 notebook, magics, a deleted check cell. ``--hostile``
adds an endless loop, a fork bomb, ``os._exit`` and a segmentation fault, whose
cost is set by the time limits rather than by the grader. Each configuration
grades ``copies`` copies of the set with ``python -m coursetools.grade``'s own
function, in a fresh output folder, and reports the wall time divided by the
number of submissions (start-up included), the mean time per submission as
the grader records it, and the load average (other jobs may share the
machine). It writes ``benchmarks/results/grading.json``.

``--nbgrader PYTHON`` also times ``nbgrader autograde`` from the Python of a
throwaway environment where nbgrader and numpy are installed (never the
course's), on ``--nbgrader-count`` submissions of an nbgrader version of the
same exercise (correct, transposed, batch-transposed), for comparison::

    python3 -m venv /tmp/nbg && /tmp/nbg/bin/pip install nbgrader==0.9.6 numpy
    .venv/bin/python benchmarks/grading_bench.py --nbgrader /tmp/nbg/bin/python
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
sys.path.insert(0, str(ROOT / "tests" / "grader"))

import fixtures  # noqa: E402
import nbformat  # noqa: E402

from coursetools.grade import batch  # noqa: E402
from coursetools.grade.grading.runner import Settings  # noqa: E402
from coursetools.grade.sandbox import api as sandbox  # noqa: E402

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
    subs = fixtures.notebooks(canary)
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


NBGRADER_TESTS = """import numpy as np
rng = np.random.default_rng(0)
for sa, sb in [((3, 2), (4, 2)), ((3, 5), (3, 5)), ((2, 3, 4), (2, 6, 4)), ((2, 3, 5, 4), (2, 3, 7, 4))]:
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    assert np.allclose(pairwise_dot(a, b), a @ np.swapaxes(b, -1, -2))
"""
NBGRADER_ANSWERS = {
    "correct": "def pairwise_dot(a, b):\n    return a @ np.swapaxes(b, -1, -2)\n",
    "transposed": "def pairwise_dot(a, b):\n    return b @ np.swapaxes(a, -1, -2)\n",
    "batch-transpose": "def pairwise_dot(a, b):\n    return a @ b.T\n",
}


def _nb_cell(source: str, **meta):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {
        "schema_version": 3,
        "locked": False,
        "solution": False,
        "grade": False,
        **meta,
    }
    return cell


def time_nbgrader(python: str, count: int, course: Path) -> dict:
    """``nbgrader autograde`` on ``count`` submissions of an nbgrader version of exercise 00."""
    import subprocess

    nbgrader = str(Path(python).with_name("nbgrader"))
    (course / "source" / "ps0").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\nc.CourseDirectory.course_id = 'bench'\n"
    )
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        _nb_cell("import numpy as np", grade_id="imports", locked=True),
        _nb_cell(
            "def pairwise_dot(a, b):\n    ### BEGIN SOLUTION\n    return a @ np.swapaxes(b, -1, -2)\n"
            "    ### END SOLUTION",
            grade_id="answer",
            solution=True,
        ),
        _nb_cell(NBGRADER_TESTS, grade_id="tests", grade=True, points=1, locked=True),
    ]
    nbformat.write(nb, course / "source" / "ps0" / "ex00.ipynb")
    env = dict(os.environ, PATH=f"{Path(python).parent}:{os.environ.get('PATH', '')}")
    subprocess.run(
        [nbgrader, "generate_assignment", "ps0", "--force"],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    release = nbformat.read(course / "release" / "ps0" / "ex00.ipynb", as_version=4)
    kinds = list(NBGRADER_ANSWERS)
    for k in range(count):
        sub = nbformat.from_dict(json.loads(json.dumps(release)))
        sub.cells[1].source = NBGRADER_ANSWERS[kinds[k % len(kinds)]]
        folder = course / "submitted" / f"s{k:03d}" / "ps0"
        folder.mkdir(parents=True)
        nbformat.write(sub, folder / "ex00.ipynb")
    start = time.perf_counter()
    proc = subprocess.run([nbgrader, "autograde", "ps0"], cwd=course, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    graded = len(list((course / "autograded").glob("*/ps0/ex00.ipynb")))
    return {
        "label": "nbgrader-0.9.6-autograde",
        "submissions": count,
        "graded": graded,
        "returncode": proc.returncode,
        "wall_s": round(wall, 3),
        "seconds_per_submission": round(wall / count, 3),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--hostile", action="store_true", help="add hanging and crashing submissions")
    parser.add_argument("--no-zygote", action="store_true", help="also time a fresh interpreter per run")
    parser.add_argument("--nbgrader", default=None, help="python of a throwaway env with nbgrader")
    parser.add_argument("--nbgrader-count", type=int, default=10, help="submissions for nbgrader")
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
            result = time_nbgrader(args.nbgrader, args.nbgrader_count, work / "nbgrader")
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
