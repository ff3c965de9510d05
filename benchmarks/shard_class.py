"""A class graded in shards: ``grade --shard K/4`` four times, then ``grade merge``; time and memory.

    .venv/bin/python benchmarks/shard_class.py                 # 200 submissions, 4 shards, 2 jobs each
    .venv/bin/python benchmarks/shard_class.py --n 2000        # the issue's class (about 10x longer)
    .venv/bin/python benchmarks/shard_class.py --no-baseline   # the shards and the merge only
    .venv/bin/python benchmarks/shard_class.py --replot        # redraw the plot of the JSON

The class is chapter 00's exercise (``tests/grader/fixtures.py``), the quickest to grade:
half the submissions the correct answer, half a partial one, each a full exercise notebook
named as a Canvas bulk download names them. The steps are those of a cluster, each its own
process of the command line, run one after the other so that each has this machine to
itself, as each share has its node on a cluster:

1. the shards: ``python -m coursetools.grade 00-how-to-use DOWNLOAD --out SHARE_K --shard K/N``
   for K = 0 .. N-1 (each stages the whole download, then grades its own learners);
2. the merge: ``python -m coursetools.grade merge SHARE_0 ... --out MERGED`` (checks the
   shares, copies the records, renders every output, with the near-identical-answer search
   over the whole class);
3. unless ``--no-baseline``: the same class on one machine (``--out SINGLE``), and a check
   that the merged ``grades.csv`` and feedback are its own, byte for byte.

For each process: the wall time, and the peak memory of its whole process tree (the grader,
its zygotes, notebook readers and sandboxed runs: their proportional set sizes summed, so
pages they share count once; sampled every 100 ms, so a peak shorter than that can be
missed). With a class smaller than ``--target`` (2,000) the JSON also extrapolates the
target's times from a fit
``seconds = start + per_submission * n`` through the shards and the baseline (two sizes);
it says so (``"extrapolated"``), it is not a measurement. Other jobs may share the
machine: the load average before and after is recorded. Output:
``benchmarks/results/shard_class.json`` and ``shard_class.png`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "grader"))

import fixtures  # noqa: E402
import nbformat  # noqa: E402

from coursetools.grade.outputs.shard import share_of  # noqa: E402

STEM = "00-how-to-use"
PARTIAL = fixtures.HEADER + (
    "    if a.ndim == 4:\n        return a @ b.T\n    return a @ np.swapaxes(b, -1, -2)\n"
)
TARGET_N = 2000


def write_class(folder: Path, n: int) -> list[str]:
    """``n`` submissions as a Canvas download; returns the learners' keys."""
    folder.mkdir(parents=True, exist_ok=True)
    correct = nbformat.writes(fixtures.with_answer(fixtures.CORRECT)).encode()
    partial = nbformat.writes(fixtures.with_answer(PARTIAL)).encode()
    keys = []
    for k in range(n):
        (folder / f"student{k:04d}_{10000 + k}_{20000 + k}_{STEM}.ipynb").write_bytes(
            correct if k % 2 == 0 else partial
        )
        keys.append(f"student{k:04d}-{10000 + k}")
    return keys


def measured(argv: list[str], every: float = 0.1) -> dict:
    """Run ``argv`` from the repository's root; its wall time and the peak of its process
    tree's summed proportional memory (PSS: a page shared by n processes counts 1/n in each,
    so the zygotes' copy-on-write pages are not counted once per process)."""
    peak = 0
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not done.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    try:
                        total += p.memory_full_info().pss  # shared pages counted once
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            peak = max(peak, total)
            done.wait(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.communicate()[0]
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {"seconds": round(seconds, 2), "peak_mb": round(peak / 2**20, 1), "output": output[-1000:]}


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``seconds = start + per * n`` through ``(n, seconds)`` points."""
    mean_n = sum(n for n, _ in points) / len(points)
    mean_s = sum(s for _, s in points) / len(points)
    var = sum((n - mean_n) ** 2 for n, _ in points)
    per = sum((n - mean_n) * (s - mean_s) for n, s in points) / var if var else mean_s / mean_n
    return mean_s - per * mean_n, per


def plot(result: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    runs = {f"share {k}": s for k, s in enumerate(result["shards"])}
    runs["merge"] = result["merge"]
    if result.get("baseline"):
        runs["one machine"] = result["baseline"]
    names = list(runs)
    colors = ["#4C72B0"] * len(result["shards"]) + ["#DD8452", "#55A868"][
        : len(names) - len(result["shards"])
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in (
        (left, "seconds", "wall time (s)"),
        (right, "peak_mb", "peak memory of the tree (MB)"),
    ):
        values = [runs[n][key] for n in names]
        bars = ax.bar(names, values, color=colors)
        ax.bar_label(bars, labels=[f"{v:g}" for v in values], fontsize=8)
        ax.set_ylabel(label)
        ax.tick_params(axis="x", rotation=30)
    sizes = ", ".join(str(s["submissions"]) for s in result["shards"])
    fig.suptitle(
        f"{result['n']} submissions of {result['assignment']} in {len(result['shards'])} shares "
        f"({sizes}), {result['jobs']} jobs each\n{result['machine']['cpus']} CPUs shared with other jobs "
        f"(load average {result['load_before']:g} before, {result['load_after']:g} after)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="submissions in the class (default 200)")
    parser.add_argument("--shards", type=int, default=4, help="shares (default 4)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once in each share")
    parser.add_argument("--target", type=int, default=TARGET_N, help="the class size to extrapolate to")
    parser.add_argument("--no-baseline", action="store_true", help="skip the one-machine run")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "shard_class.json")
    parser.add_argument("--keep", type=Path, default=None, help="keep the class and the folders here")
    parser.add_argument("--replot", action="store_true", help="measure nothing: redraw the plot of --out")
    args = parser.parse_args(argv)
    if args.replot:
        plot(json.loads(args.out.read_text(encoding="utf-8")), args.out.with_suffix(".png"))
        return 0

    work = Path(tempfile.mkdtemp(prefix="shard-class-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    download = work / "download"
    shutil.rmtree(download, ignore_errors=True)
    keys = write_class(download, args.n)
    grade = [sys.executable, "-m", "coursetools.grade"]
    load_before = os.getloadavg()[0]

    shards = []
    folders = [work / f"share-{k}" for k in range(args.shards)]
    for k, folder in enumerate(folders):
        shutil.rmtree(folder, ignore_errors=True)
        run = [*grade, STEM, str(download), "--out", str(folder), "--shard", f"{k}/{args.shards}"]
        got = measured([*run, "--jobs", str(args.jobs), "--quiet"])
        output = got.pop("output")
        got["submissions"] = sum(share_of(key, args.shards) == k for key in keys)
        graded = len(list(folder.glob("*/record.json")))
        if graded != got["submissions"]:  # a submission the grader failed on has no record
            raise SystemExit(f"share {k}/{args.shards} recorded {graded} of {got['submissions']}:\n{output}")
        shards.append(got)
        print(f"share {k}/{args.shards}: {got}", flush=True)
    merged = work / "merged"
    shutil.rmtree(merged, ignore_errors=True)
    merge = measured([*grade, "merge", *map(str, folders), "--out", str(merged), "--quiet"])
    merge.pop("output")
    print(f"merge: {merge}", flush=True)

    baseline = None
    identical = None
    if not args.no_baseline:
        single = work / "single"
        shutil.rmtree(single, ignore_errors=True)
        baseline = measured(
            [*grade, STEM, str(download), "--out", str(single), "--jobs", str(args.jobs), "--quiet"]
        )
        baseline.pop("output")
        baseline["submissions"] = args.n
        print(f"one machine: {baseline}", flush=True)
        # the staged paths differ (SINGLE/submissions vs MERGED/submissions): compare what does not name them
        same = [(merged / "grades.csv").read_bytes() == (single / "grades.csv").read_bytes()]
        for path in sorted((single / "feedback").iterdir()):
            same.append((merged / "feedback" / path.name).read_bytes() == path.read_bytes())
        identical = all(same) and len(same) == args.n + 1
    load_after = os.getloadavg()[0]

    points = [(s["submissions"], s["seconds"]) for s in shards]
    if baseline is not None:
        points.append((args.n, baseline["seconds"]))
    start, per = fit(points)
    share_target = args.target / args.shards
    result = {
        "benchmark": "shard_class",
        "assignment": STEM,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "n": args.n,
        "jobs": args.jobs,
        "how": "each share, the merge and the baseline run one after the other, each a command-line process "
        "with the machine to itself; peak_mb: the summed PSS of its process tree, sampled every 100 ms",
        "shards": shards,
        "merge": merge,
        "baseline": baseline,
        "merged_grades_and_feedback_identical_to_baseline": identical,
        "slowest_shard_s": max(s["seconds"] for s in shards),
        "cluster_wall_s": round(max(s["seconds"] for s in shards) + merge["seconds"], 2),
        "fit": {"start_s": round(start, 2), "per_submission_s": round(per, 4), "through": points},
        "extrapolated": {
            "n": args.target,
            "what": f"not measured: the fit above at {share_target:g} submissions per share; the merge "
            f"scaled in proportion from n = {args.n}, its start-up included (an upper bound)",
            "shard_s": round(start + per * share_target, 1),
            "merge_s": round(merge["seconds"] * args.target / args.n, 1),
            "one_machine_s": round(start + per * args.target, 1),
        },
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps(result, indent=2))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
