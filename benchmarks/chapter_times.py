"""How long each chapter takes to execute, top to bottom, as a learner runs it.

    .venv/bin/python benchmarks/chapter_times.py                      # every book/ chapter, twice each
    .venv/bin/python benchmarks/chapter_times.py --chapters 02 10     # some chapters
    .venv/bin/python benchmarks/chapter_times.py --threads 1 2        # compare torch thread counts

Each chapter runs in a fresh Jupyter kernel (nbclient, the course's interpreter), from the
first cell to the last, as ``jupyter execute`` would; the wall time includes the kernel's
start and the imports. A chapter runs ``--repeats`` times and its fastest run is kept: other
jobs on the machine can only add time. ``--threads N`` sets ``OMP_NUM_THREADS=N`` in the
kernel's environment (torch's intra-op threads); without it the kernel gets the
environment's default (torch uses one thread per core). The load average before and after
each run is written beside it, so a reader can tell a quiet measurement from a busy one.

Writes ``benchmarks/results/chapter_times.json`` (merging with the chapters already
there unless ``--fresh``) and ``chapter_times.png``. The course's aim: every chapter under
20 s on 2 idle cores, 60 s at most. No test asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
AIM_SECONDS, LIMIT_SECONDS = 20, 60


def machine() -> dict:
    """The CPU, its core count, torch's float path and version: what a time depends on."""
    import torch

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def run_chapter(path: Path, threads: int | None) -> dict:
    """Execute one notebook in a fresh kernel; its wall time and the load around it."""
    import nbformat
    from nbclient import NotebookClient

    env_before = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    try:
        nb = nbformat.read(path, as_version=4)
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
        seconds = time.perf_counter() - start
        load_after = os.getloadavg()[0]
    finally:
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {
        "seconds": round(seconds, 1),
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
    }


def plot(record: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chapters = sorted(record["chapters"])
    settings = sorted({key for c in chapters for key in record["chapters"][c]})
    fig, ax = plt.subplots(figsize=(7, 3.4))
    width = 0.8 / max(len(settings), 1)
    for i, setting in enumerate(settings):
        xs = [k + i * width for k, c in enumerate(chapters) if setting in record["chapters"][c]]
        ys = [record["chapters"][c][setting]["seconds"] for c in chapters if setting in record["chapters"][c]]
        ax.bar(xs, ys, width=width, label=setting)
    ax.axhline(AIM_SECONDS, color="black", lw=0.8, ls="--", label=f"aim: {AIM_SECONDS} s")
    ax.set_xticks([k + width * (len(settings) - 1) / 2 for k in range(len(chapters))])
    ax.set_xticklabels([c[:2] for c in chapters])
    ax.set_xlabel("chapter")
    ax.set_ylabel("seconds, top to bottom")
    m = record["machine"]
    ax.set_title(f"{m['cores']} cores, {m['capability']}, torch {m['torch']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="+", help="chapter numbers, e.g. 02 10 (default: all)")
    parser.add_argument("--threads", type=int, nargs="+", help="OMP_NUM_THREADS values to compare")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fresh", action="store_true", help="do not merge with the existing results")
    args = parser.parse_args(argv)

    paths = sorted((ROOT / "book").glob("[0-9][0-9]-*.ipynb"))
    if args.chapters:
        paths = [p for p in paths if p.name[:2] in {c.zfill(2) for c in args.chapters}]
    if not paths:
        sys.exit("no chapter matches --chapters")
    args.out.mkdir(parents=True, exist_ok=True)
    out_json = args.out / "chapter_times.json"
    record = {"chapters": {}}
    if out_json.exists() and not args.fresh:
        record = json.loads(out_json.read_text(encoding="utf-8"))
    record["machine"] = machine()
    record["date"] = datetime.date.today().isoformat()
    record["aim_seconds"], record["limit_seconds"] = AIM_SECONDS, LIMIT_SECONDS
    record["how"] = (
        f"fresh kernel per run (nbclient), fastest of {args.repeats}; wall time includes the kernel's "
        "start and the imports; 'default threads' leaves OMP_NUM_THREADS unset"
    )
    for threads in args.threads or [None]:
        setting = "default threads" if threads is None else f"{threads} thread{'s' if threads > 1 else ''}"
        for path in paths:
            runs = [run_chapter(path, threads) for _ in range(args.repeats)]
            best = min(runs, key=lambda r: r["seconds"])
            record["chapters"].setdefault(path.stem, {})[setting] = {
                **best,
                "runs": [r["seconds"] for r in runs],
            }
            flag = "" if best["seconds"] <= AIM_SECONDS else f"  (over the {AIM_SECONDS} s aim)"
            print(f"{path.stem:32s} {setting:16s} {best['seconds']:6.1f} s  load {best['load_before']}{flag}")
            out_json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    plot(record, args.out / "chapter_times.png")
    print(f"wrote {out_json} and {args.out / 'chapter_times.png'}")


if __name__ == "__main__":
    main()
